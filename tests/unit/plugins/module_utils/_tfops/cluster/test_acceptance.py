"""cluster/acceptance.py: the TensorFusion Pod that acceptance creates, what the webhook must have
injected into it (docs/operator-behaviour.md 6), each check saying what it saw, and when the Pod
is ready or can no longer become ready."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import acceptance

P = "tensor-fusion.ai/"


def created(pool="shared", is_local_gpu=True):
    return acceptance.test_pod("tfops-acceptance-1", pool, "busybox:1.36", "10", "1Gi", "shared", is_local_gpu)


def injected(pool="shared"):
    """The Pod as the webhook returns it when it did everything."""
    pod = created(pool)
    pod["metadata"]["labels"].update({P + "component": "client", P + "gpupool": pool,
                                      P + "pod-template-hash": "abc123"})
    pod["metadata"]["annotations"].update({P + "gpupool": pool, P + "inject-container": "probe"})
    container = pod["spec"]["containers"][0]
    container["env"] = [{"name": "HYPERVISOR_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}},
                        {"name": "HYPERVISOR_PORT", "value": "8000"}]
    container["resources"] = {}
    return pod


def by_name(checks):
    return dict((c["check"], c) for c in checks)


def test_the_pod_asks_for_tensorfusion_with_a_native_gpu_limit_for_the_webhook_to_remove():
    pod = created()
    meta = pod["metadata"]
    assert meta["labels"] == {P + "enabled": "true", "app.kubernetes.io/managed-by": "tensorfusion.ops"}
    assert meta["annotations"] == {P + "tflops-request": "10", P + "vram-request": "1Gi",
                                   P + "isolation": "shared", P + "is-local-gpu": "true", P + "gpupool": "shared"}
    spec = pod["spec"]
    assert spec["restartPolicy"] == "Never" and spec["automountServiceAccountToken"] is False
    container, = spec["containers"]
    assert container["image"] == "busybox:1.36"
    assert container["resources"] == {"limits": {"nvidia.com/gpu": "1"}}


def test_without_a_pool_the_webhook_picks_one_and_a_remote_gpu_is_said():
    ann = created(pool=None, is_local_gpu=False)["metadata"]["annotations"]
    assert P + "gpupool" not in ann
    assert ann[P + "is-local-gpu"] == "false"


def test_a_fully_injected_pod_passes_every_check():
    checks = acceptance.injection_checks(injected(), pool="shared")
    assert [c["check"] for c in checks] == ["component label", "pool label", "template hash label",
                                            "normalised requests", "hypervisor env", "no native GPU resource"]
    assert all(c["ok"] is True for c in checks), checks
    seen = by_name(checks)
    assert seen["pool label"]["detail"] == "tensor-fusion.ai/gpupool=shared (expected shared)"
    assert seen["hypervisor env"]["detail"] == "HYPERVISOR_IP set, HYPERVISOR_PORT 8000"
    assert seen["no native GPU resource"]["detail"] == "removed"


def test_a_pod_the_webhook_never_saw_fails_every_check_and_says_what_is_missing():
    checks = by_name(acceptance.injection_checks(created(), pool="shared"))
    assert not any(c["ok"] for c in checks.values())
    assert checks["component label"]["detail"] == "tensor-fusion.ai/component=None"
    assert checks["hypervisor env"]["detail"] == "HYPERVISOR_IP missing, HYPERVISOR_PORT missing"
    assert checks["no native GPU resource"]["detail"] == "native GPU resources left: nvidia.com/gpu"
    assert checks["normalised requests"]["detail"] == "tflops 10, vram 1Gi, pool shared, inject-container None"


@pytest.mark.parametrize("breaks,check", [
    (lambda pod: pod["metadata"]["labels"].update({P + "component": "operator"}), "component label"),
    (lambda pod: pod["metadata"]["labels"].update({P + "gpupool": "other"}), "pool label"),
    (lambda pod: pod["metadata"]["labels"].pop(P + "pod-template-hash"), "template hash label"),
    (lambda pod: pod["metadata"]["annotations"].pop(P + "inject-container"), "normalised requests"),
    (lambda pod: pod["spec"]["containers"][0]["env"].pop(), "hypervisor env"),
    (lambda pod: pod["spec"]["containers"][0]["resources"].update({"requests": {"amd.com/gpu": "1"}}),
     "no native GPU resource"),
])
def test_each_missing_injection_fails_its_own_check_only(breaks, check):
    pod = injected()
    breaks(pod)
    failed = [c["check"] for c in acceptance.injection_checks(pod, pool="shared") if not c["ok"]]
    assert failed == [check]


def test_a_worker_pod_passes_and_any_pool_passes_when_none_was_asked_for():
    pod = injected(pool="other")
    pod["metadata"]["labels"][P + "component"] = "worker"
    checks = by_name(acceptance.injection_checks(pod))
    assert all(c["ok"] for c in checks.values())
    assert checks["pool label"]["detail"] == "tensor-fusion.ai/gpupool=other"


def status(ready=False, phase="Pending", waiting=None):
    return {"status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "containerStatuses": [{"name": "probe", "state": {"waiting": {"reason": waiting}}
                                              if waiting else {"running": {}}}]}}


def test_ready_state():
    assert acceptance.ready_state(status(ready=True, phase="Running")) == (True, None)
    assert acceptance.ready_state(status()) == (False, None)
    assert acceptance.ready_state(status(waiting="ContainerCreating")) == (False, None)
    assert acceptance.ready_state({}) == (False, None)


@pytest.mark.parametrize("reason", ["ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff",
                                    "CreateContainerConfigError", "InvalidImageName"])
def test_a_container_that_cannot_start_by_waiting_ends_the_wait_with_its_reason(reason):
    assert acceptance.ready_state(status(waiting=reason)) == (False, "probe: %s" % reason)


@pytest.mark.parametrize("phase", ["Failed", "Succeeded"])
def test_a_pod_that_ended_cannot_become_ready(phase):
    assert acceptance.ready_state(status(phase=phase)) == (False, "phase %s" % phase)
