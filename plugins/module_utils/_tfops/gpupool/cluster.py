# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Driving a GPU pool's component rollout through its TensorFusionCluster: optimistic writes that
keep everyone else's changes, the watch on the GPUPool, and diagnostics when it does not finish."""

from __future__ import annotations

import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import condition, live_only, pod_ready
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import optimistic
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import absences
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, parse_time, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    BusinessChangesPaused,
    Forbidden,
    InvalidInput,
    RolloutFailed,
    Stalled,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.decisions import (
    HYPERVISOR_WAITING,
    failing_pods,
    lasting_failures,
    pod_problems,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.restart import POD_CHECK_SECONDS

# The operator's namespace is its Helm release's (OPERATOR_NAMESPACE upstream): its hypervisor Pods
# live there. This is only the default of the modules' namespace options.
OPERATOR_NAMESPACE = "tensor-fusion-sys"


# Stuck nodes whose Events a diagnosis looks up (one list of Warning Events serves them all).
MAX_DIAGNOSED = 10


class ClusterEditor:
    """Reads and writes one TensorFusionCluster with optimistic concurrency."""

    def __init__(self, kube, cluster=None):
        self.kube = kube
        self.api = kube.resource("TensorFusionCluster", group=TF_GROUP)
        self.name = cluster or self._only_cluster()

    def _only_cluster(self):
        items = self.kube.call("list", "tensorfusionclusters", self.api.get).to_dict()["items"]
        names = sorted(i["metadata"]["name"] for i in items)
        if len(names) != 1:
            raise InvalidInput("cluster is required when there is not exactly one "
                               "TensorFusionCluster; found: %s" % (", ".join(names) or "none"))
        return names[0]

    def read(self):
        try:
            return self.kube.call("get", "tensorfusionclusters/%s" % self.name, self.api.get,
                                  name=self.name).to_dict()
        except ApiError as exc:
            if exc.status != 404:
                raise
            names = sorted(i["metadata"]["name"] for i in self.kube.call(
                "list", "tensorfusionclusters", self.api.get).to_dict()["items"])
            raise InvalidInput("TensorFusionCluster %s does not exist; existing: %s" % (
                self.name, ", ".join(names) or "none"))

    def update(self, transform):
        """Apply transform(tfc) -> tfc and write it; on a conflict re-read and re-apply, so a
        concurrent edit of another pool or field survives. Returns the written object."""
        return optimistic.update(self.kube, self.api, transform, self.name)


def pool_entry_transform(pool_name, change):
    """A transform for ClusterEditor.update that edits one pool entry's specTemplate by name."""
    def transform(tfc):
        index = rollout.find_pool_index(tfc, pool_name)
        entry = tfc["spec"]["gpuPools"][index]
        entry["specTemplate"] = change(entry["specTemplate"])
        return tfc
    return transform


def paused_marker(tfc):
    """{pool: [components]} that this collection paused (kept on the TFC, so a re-run resumes)."""
    raw = ((tfc.get("metadata") or {}).get("annotations") or {}).get(rollout.PAUSED_BY_US, "")
    marker = {}
    for part in filter(None, raw.split(";")):
        pool, _sep, comps = part.partition(":")
        marker[pool] = [c for c in comps.split(",") if c]
    return marker


def with_paused_marker(tfc, pool, components):
    marker = paused_marker(tfc)
    if components:
        marker[pool] = sorted(set(components))
    else:
        marker.pop(pool, None)
    annotations = tfc["metadata"].setdefault("annotations", {})
    value = ";".join("%s:%s" % (p, ",".join(c)) for p, c in sorted(marker.items()))
    if value:
        annotations[rollout.PAUSED_BY_US] = value
    else:
        annotations.pop(rollout.PAUSED_BY_US, None)
    return tfc


def pause_transform(entry, components, also=None):
    """A transform for ClusterEditor.update that pauses ``components`` of pool ``entry`` the way a
    deadline does (their autoUpdate flags false, recorded in the pause marker: the next run of the
    same change resumes them); ``also(specTemplate)`` changes more in the same write."""
    def pause(tfc):
        spec = tfc["spec"]["gpuPools"][rollout.find_pool_index(tfc, entry)]
        spec["specTemplate"] = rollout.set_auto_update(spec["specTemplate"], components, False)
        if also:
            spec["specTemplate"] = also(spec["specTemplate"])
        return with_paused_marker(tfc, entry, sorted(set(paused_marker(tfc).get(entry, [])) | set(components)))
    return pause


class PoolObserver:
    """What the operator made of the pool: the GPUPool, its GPUNodes and hypervisor Pods.
    ``since`` (an aware datetime): when the rollout began; a diagnosis attaches no Warning Event
    older than that to a stuck node (a node that was NotReady long before says nothing about it)."""

    def __init__(self, kube, gpupool, namespace=OPERATOR_NAMESPACE, since=None):
        self.kube = kube
        self.gpupool = gpupool
        self.since = since
        self.namespace = namespace or OPERATOR_NAMESPACE
        self.pools = kube.resource("GPUPool", group=TF_GROUP)
        self.nodes = kube.resource("GPUNode", group=TF_GROUP)
        self.pods = kube.resource("Pod", api_version="v1")
        self.k8s_nodes = None  # Kubernetes Nodes' API, made once needed (nodes_not_ready)
        self.nodes_readable = True  # until the API server refuses to show them
        self.notes = []  # what the observer could not see, said once (the task's warnings)
        self.looker = None  # absences.Looker, made once a wait stops moving

    def look_for_absences(self, force=False):
        """Whether the operator and kube-controller-manager are up (gpupool/absences.py)."""
        if self.looker is None:
            self.looker = absences.Looker(self.kube, self.namespace, self.notes)
        self.looker.look(force)

    def someone_away(self):
        return bool(self.looker and self.looker.absences.away)

    def absence_notes(self):
        """A warning per absence seen while the task waited, with how long."""
        return self.looker.absences.notes() if self.looker else []

    def read_pool(self):
        try:
            return self.kube.call("get", "gpupools/%s" % self.gpupool, self.pools.get,
                                  name=self.gpupool).to_dict()
        except ApiError as exc:
            if exc.status == 404:
                raise InvalidInput("GPUPool %s does not exist: is the TensorFusion operator "
                                   "running and has it reconciled the cluster?" % self.gpupool)
            raise

    # Raw JSON pages, not the dynamic client's objects: building and converting those costs
    # more than the request for a pool of hundreds of nodes (bench/, part 1).
    def gpunodes(self, cached=False):
        return list(list_pages(self.kube, self.nodes, cached=cached,
                               label_selector="tensor-fusion.ai/pool-%s=true" % self.gpupool))

    def nodes_not_ready(self, limit=MAX_DIAGNOSED * 5):
        """{"node <name>": why} of the Kubernetes Nodes of the pool's GPUNodes that are not Running
        (a batch's nodes while they roll) whose Ready condition is not True: a node that went
        NotReady holds its batch forever. One GET per such node (at most ``limit``); without the
        right to read Nodes, nothing (said once in ``notes``)."""
        if not self.nodes_readable:
            return {}
        self.k8s_nodes = self.k8s_nodes or self.kube.resource("Node", api_version="v1")
        out = {}
        pending = sorted(n["metadata"]["name"] for n in self.gpunodes(cached=True)
                         if (n.get("status") or {}).get("phase") != "Running")
        for name in pending[:limit]:
            try:
                node = self.kube.call("get", "nodes/%s" % name, self.k8s_nodes.get, name=name).to_dict()
            except Forbidden as exc:
                self.nodes_readable = False
                self.notes.append("the rollout's nodes' readiness is not watched (%s): a node that goes "
                                  "NotReady is found only at the stall timeout" % exc.msg)
                return {}
            except ApiError as exc:
                if exc.status == 404:
                    out["node " + name] = "is gone (no Node of that name)"
                    continue
                raise
            ready = condition(node, "Ready") or {}
            if ready.get("status") != "True":
                out["node " + name] = "is NotReady (%s: %s)" % (
                    ready.get("reason") or "no Ready condition", ready.get("message") or "no message")
        return out

    def hypervisor_pods(self):
        return list(list_pages(self.kube, self.pods, namespace=self.namespace,
                               label_selector="tensor-fusion.ai/component=hypervisor,"
                                              "tensor-fusion.ai/pool-%s=true" % self.gpupool))

    def consumers(self, comp):
        """How many objects a campaign of ``comp`` works on; 0 means it never completes."""
        if comp == "hypervisor":
            return len(self.gpunodes())
        if comp == "client":
            return len(self.kube.call("list", "pods", self.pods.get, label_selector=(
                "tensor-fusion.ai/enabled=true,tensor-fusion.ai/gpupool=%s" % self.gpupool)
            ).to_dict()["items"])
        workloads = self.kube.resource("TensorFusionWorkload", group=TF_GROUP)
        return len(self.kube.call("list", "tensorfusionworkloads", workloads.get,
                                  label_selector="tensor-fusion.ai/gpupool=%s" % self.gpupool
                                  ).to_dict()["items"])

    def diagnose(self):
        """Which GPUNodes are Pending and why their hypervisor Pods are not Ready."""
        nodes = self.gpunodes()
        pending = sorted(n["metadata"]["name"] for n in nodes
                         if (n.get("status") or {}).get("phase") != "Running")
        pods = self.hypervisor_pods()
        problems = pod_problems(pods)
        with_pod = set(p["spec"].get("nodeName") for p in live_only(pods))
        no_pod = [n for n in pending if n not in with_pod]
        restarts = ["%s restarted %d times" % (p["metadata"]["name"], sum(
            c.get("restartCount", 0) for c in (p.get("status") or {}).get("containerStatuses") or []))
            for p in pods if any(c.get("restartCount", 0) > 0
                                 for c in (p.get("status") or {}).get("containerStatuses") or [])]
        return {"pending_nodes": pending, "total_nodes": len(nodes),
                "hypervisor_pods_not_ready": problems, "hypervisor_restarts": restarts,
                "nodes_without_hypervisor_pod": no_pod,
                "warning_events": self._warning_events(pending[:MAX_DIAGNOSED])}

    def _warning_events(self, node_names):
        """{GPUNode: [newest Warning Events of it and of its hypervisor Pod]}: the operator says
        why it cannot create a Pod (an API refusal, a bad image) there, not in the pool status."""
        if not node_names:
            return {}
        try:
            events = list(list_pages(self.kube, self.kube.resource("Event", api_version="v1"),
                                     field_selector="type=Warning"))
        except ApiError:
            return {}  # a diagnosis is best effort: the stall itself is the error
        return node_events(events, node_names, self.since)

    def node_counts(self, image=None):
        return count_nodes(self.gpunodes(), self.hypervisor_pods(), image)


def event_time(event):
    """When an Event last happened (its lastTimestamp, eventTime or creation), or None."""
    when = event.get("lastTimestamp") or event.get("eventTime") or \
        (event.get("metadata") or {}).get("creationTimestamp")
    try:
        return parse_time(when) if when else None
    except InvalidInput:
        return None


def node_events(events, node_names, since=None, newest=3):
    """{GPUNode: [its ``newest`` Warning Events and its hypervisor Pod's, as text]} - only those
    that happened at ``since`` (an aware datetime) or later: an Event from before the rollout (a
    node that was NotReady an hour earlier) would point at a cause that is not this one's."""
    since = since.replace(microsecond=0) if since is not None else None  # Events carry whole seconds
    wanted = set(node_names) | set("hypervisor-%s" % n for n in node_names)
    found = {}
    for event in events:
        name = (event.get("involvedObject") or {}).get("name")
        if name not in wanted:
            continue
        when = event_time(event)
        if since is not None and (when is None or when < since):
            continue
        node = name[len("hypervisor-"):] if name.startswith("hypervisor-") and name not in node_names else name
        found.setdefault(node, []).append((micro_time(when) if when else "", "%s %s: %s" % (
            (event.get("involvedObject") or {}).get("kind"), event.get("reason"), event.get("message"))))
    return dict((node, [text for _when, text in sorted(items, reverse=True)[:newest]])
                for node, items in found.items())


def ready_seconds(pod):
    """Seconds from a Pod's creation to its Ready condition (None while it is not Ready)."""
    ready = condition(pod, "Ready") or {}
    created = (pod.get("metadata") or {}).get("creationTimestamp")
    if not pod_ready(pod) or not ready.get("lastTransitionTime") or not created:
        return None
    return (parse_time(ready["lastTransitionTime"]) - parse_time(created)).total_seconds()


def count_nodes(nodes, pods, image=None):
    """The result's node counts: GPUNodes, hypervisor Pods with ``image``, GPUNodes not Running."""
    updated = [p for p in live_only(pods) if not image or any(
        c.get("image") == image for c in p["spec"]["containers"])]
    return {"total": len(nodes),
            "updated": len(updated),
            "stuck": len([n for n in nodes if (n.get("status") or {}).get("phase") != "Running"])}


def describe_diagnosis(diag):
    parts = []
    if diag["pending_nodes"]:
        parts.append("GPUNodes not Running: %s" % ", ".join(diag["pending_nodes"][:20]))
    if diag.get("nodes_without_hypervisor_pod"):
        parts.append("no hypervisor Pod exists on %s" % ", ".join(diag["nodes_without_hypervisor_pod"][:20]))
    for node, events in sorted((diag.get("warning_events") or {}).items()):
        parts.append("%s: %s" % (node, "; ".join(events)))
    if diag["hypervisor_pods_not_ready"]:
        parts.append("hypervisor Pods not Ready: %s" % "; ".join(diag["hypervisor_pods_not_ready"][:20]))
    if diag["hypervisor_restarts"]:
        parts.append("; ".join(diag["hypervisor_restarts"][:10]))
    return ". ".join(parts) or "no GPUNode is Pending and every hypervisor Pod is Ready"


class RolloutWait:
    """The wait on the GPUPool: campaigns tracked, a timeline kept, stalls detected. With
    ``pods_fail_after`` (seconds), hypervisor Pods that keep failing to start (a pull that fails,
    a crash loop) that long end a hypervisor campaign's wait with the cause, as a workload's new
    Pods end its rollout's wait (workloads/restart.py): a Secret rotation's pool roll fails as
    fast as a Deployment's."""

    def __init__(self, observer, trackers, stall_timeout=None, until_progress=100, pods_fail_after=None,
                 business=None):
        self.observer = observer
        # workloads/business.BusinessWatch: with gate pause, changes at its scale end the wait
        self.business = business
        self.trackers = trackers
        self.stall_timeout = stall_timeout
        self.until_progress = until_progress
        self.pods_fail_after = pods_fail_after if any(t.comp == "hypervisor" for t in trackers) else None
        self._failing_since = {}
        self._next_pod_look = None
        self.timeline = []
        self.started = time.monotonic()
        self.last_move = self.started
        self.done_at = {}
        self._seen = {}
        self.pool = None

    def check(self, objects):
        pool = objects.get((None, self.observer.gpupool))
        if pool is None:
            raise InvalidInput("GPUPool %s was deleted during the rollout" % self.observer.gpupool)
        reached = self.business.pause_reached() if self.business is not None else None
        if reached:
            raise BusinessChangesPaused("rollout of GPUPool %s stopped by the business changes gate: %s" % (
                self.observer.gpupool, reached), timeline=self.timeline)
        self.pool = pool
        all_done = True
        for tracker in self.trackers:
            done = tracker.observe(pool)
            _hash, progress, synced, _ip = rollout.component_status(pool, tracker.comp)
            key = (tracker.campaign, tracker.progress, done)
            if self._seen.get(tracker.comp) != key:
                self._seen[tracker.comp] = key
                self.last_move = time.monotonic()
                if tracker.campaign is not None:
                    self.timeline.append({"time": micro_time(utcnow()),
                                          "seconds": round(time.monotonic() - self.started, 3),
                                          "component": tracker.comp, "campaign": tracker.campaign,
                                          "progress": tracker.progress or 0, "synced": done})
            if done and tracker.comp not in self.done_at:
                self.done_at[tracker.comp] = time.monotonic() - self.started
            reached = done or (self.until_progress < 100 and tracker.campaign is not None
                               and (tracker.progress or 0) >= self.until_progress)
            all_done = all_done and reached
        detail = "; ".join(t.describe() for t in self.trackers)
        if self.observer.someone_away() or (not all_done and time.monotonic() - self.last_move >= absences.LOOK_SECONDS):
            self.observer.look_for_absences(force=all_done)
        if not all_done and self.pods_fail_after is not None:
            self._hypervisor_pods_fail()
        if not all_done and self.stall_timeout and time.monotonic() - self.last_move > self.stall_timeout:
            diag = self.observer.diagnose()
            last = self.timeline[-1] if self.timeline else None
            moved = ("last moved to %s%% at %s" % (last["progress"], last["time"])) if last else \
                "no progress seen since the change"
            raise Stalled("rollout of GPUPool %s made no progress for %ss (%s; %s): %s" % (
                self.observer.gpupool, self.stall_timeout, detail, moved, describe_diagnosis(diag)),
                diagnostics=diag, timeline=self.timeline)
        return all_done, detail

    def _hypervisor_pods_fail(self):
        """Every POD_CHECK_SECONDS: the pool's hypervisor Pods that have failed to start for
        ``pods_fail_after`` seconds end the wait, saying which, why, and what else is stuck."""
        now = time.monotonic()
        if self._next_pod_look is not None and now < self._next_pod_look:
            return
        self._next_pod_look = now + POD_CHECK_SECONDS
        failing = failing_pods(self.observer.hypervisor_pods(), HYPERVISOR_WAITING, unschedulable=True, where=True)
        nodes = self.observer.nodes_not_ready()
        failing.update(nodes)
        lasting = lasting_failures(failing, self._failing_since, now, self.pods_fail_after)
        if lasting:
            diag = self.observer.diagnose()
            raise RolloutFailed("rollout of GPUPool %s cannot finish: %s: %s. %s" % (
                self.observer.gpupool,
                "its hypervisor Pods do not start or their nodes are not Ready" if nodes else
                "its hypervisor Pods do not start", "; ".join(lasting[:10]), describe_diagnosis(diag)),
                pods_not_ready=lasting, diagnostics=diag, timeline=self.timeline)

    def wakeup(self):
        every = 60 if not self.stall_timeout else \
            max(0.5, self.stall_timeout - (time.monotonic() - self.last_move) + 0.1)
        every = min(every, absences.LOOK_SECONDS)  # a wait that does not move looks who is away
        return min(every, POD_CHECK_SECONDS) if self.pods_fail_after is not None else every

    def run(self, watcher, deadline):
        try:
            return watcher.wait(self.check, deadline, wakeup=self.wakeup)
        except WaitTimeout as exc:
            diag = self.observer.diagnose()
            exc.msg += ". " + describe_diagnosis(diag)
            exc.details.update(diagnostics=diag, timeline=self.timeline)
            raise


def start_watch(kube, gpupool):
    """Watcher on one GPUPool, listed now: every later event is seen, none before."""
    watcher = ObjectWatcher(kube, kube.resource("GPUPool", group=TF_GROUP), name=gpupool)
    watcher.start()
    return watcher
