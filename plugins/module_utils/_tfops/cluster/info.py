# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The read-only picture of a TensorFusion installation, gathered in a few paginated list calls
(never one call per object) and slimmed as it arrives, so that 1,000 nodes and 10,000 Pods stay
cheap. Helm's storage is read in helm/storage.py (the one read of Secret data: the newest
deployed revision of a release that owns a TensorFusionCluster, only its TensorFusionClusters kept)."""

from __future__ import annotations

import heapq

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import pod_ready, waiting_containers
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_drift
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import isolation_policy
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import stale
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.storage import ReleaseStorage
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import paused_marker
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import (
    list_column,
    list_pages,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.changes import is_business, template_of
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.decisions import rollout_failure, rollout_state
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.restart import (
    TF_CONTROLLER_SELECTOR,
)


def _pod_reason(pod):
    waiting = waiting_containers(pod)
    if waiting:
        return waiting[0][1]
    return (pod.get("status") or {}).get("phase")


def slim_cluster(obj):
    status = obj.get("status") or {}
    return {"name": obj["metadata"]["name"], "phase": status.get("phase", ""),
            "pools": [p.get("name") for p in (obj.get("spec") or {}).get("gpuPools") or []],
            # {pool entry: [components]} that tensorfusion.ops paused at a deadline (resumable)
            "paused": paused_marker(obj),
            # {name, namespace} of the Helm release that owns it (a chart upgrade patches it), or None
            "helm_release": chart_drift.helm_owner(obj),
            # what the chart itself rendered for the pools, as the chart step's post-renderer recorded
            # it (env values hashed), or None when the cluster was never rendered that way
            "chart_pools": chart_drift.recorded_chart_pools(obj),
            "conditions": stale.cluster_view(obj)["conditions"]}


def slim_pool(obj):
    status = obj.get("status") or {}
    spec = obj.get("spec") or {}
    policy = rollout.policy_of(spec)
    components = rollout.components_view(obj)
    return {"name": obj["metadata"]["name"], "phase": status.get("phase", ""),
            "total_nodes": status.get("totalNodes", 0), "ready_nodes": status.get("readyNodes", 0),
            "components": components,
            "maintenance_window": (policy.get("maintenanceWindow") or {}).get("includes") or [],
            "max_duration": policy.get("maxDuration"),
            "images": dict((c, ((spec.get("componentConfig") or {}).get(c) or {}).get("image"))
                           for c in rollout.COMPONENTS)}


def slim_gpunode(obj):
    labels = obj["metadata"].get("labels") or {}
    return {"name": obj["metadata"]["name"], "phase": (obj.get("status") or {}).get("phase", ""),
            "pool": labels.get("tensor-fusion.ai/managed-by")}


def slim_gpu_phase(obj):
    return (obj.get("status") or {}).get("phase", "")


def _flag(args, name):
    """The value of ``--name=value`` or ``--name value`` in a container's args, or None."""
    args = list(args or [])
    for index, arg in enumerate(args):
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
        if arg == name and index + 1 < len(args):
            return args[index + 1]
    return None


def slim_pod(obj):
    meta = obj["metadata"]
    labels = meta.get("labels") or {}
    return {"name": meta["name"], "namespace": meta.get("namespace"),
            "component": labels.get("tensor-fusion.ai/component"),
            "node": (obj.get("spec") or {}).get("nodeName"), "ready": pod_ready(obj),
            "reason": None if pod_ready(obj) else _pod_reason(obj),
            "image": ((obj.get("spec") or {}).get("containers") or [{}])[0].get("image"),
            # A hypervisor's --isolation-policy argument (None for another Pod, or without it).
            "isolation_policy": _flag(((obj.get("spec") or {}).get("containers") or [{}])[0].get("args"),
                                      "--isolation-policy"),
            "restarts": sum(c.get("restartCount", 0)
                            for c in (obj.get("status") or {}).get("containerStatuses") or [])}


def slim_workload(kind):
    """A business workload (its Pod template opts in to TensorFusion) as the findings judge it, None
    for any other; ``rollout``: why its own rollout is not complete (None when it is)."""
    def project(obj):
        if not is_business(obj):
            return None
        template = template_of(obj)
        containers = (template.get("spec") or {}).get("containers") or []
        done, detail = rollout_state(kind, obj)
        detail = rollout_failure(kind, obj) or detail
        named = "%s %s/%s" % (kind, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if detail.startswith(named):  # the finding names the workload itself
            detail = detail[len(named):].lstrip(": ")
        return {"kind": kind, "namespace": obj["metadata"]["namespace"], "name": obj["metadata"]["name"],
                # A DaemonSet runs a Pod per node: no replica count of its own.
                "replicas": None if kind == "DaemonSet" else int((obj.get("spec") or {}).get("replicas", 1)),
                "readiness_probe": all(c.get("readinessProbe") for c in containers) and bool(containers),
                "rollout": None if done else detail,
                "labels": (template.get("metadata") or {}).get("labels") or {}, "pdb": False}
    return project


def selector_matches(selector, labels):
    """A LabelSelector dict against a label set (matchLabels and matchExpressions)."""
    if selector is None:
        return False
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        value, values = labels.get(expr["key"]), expr.get("values") or []
        op = expr["operator"]
        if (op == "In" and value not in values) or (op == "NotIn" and value in values) or \
                (op == "Exists" and value is None) or (op == "DoesNotExist" and value is not None):
            return False
    return bool(selector.get("matchLabels") or selector.get("matchExpressions"))


def newest_events(events, limit, since=None):
    """The ``limit`` newest of ``events`` (projected Warning Events, each with ``time`` and
    ``object``), newest first, none from before ``since`` (an aware datetime). Only ``limit`` are
    held at a time; two of one time and one object (Warnings of two reasons in one second) are
    both kept - they are never compared with each other."""
    kept = (e for e in events if not (since and e["time"] and parse_time(e["time"]) < since))
    return heapq.nlargest(limit, kept, key=lambda e: (e["time"] or "", e["object"]))


class Gatherer:
    def __init__(self, kube, namespace, release, events_since=None, events_limit=30,
                 workloads=True, cached_reads=True, lock_name=None):
        self.kube = kube
        self.lock_name = lock_name
        self.namespace = namespace
        self.release = release
        self.events_since = parse_time(events_since) if events_since else None
        self.events_limit = events_limit
        self.with_workloads = workloads
        # The lists that grow with the cluster (GPU nodes, the namespace's Pods, GPUs, business
        # workloads and their PodDisruptionBudgets) come from the API server's watch cache in
        # one response each: no etcd read, no pages (bench/: 3-5 times less server time).
        self.cached = cached_reads
        self.storage = ReleaseStorage(kube)

    def _list(self, kind, project, group=None, api_version=None, **kwargs):
        resource = self.kube.resource(kind, api_version=api_version, group=group)
        return [item for item in list_pages(self.kube, resource, project=project, **kwargs) if item is not None]

    def gather(self):
        pods = self._list("Pod", slim_pod, api_version="v1", namespace=self.namespace,
                          cached=self.cached)
        live_pools = {}
        data = {
            "namespace": self.namespace,
            "clusters": self._list("TensorFusionCluster", self._cluster_projection(live_pools), group=TF_GROUP),
            "pools": self._list("GPUPool", slim_pool, group=TF_GROUP),
            "gpunodes": self._list("GPUNode", slim_gpunode, group=TF_GROUP, cached=self.cached),
            "hypervisors": [p for p in pods if p["component"] == "hypervisor"],
            "operator_pods": [p for p in pods if p["component"] != "hypervisor"],
            "controller": self._deployments(TF_CONTROLLER_SELECTOR),
            "alert_manager": self._statefulsets("tensor-fusion.ai/component=alert-manager"),
            "release": self._release(),
            "warning_events": self._warning_events(),
            "workloads": self._workloads() if self.with_workloads else [],
            "lock": self._lock(),
        }
        self._chart_drift(data["clusters"], live_pools)
        gpu_phases = self._gpu_phases()
        data["gpus"] = {"total": len(gpu_phases),
                        "by_phase": dict((ph, gpu_phases.count(ph)) for ph in sorted(set(gpu_phases)))}
        return data

    def _gpu_phases(self):
        """The phase of every GPU (thousands of them): the Phase printer column of the GPU CRD
        from the server's Table view, else the GPUs themselves."""
        phases = list_column(self.kube, self.kube.resource("GPU", group=TF_GROUP), "Phase",
                             cached=self.cached)
        if phases is None:
            return self._list("GPU", slim_gpu_phase, group=TF_GROUP, cached=self.cached)
        return [phase or "" for phase in phases]

    def _deployments(self, selector):
        def project(obj):
            status = obj.get("status") or {}
            return {"name": obj["metadata"]["name"], "namespace": obj["metadata"]["namespace"],
                    "replicas": int((obj.get("spec") or {}).get("replicas", 1)),
                    "available": int(status.get("availableReplicas") or 0),
                    "images": [c.get("image") for c in obj["spec"]["template"]["spec"].get("containers") or []],
                    # The operator's isolation policy, as its controller container is given it.
                    "isolation_policy": isolation_policy.controller_policy(obj)}
        return self._list("Deployment", project, api_version="apps/v1", namespace=self.namespace,
                          label_selector=selector)

    def _statefulsets(self, selector):
        def project(obj):
            return {"name": obj["metadata"]["name"], "replicas": int((obj.get("spec") or {}).get("replicas", 1)),
                    "ready": int((obj.get("status") or {}).get("readyReplicas") or 0)}
        return self._list("StatefulSet", project, api_version="apps/v1", namespace=self.namespace,
                          label_selector=selector)

    def _lock(self):
        """The maintenance lock as its Lease says (None: no Lease, not asked, or not readable -
        a precheck's ServiceAccount need not read Leases)."""
        if not self.lock_name:
            return None
        try:
            return locks.public_view(locks.lease_view(
                locks.LeaseLock(self.kube, self.namespace, self.lock_name).read()))
        except ApiError as exc:
            if exc.status in (403, 404):
                return None
            raise

    def _release(self):
        """The release's newest revision and status (from Helm's storage labels)."""
        revisions = self.storage.revisions(self.namespace, self.release)
        if not revisions:
            return None
        newest = max(revisions, key=lambda r: r["revision"])
        return {"name": newest["name"], "status": newest["status"], "revision": newest["revision"]}

    @staticmethod
    def _cluster_projection(live_pools):
        def project(obj):
            slim = slim_cluster(obj)
            # The compared pool fields only (never whole Pod templates past this point), and only
            # where there is something revertible: Helm owns the cluster and no post-renderer
            # already put the live pools into the release's rendering.
            if slim["helm_release"] and slim["chart_pools"] is None:
                live_pools[slim["name"]] = chart_drift.pool_settings(obj)
            return slim
        return project

    def _chart_drift(self, clusters, live_pools):
        """Each cluster's ``chart_drift``: None when no chart upgrade can revert its pools (not
        Helm's, or rendered through the post-renderer), else the differences from the release's
        last rendering, or why they could not be checked (never a failure: the check is advice)."""
        for tfc in clusters:
            owner = tfc["helm_release"]
            if owner is None or tfc["chart_pools"] is not None:
                tfc["chart_drift"] = None
                continue
            revision, rendered, unchecked = self.storage.rendering(
                owner["namespace"], owner["name"], chart_drift.rendered_pool_settings)
            if unchecked is None and tfc["name"] not in rendered:
                unchecked = "revision %s of Helm release %s/%s renders no TensorFusionCluster %s" % (
                    revision, owner["namespace"], owner["name"], tfc["name"])
            tfc["chart_drift"] = {
                "revision": revision, "unchecked": unchecked,
                "differences": None if unchecked else chart_drift.diff_pools(live_pools[tfc["name"]],
                                                                             rendered[tfc["name"]])}

    def _warning_events(self):
        def project(obj):
            when = obj.get("lastTimestamp") or obj.get("eventTime") or \
                (obj.get("metadata") or {}).get("creationTimestamp")
            involved = obj.get("involvedObject") or {}
            return {"time": when, "namespace": obj["metadata"].get("namespace"),
                    "object": "%s/%s" % ((involved.get("kind") or "").lower(), involved.get("name")),
                    "reason": obj.get("reason"), "message": obj.get("message"), "count": obj.get("count", 1)}
        resource = self.kube.resource("Event", api_version="v1")
        return newest_events(list_pages(self.kube, resource, field_selector="type=Warning", project=project),
                             self.events_limit, self.events_since)

    def _workloads(self):
        found = []
        for kind in ("Deployment", "StatefulSet", "DaemonSet"):
            found += self._list(kind, slim_workload(kind), api_version="apps/v1", cached=self.cached)
        if not found:
            return []
        try:
            pdbs = self._list("PodDisruptionBudget", lambda o: {
                "namespace": o["metadata"]["namespace"], "selector": (o.get("spec") or {}).get("selector")},
                group="policy", cached=self.cached)
        except ApiError as exc:
            if exc.status != 404:
                raise
            pdbs = []
        for workload in found:
            workload["pdb"] = any(p["namespace"] == workload["namespace"]
                                  and selector_matches(p["selector"], workload["labels"]) for p in pdbs)
            del workload["labels"]
        return found
