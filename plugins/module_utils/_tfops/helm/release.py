# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_release: ``helm upgrade --install`` and ``helm rollback`` (to a revision or to a snapshot
bundle), idempotent by comparing chart version, user values and rendered manifest with what is
deployed, check mode through a server-side dry run, recovery of releases stuck pending-*."""

from __future__ import annotations

import copy
import json
import os
from urllib.parse import urlparse

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import plan as plans
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import pool_keeper
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    HelmError,
    InvalidInput,
    PlanRefused,
)

UPGRADE_STATES = ("deployed",)


# ---- pure decisions -----------------------------------------------------------------------------
def check_repo_url(url, option="chart_repo_url"):
    """A chart repository URL as helm's --repo takes it: http:// or https:// with a host (helm
    itself would only say it found no protocol handler)."""
    parsed = urlparse(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc or " " in url:
        raise InvalidInput("%s: %r is not an http:// or https:// URL of a chart repository (an "
                           "oci:// chart or a chart folder goes in the chart reference, without a "
                           "repository URL)" % (option, url))


# Options that only a state that uses them takes; given with another state they would be ignored.
STATE_OPTIONS = (("revision", "rolled_back"), ("snapshot", "rolled_back"))


def validate(params):
    modes = [m for m in ("reuse_values", "reset_then_reuse_values") if params.get(m)]
    if len(modes) > 1:
        raise InvalidInput("reuse_values and reset_then_reuse_values are mutually exclusive")
    if modes and params.get("reset_values"):
        raise InvalidInput("reset_values and %s are mutually exclusive: reset_values starts from the "
                           "chart's values, %s from the last release's" % (modes[0], modes[0]))
    for option, state in STATE_OPTIONS:
        if params.get(option) is not None and params["state"] != state:
            raise InvalidInput("%s goes with state: %s; state: %s would ignore it" % (
                option, state, params["state"]))
    if params.get("snapshot") is None:
        if params.get("signing_key"):
            raise InvalidInput("signing_key goes with snapshot (the key a bundle was signed with)")
        if params.get("allow_unsigned"):
            raise InvalidInput("allow_unsigned goes with snapshot (a bundle with no signature)")
    if params["state"] == "rolled_back":
        if (params.get("revision") is None) == (params.get("snapshot") is None):
            raise InvalidInput("state=rolled_back needs exactly one of revision and snapshot")
        if params.get("revision") is not None and params["revision"] < 1:
            raise InvalidInput("revision must be 1 or more")
    if params.get("chart_repo_url"):
        check_repo_url(params["chart_repo_url"])
    for item in params.get("set_values") or []:
        if "=" not in (item.get("value") or ""):
            raise InvalidInput("set_values: %r is not key=value (use key= for an empty string)"
                               % item.get("value"))
    if params.get("extra_args") is not None:
        params["extra_args"] = helmcli.parse_extra_args(params["extra_args"])


def effective_flags(params, recorded=None):
    """({option: value}, {option: source}) of the helm flags a run uses (disable_openapi_validation,
    skip_crds, no_hooks, extra_args). An option the task sets wins (source ``task``); one it leaves
    unset takes the value a snapshot recorded for the upgrade that followed it (``snapshot``), so
    that a rollback to that snapshot passes what the upgrade needed; else off (``default``)."""
    recorded = recorded or {}
    flags, sources = {}, {}
    for key in helmcli.FLAG_OPTIONS:
        if params.get(key) is not None:
            flags[key], sources[key] = params[key], "task"
        elif recorded.get(key) is not None:
            flags[key], sources[key] = recorded[key], "snapshot"
        else:
            flags[key], sources[key] = ([] if key == "extra_args" else False), "default"
        flags[key] = list(flags[key]) if key == "extra_args" else bool(flags[key])
    return flags, sources


def recorded_flags(params):
    """What a snapshot records of the upgrade's helm flags (``helm_flags``): normalised, complete."""
    if params is None:
        return None
    flags = effective_flags(dict(params, extra_args=helmcli.parse_extra_args(
        params.get("extra_args"), "helm_flags.extra_args")))[0]
    return flags


def upgrade_args(params, version, values_file=None, flags=None, known=None):
    """The ``helm upgrade --install`` arguments for a task (without --dry-run/--output); ``flags``
    (effective_flags) default to the task's own, ``known`` is what this helm lists for upgrade."""
    args = ["upgrade", "--install", params["name"], params["chart_ref"],
            "--namespace", params["namespace"]]
    if params.get("chart_repo_url"):
        args += ["--repo", params["chart_repo_url"]]
    if params.get("chart_version"):
        args += ["--version", params["chart_version"]]
    if params.get("create_namespace"):
        args.append("--create-namespace")
    for path in params.get("values_files") or []:
        args += ["-f", path if "://" in path else os.path.expanduser(path)]
    if values_file:
        args += ["-f", values_file]
    for item in params.get("set_values") or []:
        args += [helmcli.SET_FLAGS[item.get("value_type") or "raw"], item["value"]]
    if params.get("reuse_values"):
        args.append("--reuse-values")
    elif params.get("reset_then_reuse_values"):
        if version[0] == 3 and version[1] < 14:
            raise InvalidInput("reset_then_reuse_values needs helm >= 3.14; this helm is %s"
                               % helmcli.version_text(version))
        args.append("--reset-then-reuse-values")
    elif params.get("reset_values") is not False:  # unset: reset, as helm 3 otherwise reuses
        args.append("--reset-values")
    if flags is None:
        flags = effective_flags(params)[0]
    return args + helmcli.flag_args(flags, helmcli.UPGRADE, version, known)


def write_args(params, version, seconds):
    """Flags of a real run: wait, timeout, atomic mapped to the helm major."""
    args = ["--timeout", helmcli.seconds_flag(seconds)]
    if params.get("wait"):
        args.append("--wait")
    if params.get("atomic"):
        args.append(helmcli.atomic_flag(version))
    return args


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


def check_plan_identity(identity, expected):
    """Refuse a chart or rendered values other than those a saved plan was made with."""
    drift = ["chart: changed (same name and version, other content)"
             if expected.get("chart_digest") and identity["chart_digest"] != expected["chart_digest"] else None,
             "rendered values: changed" if expected.get("values_digest") and
             identity["values_digest"] != expected["values_digest"] else None]
    drift = [d for d in drift if d]
    if drift:
        raise PlanRefused("the chart step renders something else than the plan saw: %s; nothing was "
                          "written, make a new plan" % "; ".join(drift), drift=drift)


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


def from_dry_run(out):
    """The release a dry run (or a real run) with ``-o json`` prints, as a revision info."""
    try:
        rel = json.loads(out)
    except ValueError:
        raise HelmError("helm printed no JSON release: %s" % (out or "")[:300])
    meta = ((rel.get("chart") or {}).get("metadata") or {})
    return {"revision": rel.get("version"), "status": (rel.get("info") or {}).get("status"),
            "chart": meta.get("name"), "chart_version": meta.get("version"),
            "app_version": meta.get("appVersion"), "values": rel.get("config") or {},
            "manifest": rel.get("manifest") or "",
            # The chart as helm loaded it (metadata, templates, default values, files): a
            # re-published chart of the same version has another digest.
            "chart_digest": plans.plain_digest(rel.get("chart") or {})}


def secrets_in(info):
    """Every secret-looking string a revision info holds (for no_log_values)."""
    if not info:
        return []
    found = redact.secret_leaves(info.get("values") or {})
    found += redact.secret_leaves(info.get("computed_values") or {})
    found += redact.manifest_secret_values(info.get("manifest") or "")
    return found


def params_secrets(params):
    """Secret-looking values in the task's own arguments."""
    found = redact.secret_leaves(params.get("values") or {})
    for item in params.get("set_values") or []:
        key, _sep, value = item["value"].partition("=")
        if value and redact.set_value_is_secret(key + "="):
            found.append(value)
    return [v for v in found if len(v) >= 3]


def summary(info):
    return {"revision": info.get("revision"), "status": info.get("status"), "chart": info.get("chart"),
            "chart_version": info.get("chart_version"), "app_version": info.get("app_version")}


def before_versions(info):
    """The chart and app version of the release before the task (None for each when it did not
    exist): a rollback's report says which chart it came from."""
    return {"chart_version_before": (info or {}).get("chart_version"),
            "app_version_before": (info or {}).get("app_version")}
