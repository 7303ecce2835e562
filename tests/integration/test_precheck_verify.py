"""The precheck and verify roles, and tf_acceptance, on the lab: pass when healthy, fail with a
clear reason when not (a stopped controller; no webhook), and leave nothing behind."""
import uuid

import pytest
from kubernetes import client

from .ansible_runner import run_playbook
from .settle import controller_stopped, settle


def roles(lab, **extra):
    run = run_playbook("roles_check.yml", {"lab_kubeconfig": lab["kubeconfig"], **extra})
    return run


def scratch_namespaces(api_client):
    return [n.metadata.name for n in client.CoreV1Api(api_client).list_namespace().items
            if n.metadata.name.startswith("tfops-acceptance") and n.metadata.deletion_timestamp is None]


@pytest.mark.smoke
def test_healthy_lab_passes_both_roles_and_leaves_nothing(lab, api_client):
    settle(api_client)
    run = roles(lab)
    assert run.rc == 0, run.stdout[-3000:]
    acceptance = run.task_results("Run a TensorFusion-enabled test Pod and check what was injected")
    assert acceptance["passed"] and all(c["ok"] for c in acceptance["checks"])
    assert acceptance["pod"]["labels"]["tensor-fusion.ai/gpupool"] == "tensor-fusion-shared"
    assert run.task_results("Fail on blocking findings")["msg"].startswith("precheck passed")
    assert scratch_namespaces(api_client) == []


def test_precheck_fails_on_a_stopped_controller_and_downgrade_lets_it_pass(lab, api_client):
    with controller_stopped(api_client):
        run = roles(lab, run_verify=False)
        assert run.rc != 0
        failed = run.task_results("Fail on blocking findings")
        assert "precheck failed" in failed["msg"] and "controller Deployment" in failed["msg"]
        run = roles(lab, run_verify=False, precheck_downgrade_codes=["CONTROLLER_NOT_READY"])
        assert run.rc == 0, run.stdout[-2000:]


def test_verify_fails_clearly_without_the_webhook(lab, api_client):
    adm = client.AdmissionregistrationV1Api(api_client)
    saved = [w for w in adm.list_mutating_webhook_configuration().items
             if any("mutate-v1-pod" in (h.client_config.url or "") or
                    (h.client_config.service and h.client_config.service.path == "/mutate-v1-pod")
                    for h in w.webhooks or [])]
    assert saved, "the lab registers TensorFusion's Pod webhook"
    for hook in saved:
        adm.delete_mutating_webhook_configuration(hook.metadata.name)
    try:
        run = roles(lab, run_precheck=False)
        assert run.rc != 0
        res = run.task_results("Run a TensorFusion-enabled test Pod and check what was injected")
        assert res["msg"].startswith("acceptance failed:")
        assert "is the webhook registered" in res["msg"]
        assert "native GPU resources left: nvidia.com/gpu" in res["msg"]
        # Failed without waiting for the Pod: it could not pass, Ready or not.
        assert {"check": "Pod Ready", "ok": False, "detail": "not waited for: the Pod was not mutated"} in res["checks"]
    finally:
        for hook in saved:
            hook.metadata = client.V1ObjectMeta(name=hook.metadata.name, labels=hook.metadata.labels,
                                                annotations=hook.metadata.annotations)
            adm.create_mutating_webhook_configuration(hook)
    assert scratch_namespaces(api_client) == [], "cleaned up also when it failed"


def test_acceptance_check_mode_creates_nothing(lab, api_client):
    ns = "tfops-acceptance-" + uuid.uuid4().hex[:6]
    run = run_playbook("roles_check.yml", {"lab_kubeconfig": lab["kubeconfig"], "run_precheck": False},
                       args=["--check"])
    assert run.rc == 0, run.stdout[-2000:]
    assert ns not in scratch_namespaces(api_client) and scratch_namespaces(api_client) == []
