"""Which operator the double plays: its version and isolation policy come from the controller
Deployment's Pod, and a Pod that only lost its Ready condition (its node missed heartbeats during an
API server outage) keeps the double acting with the same version, as the real process keeps running.
A flip to "no version" there changed every hypervisor hash and started a bogus campaign mid-rollout."""
from lab.tensorfusion.operator import controller_identity

NS = "tensor-fusion-sys"


def pod(name, image, created, ready=True, running=True, deleting=False, namespace=NS, env=None):
    meta = {"name": name, "namespace": namespace, "creationTimestamp": created,
            "labels": {"tensor-fusion.ai/component": "operator"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    state = {"running": {"startedAt": created}} if running else {"waiting": {"reason": "ImagePullBackOff"}}
    return {"metadata": meta,
            "spec": {"containers": [{"name": "controller", "image": image, "env": env or []}]},
            "status": {"phase": "Running" if running else "Pending",
                       "containerStatuses": [{"name": "controller", "state": state}],
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_the_newest_ready_pod_speaks():
    pods = [pod("a", "reg/tf-operator:1.0", "2026-12-01T00:00:01Z"),
            pod("b", "reg:5000/tf-operator:2.0", "2026-12-01T00:00:02Z",
                env=[{"name": "TF_ISOLATION_MODE_POLICY", "value": "Dynamic"}])]
    assert controller_identity(pods, NS) == (True, "2.0", "dynamic")


def test_a_pod_that_only_lost_ready_keeps_the_operator_acting_with_its_version():
    pods = [pod("a", "reg/tf-operator:1.0", "2026-12-01T00:00:01Z", ready=False)]
    assert controller_identity(pods, NS) == (True, "1.0", "static")


def test_a_ready_pod_wins_over_a_newer_one_that_only_runs():
    pods = [pod("old", "reg/tf-operator:1.0", "2026-12-01T00:00:01Z"),
            pod("new", "reg/tf-operator:2.0", "2026-12-01T00:00:02Z", ready=False)]
    assert controller_identity(pods, NS) == (True, "1.0", "static")


def test_no_running_pod_pauses():
    pods = [pod("gone", "reg/tf-operator:1.0", "2026-12-01T00:00:01Z", deleting=True),
            pod("stuck", "reg/tf-operator:1.0", "2026-12-01T00:00:02Z", ready=False, running=False),
            pod("elsewhere", "reg/tf-operator:1.0", "2026-12-01T00:00:03Z", namespace="other")]
    assert controller_identity(pods, NS) == (False, "", "static")
