# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Restoring the pools of a snapshot's TensorFusionClusters - each pool's componentConfig and its
rolling policy (batchPercentage, batchInterval, the autoUpdate flags): the write goes through
gpupool's ClusterEditor (optimistic, keeps other fields) and the wait is gpupool_rollout's
campaign-tracking, stale-status-guarded RolloutWait."""

from __future__ import annotations

import copy

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    Superseded,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import (
    ClusterEditor,
    PoolObserver,
    RolloutWait,
    paused_marker,
    start_watch,
    with_paused_marker,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.snapshots import unmask_like
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.values import describe_changes

# How many replaced campaigns a restore follows (helm's own changes start one or two before ours).
MAX_FOLLOWS = 5


def with_restored(live_template, restored):
    """``live_template`` with the parts of ``restored`` (a gpupool/rollout.py pool_view) a restore
    gives back; every other field of the live pool is kept as it is."""
    new = copy.deepcopy(live_template or {})
    new["componentConfig"] = copy.deepcopy(restored["componentConfig"])
    if restored["policy"] is not None:
        new.setdefault("nodeManagerConfig", {})["nodePoolRollingUpdatePolicy"] = copy.deepcopy(restored["policy"])
    else:
        (new.get("nodeManagerConfig") or {}).pop("nodePoolRollingUpdatePolicy", None)
    return new


def plan_cluster(saved_tfc, current_tfc, key=None):
    """[(pool entry name, current restorable view, restored view, changed components, GPUPool
    name)] for the pools of a saved cluster that still exist and whose componentConfig or rolling
    policy differs (``key``: the bundle's signing.BundleKey, for its keyed fingerprints of secret
    values); see rollout.pool_view()."""
    plans = []
    current_entries = dict((e.get("name"), e) for e in (current_tfc.get("spec") or {}).get("gpuPools") or [])
    for entry in (saved_tfc.get("spec") or {}).get("gpuPools") or []:
        live = current_entries.get(entry.get("name"))
        if live is None:
            continue
        live_template = live.get("specTemplate") or {}
        current = rollout.pool_view(live_template)
        saved = rollout.pool_view(entry.get("specTemplate") or {})
        saved["componentConfig"] = unmask_like(saved["componentConfig"], current["componentConfig"],
                                               "%s pool %s componentConfig" % (
                                                   saved_tfc["metadata"]["name"], entry.get("name")), key)
        if saved == current:
            continue
        plans.append((entry["name"], current, saved,
                      rollout.hash_changed_components(live_template, with_restored(live_template, saved)),
                      rollout.gpupool_name(current_tfc, list(current_entries).index(entry["name"]))))
    return plans


def restored_template(live_template, restored, resume=False):
    """The pool's specTemplate a restore writes: ``live_template`` with the restored parts and,
    with ``resume``, autoUpdateHypervisor on (the hold of the chart step, or a pause of this
    collection, ends with the write)."""
    template = with_restored(live_template, restored)
    return rollout.set_auto_update(template, ["hypervisor"], True) if resume else template


def _restore_pool(pool_name, restored, resume=False):
    """The write of a restore (restored_template); the pause marker keeps only the components
    whose flag stays off."""
    def transform(tfc):
        index = rollout.find_pool_index(tfc, pool_name)
        template = restored_template(tfc["spec"]["gpuPools"][index]["specTemplate"], restored, resume)
        tfc["spec"]["gpuPools"][index]["specTemplate"] = template
        marker = [c for c in paused_marker(tfc).get(pool_name, []) if not rollout.auto_update(template, c)]
        return with_paused_marker(tfc, pool_name, marker)
    return transform


class ComponentConfigRestore:
    """Restore the saved componentConfig and rolling policy of every pool that differs (see
    restorable), around a helm rollback: ``prepare()`` before it (what differs now, the watches
    and the campaign trackers, so that a campaign the helm rollback itself starts is seen),
    ``finish()`` after it (what the helm rollback made differ too, then write what still differs,
    then the guarded wait)."""

    def __init__(self, kube, clusters, check_mode, wait, deadline, stall_timeout=600,
                 namespace=None, key=None):
        self.kube = kube
        self.clusters = clusters
        self.check_mode = check_mode
        self.wait = wait
        self.deadline = deadline
        self.stall_timeout = stall_timeout
        self.namespace = namespace  # the release's, where the operator runs its hypervisor Pods
        self.key = key  # the bundle's, for its keyed fingerprints
        self.warnings = []
        self.plans = []

    def prepare(self):
        for saved in self.clusters:
            name = saved["metadata"]["name"]
            try:
                editor = ClusterEditor(self.kube, name)
                current = editor.read()
            except InvalidInput:
                self.warnings.append("TensorFusionCluster %s of the snapshot no longer exists; "
                                     "its pools were not restored" % name)
                continue
            self._plan(saved, editor, current)
        return self.plans

    def _plan(self, saved, editor, current):
        """Plan (and watch) every pool of ``saved`` that differs in ``current`` and is not planned."""
        for pool, before, after, changed, gpupool in plan_cluster(saved, current, self.key):
            if any(p["editor"].name == editor.name and p["pool"] == pool for p in self.plans):
                continue
            plan = {"editor": editor, "pool": pool, "before": before, "after": after,
                    "changed": changed, "gpupool": gpupool, "waits": [], "watcher": None,
                    "trackers": [], "changes": rollout.field_changes(before, after)}
            if "hypervisor" in changed and "hypervisor" in paused_marker(current).get(pool, []):
                # Paused by this collection (a failed health gate, a window's end): the
                # restore's write resumes it, or the restored hypervisor would never roll.
                plan["resume"] = True
            if not self.check_mode and self.wait and changed:
                self._start_wait(plan, current)
            self.plans.append(plan)

    def resume_held(self, held):
        """The pools [(cluster, entry)] whose hypervisors the chart step held for a ProviderConfig
        change: the restore's write (componentConfig and policy, if they differ, and the flag back
        on) resumes each, and its campaign is waited for like a restored one."""
        for cluster, entry in held:
            plan = next((p for p in self.plans if p["editor"].name == cluster and p["pool"] == entry), None)
            editor = plan["editor"] if plan else ClusterEditor(self.kube, cluster)
            current = editor.read()
            index = rollout.find_pool_index(current, entry)
            if plan is None:
                view = rollout.pool_view(current["spec"]["gpuPools"][index]["specTemplate"])
                plan = {"editor": editor, "pool": entry, "before": view, "after": view,
                        "changed": [], "gpupool": rollout.gpupool_name(current, index), "waits": [],
                        "watcher": None, "trackers": [], "changes": []}
                self.plans.append(plan)
            plan["resume"] = True
            plan["changed"] = sorted(set(plan["changed"]) | {"hypervisor"})
            if not self.check_mode and self.wait:
                plan["waits"], plan["watcher"], plan["trackers"] = [], None, []
                self._start_wait(plan, current)

    def _start_wait(self, plan, tfc):
        observer = PoolObserver(self.kube, plan["gpupool"], self.namespace)
        live = tfc["spec"]["gpuPools"][rollout.find_pool_index(tfc, plan["pool"])]["specTemplate"]
        spec = restored_template(live, plan["after"], plan.get("resume"))
        for comp in plan["changed"]:
            if not rollout.auto_update(spec, comp):
                self.warnings.append("%s: autoUpdate is false on pool %s; the restored %s "
                                     "configuration is recorded but the operator will not roll it"
                                     % (comp, plan["pool"], comp))
            elif observer.consumers(comp) == 0:
                self.warnings.append("%s: GPUPool %s has nothing for a %s campaign to update; not "
                                     "waiting for it" % (comp, plan["gpupool"], comp))
            else:
                plan["waits"].append(comp)
        if plan["waits"]:
            plan["observer"] = observer
            plan["watcher"] = start_watch(self.kube, plan["gpupool"])
            before = plan["watcher"].objects.get((None, plan["gpupool"])) or {}
            # A component whose hash the restored spec moves starts a new campaign; one resumed
            # (or given back only its rolling policy) finishes the campaign its status shows -
            # none when it is synced, as after a chart write that was cut off and rolled back.
            moved = rollout.hash_changed_components(live, spec)
            plan["trackers"] = [rollout.CampaignTracker(c, before, changed=c in moved) for c in plan["waits"]]

    def finish(self):
        if not self.check_mode:
            # A pool the helm rollback itself moved away from the restore point (keep_pools off:
            # the target revision's pools, as the chart rendered them) is restored too.
            for saved in self.clusters:
                try:
                    editor = ClusterEditor(self.kube, saved["metadata"]["name"])
                    self._plan(saved, editor, editor.read())
                except InvalidInput:
                    continue
        return [self._finish(plan) for plan in self.plans]

    def _finish(self, plan):
        editor, pool = plan["editor"], plan["pool"]
        changes = list(plan["changes"])
        if plan.get("resume") and not any(c["field"] == "autoUpdateHypervisor" and c.get("to") is True
                                          for c in changes):
            changes.append({"field": "autoUpdateHypervisor", "from": False, "to": True})
        item = {"cluster": editor.name, "pool": pool, "gpupool": plan["gpupool"],
                "changed_components": plan["changed"], "waited_for": plan["waits"], "written": False,
                "restored": changes, "summary": describe_changes(changes) or "nothing differed",
                "diff": {"before_header": "%s pool %s componentConfig and rolling policy" % (editor.name, pool),
                         "after_header": "%s pool %s componentConfig and rolling policy" % (editor.name, pool),
                         "before": rollout.redact_for_diff(plan["before"]),
                         "after": rollout.redact_for_diff(plan["after"])}}
        if self.check_mode:
            return item
        tfc = editor.read()
        live = tfc["spec"]["gpuPools"][rollout.find_pool_index(tfc, pool)]["specTemplate"]
        plan["expected"] = rollout.pool_view(restored_template(live, plan["after"], plan.get("resume")))
        if rollout.pool_view(live) != plan["expected"] or (plan.get("resume") and "hypervisor" in paused_marker(tfc).get(pool, [])):
            editor.update(_restore_pool(pool, plan["after"], plan.get("resume")))
            item["written"] = True
        if plan["waits"]:
            item["timeline"], item["superseded"] = self._wait(editor, plan)
        return item

    def _wait(self, editor, plan):
        """The guarded wait. The helm rollback changes the cluster and the ProviderConfig just
        before our write, so the operator may start a campaign or two that ours then replaces:
        while the pool still holds the restored componentConfig, a newer campaign is for it (or for
        what helm restored) and is followed; once someone else changed the pool, it fails."""
        trackers, watcher, timeline, superseded = plan["trackers"], plan["watcher"], [], []
        for _attempt in range(MAX_FOLLOWS):
            waiter = RolloutWait(plan["observer"], trackers, self.stall_timeout)
            try:
                waiter.run(watcher, self.deadline)
                return timeline + waiter.timeline, superseded
            except Superseded as exc:
                tfc = editor.read()
                live = tfc["spec"]["gpuPools"][rollout.find_pool_index(tfc, plan["pool"])]["specTemplate"]
                if rollout.pool_view(live) != plan["expected"]:
                    raise
                timeline += waiter.timeline
                superseded.append(exc.details.get("superseded_by"))
                watcher = start_watch(self.kube, plan["gpupool"])
                pool_now = watcher.objects.get((None, plan["gpupool"])) or plan["observer"].read_pool()
                trackers = [rollout.CampaignTracker(c, pool_now, changed=False) for c in plan["waits"]]
        raise Superseded("%s: the pool's campaign was replaced %d times while it held the "
                         "restored componentConfig; giving up" % (plan["gpupool"], MAX_FOLLOWS),
                         superseded_by=superseded[-1] if superseded else None)
