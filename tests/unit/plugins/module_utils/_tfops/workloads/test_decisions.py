"""Pure decisions of workload_restart (workloads/decisions.py): rollout status as kubectl judges
it, Pod problems, times."""
import datetime

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads import decisions


UTC = datetime.timezone.utc


def deploy(generation=2, observed=2, replicas=3, updated=3, total=3, available=3, conditions=()):
    return {"metadata": {"name": "d", "namespace": "ns", "generation": generation},
            "spec": {"replicas": replicas},
            "status": {"observedGeneration": observed, "updatedReplicas": updated,
                       "replicas": total, "availableReplicas": available,
                       "conditions": list(conditions)}}


@pytest.mark.parametrize("obj,done,fragment", [
    (deploy(), True, "3 of 3 replicas updated and available"),
    (deploy(observed=1), False, "not yet seen generation 2"),
    (deploy(updated=1), False, "1 of 3 replicas updated"),
    (deploy(total=4), False, "1 old replicas pending termination"),
    (deploy(available=2), False, "2 of 3 updated replicas available"),
    (deploy(conditions=[{"type": "Progressing", "reason": "ProgressDeadlineExceeded",
                         "message": "took too long"}]), False, "exceeded its progress deadline"),
])
def test_deployment_rollout_state(obj, done, fragment):
    ok, detail = decisions.rollout_state("Deployment", obj)
    assert ok is done
    assert fragment in detail


def test_statefulset_waits_for_revision_and_readiness():
    sts = {"metadata": {"name": "s", "namespace": "ns", "generation": 1},
           "spec": {"replicas": 2},
           "status": {"observedGeneration": 1, "readyReplicas": 2, "updatedReplicas": 1,
                      "currentRevision": "s-1", "updateRevision": "s-2"}}
    assert decisions.rollout_state("StatefulSet", sts)[0] is False
    sts["status"]["currentRevision"] = "s-2"
    assert decisions.rollout_state("StatefulSet", sts)[0] is True
    sts["status"]["readyReplicas"] = 1
    assert decisions.rollout_state("StatefulSet", sts) == (False, "StatefulSet ns/s: 1 of 2 replicas ready")
    sts["spec"]["updateStrategy"] = {"type": "OnDelete"}
    assert decisions.rollout_state("StatefulSet", sts)[0] is True


def test_daemonset_state():
    ds = {"metadata": {"name": "x", "namespace": "ns", "generation": 1},
          "status": {"observedGeneration": 1, "desiredNumberScheduled": 4,
                     "updatedNumberScheduled": 4, "numberAvailable": 3}}
    assert decisions.rollout_state("DaemonSet", ds) == (False, "DaemonSet ns/x: 3 of 4 updated Pods available")
    ds["status"]["numberAvailable"] = 4
    assert decisions.rollout_state("DaemonSet", ds)[0] is True


def test_restart_patch_matches_kubectl():
    assert decisions.restart_patch("T") == {
        "spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": "T"}}}}}


def pod(name, start, ready=True, waiting=None, deleting=False):
    status = {"startTime": start, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if waiting:
        status["containerStatuses"] = [{"name": "c", "state": {"waiting": {"reason": waiting}}}]
    meta = {"name": name, "creationTimestamp": start}
    if deleting:
        meta["deletionTimestamp"] = start
    return {"metadata": meta, "status": status}


def test_all_started_after_ignores_terminating_pods():
    after = datetime.datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    pods = [pod("new", "2026-11-29T02:00:05Z"), pod("old", "2026-11-29T01:00:00Z", deleting=True)]
    assert decisions.all_started_after(pods, after)
    pods.append(pod("stale", "2026-11-29T01:59:59Z"))
    assert not decisions.all_started_after(pods, after)


def test_pod_problems_name_the_reason():
    problems = decisions.pod_problems([pod("a", "t"), pod("b", "t", ready=False, waiting="ImagePullBackOff"),
                                       pod("c", "t", ready=False)])
    assert problems == ["b (c: ImagePullBackOff)", "c (phase Pending)"]


def test_secret_annotation_records_version_not_content():
    secret = {"metadata": {"name": "creds", "uid": "u-1", "resourceVersion": "42"}, "data": {"k": "c2VjcmV0"}}
    assert decisions.secret_annotation(secret) == ("secret.ops.tensor-fusion.ai/creds", "u-1:42")
    long_name = {"metadata": {"name": "x" * 80, "uid": "u", "resourceVersion": "1"}}
    key, _value = decisions.secret_annotation(long_name)
    assert len(key.split("/", 1)[1]) <= 63


def test_restart_patch_carries_extra_annotations():
    patch = decisions.restart_patch("T", {"secret.ops.tensor-fusion.ai/creds": "u:1"})
    assert patch["spec"]["template"]["metadata"]["annotations"] == {
        "kubectl.kubernetes.io/restartedAt": "T", "secret.ops.tensor-fusion.ai/creds": "u:1"}


def test_a_deployment_past_its_progress_deadline_cannot_finish_by_waiting():
    gave_up = [{"type": "Progressing", "reason": "ProgressDeadlineExceeded",
                "message": 'ReplicaSet "d-7f" has timed out progressing.'}]
    failure = decisions.rollout_failure("Deployment", deploy(updated=1, conditions=gave_up))
    assert failure == 'Deployment ns/d exceeded its progress deadline (600s): ReplicaSet "d-7f" has timed out progressing.'
    # Not yet judged for the new generation (a restart just written): not a failure yet.
    assert decisions.rollout_failure("Deployment", deploy(observed=1, conditions=gave_up)) is None
    assert decisions.rollout_failure("Deployment", deploy(updated=1)) is None
    assert decisions.rollout_failure("StatefulSet", deploy(conditions=gave_up)) is None


def _pod(name, reason=None, owner="web-5d8f", deleting=False, message="back-off"):
    meta = {"name": name, "ownerReferences": [{"kind": "ReplicaSet", "name": owner}],
            "labels": {"controller-revision-hash": owner}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    state = {"waiting": {"reason": reason, "message": message}} if reason else {"running": {}}
    return {"metadata": meta, "status": {"containerStatuses": [{"name": "app", "state": state}]}}


def test_failing_pods_names_only_states_that_waiting_does_not_mend():
    pods = [_pod("a", "ImagePullBackOff"), _pod("b", "ContainerCreating"), _pod("c"),
            _pod("d", "CrashLoopBackOff", deleting=True), _pod("e", "CrashLoopBackOff", message=None)]
    assert decisions.failing_pods(pods) == {"a": "app: ImagePullBackOff (back-off)",
                                            "e": "app: CrashLoopBackOff (no message)"}


def test_a_hypervisor_pod_that_cannot_start_is_named_with_its_image_node_and_reason():
    """#45: a pool's hypervisor Pods also fail on a first failed pull and when unschedulable;
    each is named with the image, the node and the reason."""
    pull = _pod("hv-1", "ErrImagePull", message="pull access denied")
    pull["spec"] = {"nodeName": "gpu-1", "containers": [{"name": "app", "image": "hv:9"}]}
    unscheduled = _pod("hv-2")
    unscheduled["status"] = {"conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                             "message": "0/3 nodes are available"}]}
    waiting = _pod("hv-3", "ContainerCreating")
    found = decisions.failing_pods([pull, unscheduled, waiting], decisions.HYPERVISOR_WAITING,
                                   unschedulable=True, where=True)
    assert found == {"hv-1": "app (image hv:9) on node gpu-1: ErrImagePull (pull access denied)",
                     "hv-2": "not scheduled: Unschedulable (0/3 nodes are available)"}
    # A Deployment's Pods keep the narrower rule: a first failed pull may heal, unscheduled may
    # wait for a node
    assert decisions.failing_pods([pull, unscheduled]) == {}


def test_a_failure_must_last_before_it_ends_the_wait_and_a_recovered_pod_is_forgotten():
    seen = {}
    assert decisions.lasting_failures({"a": "app: ImagePullBackOff (x)"}, seen, 100.0) == []
    assert decisions.lasting_failures({"a": "app: ImagePullBackOff (x)"}, seen, 129.0) == []
    assert decisions.lasting_failures({"a": "app: ImagePullBackOff (x)"}, seen, 130.0) == \
        ["a app: ImagePullBackOff (x) for 30s"]
    assert decisions.lasting_failures({}, seen, 131.0) == [] and seen == {}
    assert decisions.lasting_failures({"a": "app: ImagePullBackOff (x)"}, seen, 140.0) == []


def test_current_pods_are_those_of_the_rollout_in_progress():
    pods = [_pod("new", owner="web-new"), _pod("old", owner="web-old")]
    assert [p["metadata"]["name"] for p in decisions.current_pods("Deployment", {}, pods, "web-new")] == ["new"]
    sts = {"status": {"updateRevision": "web-old"}}
    assert [p["metadata"]["name"] for p in decisions.current_pods("StatefulSet", sts, pods)] == ["old"]
    assert decisions.current_pods("DaemonSet", {}, pods) == []
    assert decisions.current_pods("Deployment", {}, pods, None) == []
