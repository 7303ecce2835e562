# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_release's side of keeping the pools under the runbook's control (gpupool/chart_pools.py says
why): the live TensorFusionClusters read before helm renders, the post-renderer set up around
the helm commands, what the chart rendered for the pools read back, and the manifests compared
without the pools that the post-renderer carried."""

from __future__ import annotations

import copy
import json
import os
import sys

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError, TfopsError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import (
    ClusterEditor,
    pause_transform,
)


class PoolKeeper:
    """One per helm_release task. ``enabled`` false: it adds nothing and reports nothing."""

    def __init__(self, kube, temp_dir, helm_major, enabled=True):
        self.kube = kube
        self.temp_dir = temp_dir
        self.helm_major = helm_major
        self.enabled = bool(enabled) and kube is not None
        self.live = {}
        self._flags, self._env, self._chart_out = [], {}, None
        self._rounds = 0

    def prepare(self):
        """Read the live TensorFusionClusters and write the post-renderer; call before helm runs."""
        if not self.enabled:
            return
        if not chart_pools.HAS_YAML:
            raise TfopsError("keep_pools needs the Python library PyYAML on the host that runs "
                             "helm_release")
        self.live = live_clusters(self.kube)
        self._rounds += 1
        directory = os.path.join(self.temp_dir, "post-render-%d" % self._rounds)
        os.mkdir(directory, 0o700)
        self._flags, self._env, self._chart_out = chart_pools.install_post_renderer(
            directory, sys.executable, self.helm_major, self.live)

    def flags(self):
        return list(self._flags)

    def env(self):
        return dict(self._env)

    def chart_rendering(self):
        """{cluster: {entry: component view}} that the chart rendered in the last helm command."""
        if not self._chart_out or not os.path.exists(self._chart_out):
            return {}
        with open(self._chart_out, encoding="utf-8") as handle:
            return json.load(handle)

    def changes(self, current_manifest):
        """{cluster: {entry: {component: options}}}: what the new chart renders differently for
        the pools than the previous chart step did, for the pools step to roll."""
        if not self.enabled:
            return {}
        previous = dict((chart_pools.object_name(doc), doc) for doc in documents(current_manifest)
                        if chart_pools.is_cluster(doc))
        out = {}
        for cluster, rendered in sorted(self.chart_rendering().items()):
            if cluster not in self.live:
                continue  # a first install: the operator creates its pools from the rendering
            before = chart_pools.previous_rendering(self.live[cluster], previous.get(cluster))
            moved = chart_pools.chart_changes(before, rendered)
            entries = chart_pools.entries_by_name(self.live[cluster])
            for entry, components in moved.items():
                template = (entries.get(entry) or {}).get("specTemplate") or {}
                for component, options in components.items():
                    # Whether the pool rolls this component now: a plain chart upgrade would only
                    # record a change of one whose flag is off, and so does the pools step.
                    options["auto_update"] = rollout.auto_update(template, component)
            if moved:
                out[cluster] = moved
        return out


PROVIDER_KIND = "ProviderConfig"


def provider_config_changes(desired_manifest, live_providers):
    """{ProviderConfig name: vendor} whose spec the new rendering changes. Upstream rolls every
    hypervisor of that vendor on such a change (its revision enters the hypervisor hash)."""
    changed = {}
    for doc in documents(desired_manifest):
        if doc.get("kind") != PROVIDER_KIND or not str(doc.get("apiVersion", "")).startswith(TF_GROUP):
            continue
        name = chart_pools.object_name(doc)
        live = live_providers.get(name)
        if live is not None and live.get("spec") != doc.get("spec"):
            changed[name] = ((doc.get("spec") or {}).get("vendor") or "")
    return changed


A_PROVIDER_HASH = "tensor-fusion.ai/provider-config-hash"


def wait_providers_processed(kube, names, before, deadline):
    """Watch the changed ProviderConfigs until the operator has recorded their new spec (its
    provider-config-hash annotation moves) and so has put the new revision on the pools: a pool
    resumed earlier would start a campaign that the revision then restarts from batch 0."""
    watcher = ObjectWatcher(kube, kube.resource(PROVIDER_KIND, group=TF_GROUP))
    watcher.start()

    def processed(objects):
        waiting = [n for n in names if ((objects.get((None, n)) or {}).get("metadata", {}).get(
            "annotations") or {}).get(A_PROVIDER_HASH) == before.get(n)]
        return not waiting, "the operator has not yet taken the new spec of ProviderConfig %s" % ", ".join(waiting)
    watcher.wait(processed, deadline)


def provider_hashes(providers):
    return dict((name, ((pc.get("metadata") or {}).get("annotations") or {}).get(A_PROVIDER_HASH))
                for name, pc in providers.items())


def vendor_of(spec_template):
    return (((spec_template or {}).get("nodeManagerConfig") or {}).get("defaultVendor") or "NVIDIA")


def entries_to_hold(live, vendors):
    """[(cluster, entry)] whose hypervisors a ProviderConfig change of ``vendors`` would start
    rolling now: autoUpdateHypervisor on and the vendor's pools."""
    wanted = set(v.strip().lower() for v in vendors)
    held = []
    for cluster, tfc in sorted(live.items()):
        for entry in (tfc.get("spec") or {}).get("gpuPools") or []:
            template = entry.get("specTemplate") or {}
            if vendor_of(template).strip().lower() in wanted and rollout.auto_update(template, "hypervisor"):
                held.append((cluster, entry.get("name")))
    return held


def live_providers(kube):
    """{name: ProviderConfig} as they are (none when the kind is not served yet)."""
    try:
        api = kube.resource(PROVIDER_KIND, group=TF_GROUP)
        items = kube.call("list", "providerconfigs", api.get).to_dict()["items"]
    except ApiError as exc:
        if exc.status == 404:
            return {}
        raise
    return dict((item["metadata"]["name"], {"metadata": {"annotations": (item["metadata"].get(
        "annotations") or {})}, "spec": item.get("spec")}) for item in items)


def live_clusters(kube):
    """{name: TensorFusionCluster} as they are (none when the CRD is not installed yet)."""
    try:
        api = kube.resource("TensorFusionCluster", group=TF_GROUP)
        items = kube.call("list", "tensorfusionclusters", api.get).to_dict()["items"]
    except ApiError as exc:
        if exc.status == 404:  # not served (yet): nothing live to keep
            return {}
        # Not knowing the live pools would let the chart revert them: never render blind.
        raise
    return dict((item["metadata"]["name"], _kept(item)) for item in items)


def _kept(item):
    """What a live TensorFusionCluster is to the post-renderer and to ``changes``: its name, its
    pools and the record of the chart's last pool rendering (without it every later chart step
    would compare the chart with the pools the previous manifest carried, not with the chart)."""
    metadata = {"name": item["metadata"]["name"]}
    record = ((item.get("metadata") or {}).get("annotations") or {}).get(chart_pools.CHART_POOLS)
    if record:
        metadata["annotations"] = {chart_pools.CHART_POOLS: record}
    return {"metadata": metadata,
            "spec": {"gpuPools": copy.deepcopy((item.get("spec") or {}).get("gpuPools") or [])}}


def comparable(doc):
    """A manifest document as the comparison of two renderings sees it: a TensorFusionCluster
    whose pools the post-renderer carried is compared by what the chart rendered for them (the
    annotation), not by the live pools it carries, which the pools step moves on purpose."""
    if chart_pools.is_cluster(doc) and chart_pools.recorded_chart_pools(doc) is not None:
        doc = copy.deepcopy(doc)
        doc.get("spec", {}).pop("gpuPools", None)
    return doc


def without_pools(doc):
    """A TensorFusionCluster without its pools and the record of them: how a rollback that keeps
    the live pools compares revisions (the pools come back through the componentConfig restore)."""
    doc = comparable(doc)
    if chart_pools.is_cluster(doc):
        doc = copy.deepcopy(doc)
        doc.get("spec", {}).pop("gpuPools", None)
        ((doc.get("metadata") or {}).get("annotations") or {}).pop(chart_pools.CHART_POOLS, None)
    return doc


def documents(manifest):
    if not manifest or not yamldoc.HAS_YAML:
        return []
    try:
        return [d for d in yamldoc.load_all(manifest) if isinstance(d, dict)]
    except yamldoc.YAMLError:
        return []


def chart_resets(live_clusters, manifest, previous=None):
    """What a rendering applied without the live pools (keep_pools off) sets back on them:
    [{cluster, pool, changes: [{field, from, to} or {field, hidden}]}] for each pool entry that
    both the rendering and the live cluster (``live_clusters``: {name: TensorFusionCluster}, as
    live_clusters() reads them) have, when they differ. Helm patches a custom resource with the
    difference between the ``previous`` rendering and the new one: when the rendered pools are the
    same, it sets nothing back. Pure; Pod templates are named, never shown."""
    rendered_before = dict((chart_pools.object_name(d), (d.get("spec") or {}).get("gpuPools"))
                           for d in documents(previous) if chart_pools.is_cluster(d))
    out = []
    for doc in documents(manifest):
        if not chart_pools.is_cluster(doc):
            continue
        name = chart_pools.object_name(doc)
        live = live_clusters.get(name)
        if not live or rendered_before.get(name, object()) == (doc.get("spec") or {}).get("gpuPools"):
            continue
        live_entries = dict((e.get("name"), e) for e in (live.get("spec") or {}).get("gpuPools") or [])
        for entry in (doc.get("spec") or {}).get("gpuPools") or []:
            before = live_entries.get(entry.get("name"))
            if before is None:
                continue
            changes = rollout.field_changes(rollout.pool_view(before.get("specTemplate") or {}),
                                            rollout.pool_view(entry.get("specTemplate") or {}))
            if changes:
                out.append({"cluster": name, "pool": entry.get("name"), "changes": changes})
    return out


def hold(kube, held):
    """Pause the hypervisor campaigns of ``held`` [(cluster, entry)] before the chart step, the
    way a deadline pauses them (autoUpdateHypervisor false, the pause marker on the cluster): the
    operator then only records the new hash when the ProviderConfig changes, and the pools step
    resumes each pool and rolls it once, in the window, at the run's policy."""
    by_cluster = {}
    for cluster, entry in held:
        by_cluster.setdefault(cluster, []).append(entry)
    for cluster, entries in sorted(by_cluster.items()):
        def pause(tfc, entries=entries):
            for entry in entries:
                tfc = pause_transform(entry, ["hypervisor"])(tfc)
            return tfc
        ClusterEditor(kube, cluster).update(pause)
