# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a chart step changes in a Helm release, as helm_release and a plan see it (pure): two
renderings compared object by object - the TensorFusionClusters' pools that the post-renderer
keeps live compared by the chart's own record of them (gpupool/pool_keeper.py), kept objects that
only one side renders, the container images from and to - and the diff of a revision, shown with
the live pools and its secrets masked."""

from __future__ import annotations

import copy
import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import pool_keeper
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.release import UPGRADE_STATES


def _objects_by_key(manifest, normalize=pool_keeper.comparable):
    objects = {}
    for doc in map(normalize, redact.parse_manifest(manifest)):
        meta = doc.get("metadata") or {}
        objects[(doc.get("apiVersion"), doc.get("kind"), meta.get("namespace"), meta.get("name"))] = doc
    return objects


KEEP = "helm.sh/resource-policy"


def _kept(doc):
    return ((doc.get("metadata") or {}).get("annotations") or {}).get(KEEP) == "keep"


def kept_one_sided(before, after):
    """Keys of objects annotated resource-policy keep that only one manifest holds (a chart that
    renders such an object only while it is absent, through lookup)."""
    b, a = _objects_by_key(before or ""), _objects_by_key(after or "")
    return [k for k in set(b) ^ set(a) if _kept(b.get(k) or a.get(k))]


def same_manifest(before, after, exists=None, ignore_pools=False):
    """Rendered manifests equal as objects (see manifest_changes: nothing added, changed or
    removed)."""
    return not any(manifest_changes(before, after, ignore_pools, exists).values())


def rollback_blockers(current_manifest, target_manifest, exists):
    """Objects that ``helm rollback`` refuses ("no <kind> with the name ... found"): in the target
    revision, not in the current one, yet present in the cluster."""
    cur, tgt = _objects_by_key(current_manifest or ""), _objects_by_key(target_manifest or "")
    return sorted((k for k in set(tgt) - set(cur) if exists(k)), key=str)


def changes(deployed, desired, exists=None, ignore_pools=False):
    """What differs between a deployed revision and a desired one: a list of reasons."""
    reasons = []
    if deployed is None:
        return ["the release does not exist"]
    if deployed.get("status") not in UPGRADE_STATES:
        reasons.append("its last revision is %s" % deployed.get("status"))
    if deployed.get("chart") != desired.get("chart") or \
            deployed.get("chart_version") != desired.get("chart_version"):
        reasons.append("chart %s-%s -> %s-%s" % (deployed.get("chart"), deployed.get("chart_version"),
                                                 desired.get("chart"), desired.get("chart_version")))
    if (deployed.get("values") or {}) != (desired.get("values") or {}):
        reasons.append("values differ")
    if not same_manifest(deployed.get("manifest"), desired.get("manifest"), exists, ignore_pools):
        reasons.append("rendered manifest differs")
    return reasons


def manifest_changes(before, after, ignore_pools=False, exists=None):
    """The objects a new rendering adds, changes and removes, by kind: {"added": {kind: [names]},
    ...} (names as namespace/name; the content is in the diff, secrets masked); document order and
    formatting aside. A kept object that only one side renders does not count when
    ``exists(key)`` says it is in the cluster. ``ignore_pools``: the TensorFusionClusters' pools
    are not compared (kept live). Exactly what makes a release's manifest differ (changes())."""
    normalize = pool_keeper.without_pools if ignore_pools else pool_keeper.comparable
    b, a = _objects_by_key(before or "", normalize), _objects_by_key(after or "", normalize)
    if exists is not None:
        for key in kept_one_sided(before, after):
            if exists(key):
                b.pop(key, None)
                a.pop(key, None)
    out = {"added": {}, "changed": {}, "removed": {}}

    def put(what, key):
        _api, kind, namespace, name = key
        out[what].setdefault(kind or "?", []).append("%s/%s" % (namespace, name) if namespace else str(name))
    for key in sorted(set(a) - set(b), key=str):
        put("added", key)
    for key in sorted(set(b) - set(a), key=str):
        put("removed", key)
    for key in sorted(set(a) & set(b), key=str):
        if a[key] != b[key]:
            put("changed", key)
    return out


def _images(doc):
    """{container name: image} of a workload's Pod template (init containers too)."""
    spec = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    return dict((c.get("name"), c.get("image")) for key in ("initContainers", "containers")
                for c in spec.get(key) or [] if isinstance(c, dict))


def image_changes(before, after):
    """The container images a new rendering changes, from and to, object by object: each
    {object: "<Kind> <namespace>/<name>", container, from, to} (from None: a new container or
    object). TensorFusionClusters' pools are not the chart step's (see gpupool_rollout's
    spec_changes)."""
    b, a = _objects_by_key(before or ""), _objects_by_key(after or "")
    out = []
    for key in sorted(a, key=str):
        _api, kind, namespace, name = key
        old, new = _images(b.get(key) or {}), _images(a[key])
        for container in sorted(new, key=str):
            if new[container] != old.get(container):
                out.append({"object": "%s %s" % (kind, "%s/%s" % (namespace, name) if namespace else name),
                            "container": container, "from": old.get(container), "to": new[container]})
    return out


def with_live_pools(manifest, live):
    """``manifest`` with each TensorFusionCluster that is live carrying the live pools (``live``:
    {name: cluster}, pool_keeper's), as the post-renderer makes every rendering of a chart step
    that keeps the pools: a revision's stored pools are those of its own chart step, often older
    than the live ones, and shown as "before" they would turn the change's direction round."""
    if not live or not manifest:
        return manifest
    docs = redact.parse_manifest(manifest)
    for doc in docs:
        if chart_pools.is_cluster(doc) and chart_pools.object_name(doc) in live:
            doc.setdefault("spec", {})["gpuPools"] = copy.deepcopy(
                (live[chart_pools.object_name(doc)].get("spec") or {}).get("gpuPools") or [])
    return "".join("---\n" + yamldoc.dump(d, default_flow_style=False, sort_keys=True) for d in docs)


def release_view(info, live=None):
    """Values and manifest of a revision as they may be shown: secrets hashed; with ``live``, its
    TensorFusionClusters carry the live pools (with_live_pools)."""
    if info is None:
        return {"values": {}, "manifest": ""}
    return {"values": redact.redact_values(info.get("values") or {}),
            "manifest": redact.mask_manifest(with_live_pools(info.get("manifest") or "", live))}


def diff_of(before, after, what, live=None):
    """--diff of a release change; ``live``: the live clusters when the pools are kept (the chart
    step does not move them: the pools step does, and its own diff says how)."""
    b, a = release_view(before, live), release_view(after, live)
    return [{"before_header": "%s values" % what, "after_header": "%s values" % what,
             "before": json.dumps(b["values"], indent=2, sort_keys=True) + "\n",
             "after": json.dumps(a["values"], indent=2, sort_keys=True) + "\n"},
            {"before_header": "%s manifest" % what, "after_header": "%s manifest" % what,
             "before": b["manifest"], "after": a["manifest"]}]
