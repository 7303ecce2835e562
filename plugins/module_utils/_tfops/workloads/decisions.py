# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Decisions about Deployments, StatefulSets and DaemonSets, as pure functions over their dicts:
what ``kubectl rollout restart`` writes, and what ``kubectl rollout status`` calls done."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import live, live_only, pod_ready, waiting_containers
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
KINDS = ("Deployment", "StatefulSet", "DaemonSet")


SECRET_ANNOTATION_PREFIX = "secret.ops.tensor-fusion.ai/"


def restart_patch(timestamp, extra_annotations=None):
    """The merge patch ``kubectl rollout restart`` sends (so both tools recognise it), plus any
    annotations that record why (such as the Secret version the restart was for)."""
    annotations = {RESTARTED_AT: timestamp}
    annotations.update(extra_annotations or {})
    return {"spec": {"template": {"metadata": {"annotations": annotations}}}}


def secret_annotation(secret):
    """(key, value) recording the Secret version a restart was for: its UID and resourceVersion,
    which change with every write (no content, not even a hash, goes into the workload)."""
    meta = secret["metadata"]
    name = meta["name"]
    if len(name) > 63:  # an annotation name part is at most 63 characters
        import hashlib
        name = name[:46] + "-" + hashlib.sha256(name.encode()).hexdigest()[:16]
    return SECRET_ANNOTATION_PREFIX + name, "%s:%s" % (meta["uid"], meta["resourceVersion"])


def template_annotations(obj):
    return ((obj.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations") or {}


def _count(status, key):
    return int(status.get(key) or 0)


def rollout_state(kind, obj):
    """(done, detail) for a workload's rollout, as ``kubectl rollout status`` judges it."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    name = "%s %s/%s" % (kind, meta.get("namespace"), meta["name"])
    generation = int(meta.get("generation") or 0)
    observed = int(status.get("observedGeneration") or 0)
    if observed < generation:
        return False, "%s: the controller has not yet seen generation %d (observed %d)" % (
            name, generation, observed)
    if kind == "Deployment":
        return _deployment_state(name, spec, status)
    if kind == "StatefulSet":
        return _statefulset_state(name, spec, status)
    if kind == "DaemonSet":
        return _daemonset_state(name, status)
    raise ValueError("unsupported kind %s" % kind)


def rollout_failure(kind, obj):
    """Why a workload's current rollout can no longer finish by itself, or None: a Deployment whose
    controller has given up on the current generation (ProgressDeadlineExceeded)."""
    meta, status = obj["metadata"], obj.get("status") or {}
    if kind != "Deployment" or int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return "Deployment %s/%s exceeded its progress deadline (%ss): %s" % (
                meta.get("namespace"), meta["name"], (obj.get("spec") or {}).get("progressDeadlineSeconds", 600),
                cond.get("message"))
    return None


# Container waiting reasons that waiting does not mend: a kubelet backing off a pull or a crash,
# an image name it refuses, a container it cannot even configure.
FATAL_WAITING = ("ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName", "CrashLoopBackOff",
                 "CreateContainerConfigError")
# How long a new Pod must stay in such a state before the wait gives up on it (a single failed
# pull of a registry that hiccups heals on the next try; the Deployment's own progress deadline
# may say so earlier).
FATAL_FOR_SECONDS = 30.0


# A GPU pool's hypervisor Pods: each is bound to its node, so a Pod the scheduler cannot place, or
# a first failed pull, does not mend by waiting either (the failure must last, see below).
HYPERVISOR_WAITING = FATAL_WAITING + ("ErrImagePull",)


def failing_pods(pods, waiting_reasons=FATAL_WAITING, unschedulable=False, where=False):
    """{pod name: "container: Reason (message)"} of the live Pods whose containers wait in a state
    of ``waiting_reasons``; with ``unschedulable``, also Pods the scheduler reports Unschedulable;
    with ``where``, each names the container's image and the Pod's node too."""
    out = {}
    for pod in live_only(pods):
        node = (pod.get("spec") or {}).get("nodeName")
        images = dict((c.get("name"), c.get("image")) for c in (pod.get("spec") or {}).get("containers") or [])
        for cstat in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cstat.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in waiting_reasons:
                container = cstat.get("name")
                image = cstat.get("image") or images.get(container)
                if where and image:
                    container += " (image %s)" % image
                if where and node:
                    container += " on node %s" % node
                out[pod["metadata"]["name"]] = "%s: %s (%s)" % (
                    container, waiting["reason"], waiting.get("message") or "no message")
                break
        if unschedulable and pod["metadata"]["name"] not in out:
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("type") == "PodScheduled" and cond.get("status") == "False" \
                        and cond.get("reason") == "Unschedulable":
                    out[pod["metadata"]["name"]] = "not scheduled%s: Unschedulable (%s)" % (
                        " (wanted node %s)" % node if node and where else "", cond.get("message") or "no message")
    return out


def lasting_failures(failing, first_seen, now, persist=FATAL_FOR_SECONDS):
    """Track since when each Pod fails (``first_seen`` is updated in place: a Pod that recovers
    is forgotten) and return the failures that have lasted ``persist`` seconds, sorted."""
    for name in list(first_seen):
        if name not in failing:
            del first_seen[name]
    for name in failing:
        first_seen.setdefault(name, now)
    return sorted("%s %s for %.0fs" % (name, failing[name], now - first_seen[name])
                  for name in failing if now - first_seen[name] >= persist)


def current_pods(kind, obj, pods, replica_set=None):
    """The Pods of the rollout in progress: of the Deployment's current ReplicaSet
    (``replica_set``), of the StatefulSet's update revision; [] for a DaemonSet (whose Pods do not
    name their revision in a way its status repeats)."""
    if kind == "Deployment" and replica_set:
        return [p for p in pods if any(o.get("name") == replica_set for o in
                                       p["metadata"].get("ownerReferences") or [])]
    if kind == "StatefulSet":
        revision = (obj.get("status") or {}).get("updateRevision")
        return [p for p in pods if revision and
                (p["metadata"].get("labels") or {}).get("controller-revision-hash") == revision]
    return []


def _deployment_state(name, spec, status):
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Progressing" and cond.get("reason") == "ProgressDeadlineExceeded":
            return False, "%s exceeded its progress deadline: %s" % (name, cond.get("message"))
    want = int(spec.get("replicas", 1))
    updated = _count(status, "updatedReplicas")
    total = _count(status, "replicas")
    available = _count(status, "availableReplicas")
    if updated < want:
        return False, "%s: %d of %d replicas updated" % (name, updated, want)
    if total > updated:
        return False, "%s: %d old replicas pending termination" % (name, total - updated)
    if available < updated:
        return False, "%s: %d of %d updated replicas available" % (name, available, updated)
    return True, "%s: %d of %d replicas updated and available" % (name, updated, want)


def _statefulset_state(name, spec, status):
    strategy = (spec.get("updateStrategy") or {}).get("type", "RollingUpdate")
    if strategy != "RollingUpdate":
        return True, "%s uses %s; no rollout to wait for" % (name, strategy)
    want = int(spec.get("replicas", 1))
    ready = _count(status, "readyReplicas")
    partition = int(((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition") or 0)
    if ready < want:
        return False, "%s: %d of %d replicas ready" % (name, ready, want)
    if partition:
        updated = _count(status, "updatedReplicas")
        if updated < want - partition:
            return False, "%s: %d of %d replicas above partition %d updated" % (
                name, updated, want - partition, partition)
        return True, "%s: partitioned rollout of %d replicas done" % (name, want - partition)
    if status.get("updateRevision") != status.get("currentRevision"):
        return False, "%s: %d of %d replicas on revision %s" % (
            name, _count(status, "updatedReplicas"), want, status.get("updateRevision"))
    return True, "%s: %d of %d replicas ready on revision %s" % (
        name, ready, want, status.get("currentRevision"))


def _daemonset_state(name, status):
    desired = _count(status, "desiredNumberScheduled")
    updated = _count(status, "updatedNumberScheduled")
    available = _count(status, "numberAvailable")
    if updated < desired:
        return False, "%s: %d of %d Pods updated" % (name, updated, desired)
    if available < desired:
        return False, "%s: %d of %d updated Pods available" % (name, available, desired)
    return True, "%s: %d of %d Pods updated and available" % (name, updated, desired)


def pod_problems(pods):
    """Short reasons why Pods are not Ready (ImagePullBackOff, CrashLoopBackOff, Pending...)."""
    problems = []
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status") or {}
        if not live(pod) or pod_ready(pod):
            continue
        reasons = ["%s: %s" % waiting for waiting in waiting_containers(pod)]
        if not reasons:
            reasons.append("phase %s" % status.get("phase", "Pending"))
        problems.append("%s (%s)" % (meta["name"], ", ".join(reasons)))
    return problems


def all_started_after(pods, when):
    """True when every live Pod's start time is at or after ``when`` (an aware datetime).
    A Pod with no start time yet counts as new: it was created by the rollout in progress."""
    for pod in live_only(pods):
        started = (pod.get("status") or {}).get("startTime") or pod["metadata"].get("creationTimestamp")
        if started and parse_time(started) < when:
            return False
    return True
