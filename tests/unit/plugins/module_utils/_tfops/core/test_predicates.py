"""core/predicates.py: what "Ready", "live" and "waiting" mean for an object's dict, said once."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import predicates as p


def pod(ready=None, deleting=False, waiting=(), transition=None):
    conditions = []
    if ready is not None:
        conditions.append({"type": "Ready", "status": "True" if ready else "False",
                           "lastTransitionTime": transition})
    conditions.append({"type": "PodScheduled", "status": "True"})
    meta = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T02:00:00Z"
    return {"metadata": meta, "status": {
        "conditions": conditions,
        "containerStatuses": [{"name": n, "state": {"waiting": {"reason": r}}} for n, r in waiting] +
                             [{"name": "sidecar", "state": {"running": {}}}]}}


def test_pod_ready_reads_the_ready_condition_only():
    assert p.pod_ready(pod(ready=True))
    assert not p.pod_ready(pod(ready=False))
    assert not p.pod_ready(pod())  # no Ready condition yet
    assert not p.pod_ready({"metadata": {}})  # no status at all
    assert p.condition(pod(ready=True, transition="t"), "Ready")["lastTransitionTime"] == "t"
    assert p.condition(pod(), "Ready") is None
    assert p.condition_true(pod(), "PodScheduled")


def test_live_is_not_being_deleted():
    assert p.live(pod()) and not p.live(pod(deleting=True))
    assert p.live({})  # an object without metadata is not being deleted
    pods = [pod(), pod(deleting=True), pod(ready=True)]
    assert p.live_only(pods) == [pods[0], pods[2]]


def test_waiting_containers_in_order_with_their_reason():
    assert p.waiting_containers(pod(waiting=[("main", "ImagePullBackOff"), ("init", "CrashLoopBackOff")])) == [
        ("main", "ImagePullBackOff"), ("init", "CrashLoopBackOff")]
    assert p.waiting_containers(pod()) == []
