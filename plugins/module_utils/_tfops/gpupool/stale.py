# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A TensorFusionCluster whose status the operator left behind (docs/operator-behaviour.md 1.4):
after a write that changed its pools but started no rollout, upstream's requeued reconcile may
read a stale cluster and write nothing, so the cluster stays Updating (Ready False,
ResourcesUpdated) while every pool of it is Running with nothing rolling - until one of its
GPUPools changes (the operator owns them, so any change makes it look again) or it restarts.

``stale(cluster, pools)`` says so from the gathered picture (pure). ``settle`` is what a module
that wrote the cluster does at its end: give the operator its own requeue first, and only when
the status is then stale, annotate the cluster's GPUPools (NUDGE_ANNOTATION) and wait for
Running; a cluster that still is not is a warning."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline, micro_time, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import WaitTimeout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout

NUDGE_ANNOTATION = "tensorfusion.ops/reconcile-requested"
REQUEUE_SECONDS = 15       # the operator requeues 3 s after a pool write; a little more
AFTER_NUDGE_SECONDS = 30
CURE = ("a change to one of its GPUPools makes the operator look again (gpupool_rollout annotates "
        "them with %s at the end of a run that wrote the cluster), as does restarting the operator"
        % NUDGE_ANNOTATION)


def cluster_view(tfc):
    """What ``stale`` reads of a TensorFusionCluster (a raw dict); cluster/info.slim_cluster has it too."""
    status = tfc.get("status") or {}
    return {"name": tfc["metadata"]["name"], "phase": status.get("phase", ""),
            "pools": [p.get("name") for p in (tfc.get("spec") or {}).get("gpuPools") or []],
            "conditions": [{"type": c.get("type"), "status": c.get("status"), "reason": c.get("reason")}
                           for c in status.get("conditions") or []]}


def pool_view(pool):
    """What ``stale`` reads of a GPUPool (a raw dict); cluster/info.slim_pool has it too."""
    return {"name": pool["metadata"]["name"], "phase": (pool.get("status") or {}).get("phase", ""),
            "components": rollout.components_view(pool)}


def _settled(pool):
    """A pool Running with nothing rolling (pool_view, or a slim pool of cluster/info.py)."""
    if pool.get("phase") != "Running":
        return False
    for comp in pool.get("components", {}).values():
        if comp.get("hash") and not comp.get("synced") and comp.get("auto_update"):
            return False  # rolling (a component with autoUpdate off rolls nothing)
        if comp.get("in_progress") and comp.get("in_progress") != comp.get("hash"):
            return False
    return True


def stale(cluster, pools):
    """Why the status of ``cluster`` (cluster_view, or a slim cluster of cluster/info.py) is stale,
    or None; ``pools``: the views of the GPUPools gathered with it."""
    if cluster.get("phase") != "Updating":
        return None
    ready = [c for c in cluster.get("conditions") or [] if c.get("type") == "Ready"]
    if not ready or ready[0].get("status") == "True" or ready[0].get("reason") != "ResourcesUpdated":
        return None
    by_name = dict((p["name"], p) for p in pools)
    names = ["%s-%s" % (cluster["name"], entry) for entry in cluster.get("pools") or []]
    if not names or not all(n in by_name and _settled(by_name[n]) for n in names):
        return None
    return ("TensorFusionCluster %s is Updating (Ready False, ResourcesUpdated) although its GPUPool%s %s "
            "%s Running with no rollout in progress: the operator has not looked at it again since it "
            "last wrote its pools; %s" % (cluster["name"], "s" if len(names) > 1 else "", ", ".join(names),
                                          "are" if len(names) > 1 else "is", CURE))


def settle(kube, cluster_name, written_version, read_picture, deadline, warnings):
    """After this module wrote TensorFusionCluster ``cluster_name`` (its resourceVersion then:
    ``written_version``): wait for the operator's answer, a status written since that says
    Running (at most REQUEUE_SECONDS; a status still from before the write says nothing); if its
    status is then stale (``read_picture()`` returns the cluster_view and the pool_view of each
    of its GPUPools), annotate its GPUPools and wait again (AFTER_NUDGE_SECONDS). Returns the
    GPUPools it annotated; a cluster still not Running is a warning."""
    resource = kube.resource("TensorFusionCluster", group=TF_GROUP)
    watcher = ObjectWatcher(kube, resource, name=cluster_name)
    before = [written_version]  # the version whose status says nothing (none after the nudge)

    def running(objects):
        obj = next(iter(objects.values()), None) or {}
        phase = (obj.get("status") or {}).get("phase")
        answered = (obj.get("metadata") or {}).get("resourceVersion") != before[0]
        return phase == "Running" and answered, "TensorFusionCluster %s is %s%s" % (
            cluster_name, phase or "without a phase", "" if answered else " (as before this write)")

    def wait(seconds):
        try:
            watcher.wait(running, Deadline(timeout=max(1, min(seconds, deadline.remaining()))))
            return True
        except WaitTimeout:
            return False
    if not deadline.bounded or deadline.remaining() < 1 or wait(REQUEUE_SECONDS):
        return []
    cluster, pools = read_picture()
    why = stale(cluster, pools)
    if why is None:
        return []  # not Running for a reason of its own (a pool still rolling): the findings say it
    pool_resource = kube.resource("GPUPool", group=TF_GROUP)
    nudged = ["%s-%s" % (cluster_name, entry) for entry in cluster.get("pools") or []]
    for name in nudged:
        kube.call("patch", "gpupools/%s" % name, pool_resource.patch, name=name,
                  body={"metadata": {"annotations": {NUDGE_ANNOTATION: micro_time(utcnow())}}},
                  content_type="application/merge-patch+json")
    watcher.resource_version = None  # list again: the annotation's events come after it
    before[0] = None  # the nudge changed no cluster: any Running counts now
    if not wait(AFTER_NUDGE_SECONDS):
        warnings.append("%s; annotated %s, and it is still not Running after %ds" % (
            why, ", ".join(nudged), AFTER_NUDGE_SECONDS))
    return nudged
