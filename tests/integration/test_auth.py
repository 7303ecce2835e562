"""The auth layer end to end through Ansible: a kubeconfig file, a dict kubeconfig, K8S_AUTH_*
variables (as AWX injects them), client certificates and a ServiceAccount token; and no credential
in the output, even at -vvv."""
import json

import pytest
from kubernetes import client

from .ansible_runner import run_playbook
from .helpers import service_account_token

TASK = "Read kube-system through tensorfusion.ops auth"


@pytest.fixture(scope="module")
def kube_system_uid(api_client):
    return client.CoreV1Api(api_client).read_namespace("kube-system").metadata.uid


def _ok(run, lab, uid):
    result = run.task_results(TASK)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert result["uid"] == uid
    assert result["api_server"] == lab["server"]
    return result


def test_kubeconfig_file(lab, kube_system_uid):
    _ok(run_playbook("auth_probe.yml", {"probe_kubeconfig": lab["kubeconfig"]}), lab, kube_system_uid)


def test_kubeconfig_dict_with_its_token_hidden_at_vvv(lab, kube_system_uid):
    kubeconfig = json.loads(open(lab["kubeconfig"]).read())
    run = run_playbook("auth_probe.yml", {"probe_kubeconfig": kubeconfig}, args=["-vvv"])
    _ok(run, lab, kube_system_uid)
    assert lab["token"] not in run.stdout + run.stderr


def test_k8s_auth_environment_as_awx_injects_it(lab, kube_system_uid):
    env = {"K8S_AUTH_HOST": lab["server"], "K8S_AUTH_API_KEY": lab["token"],
           "K8S_AUTH_SSL_CA_CERT": f"{lab['state_dir']}/pki/ca.crt", "K8S_AUTH_VERIFY_SSL": "true"}
    run = run_playbook("auth_probe.yml", env=env, args=["-vvv"])
    _ok(run, lab, kube_system_uid)
    assert lab["token"] not in run.stdout + run.stderr


def test_k8s_auth_kubeconfig_and_context_variables(lab, kube_system_uid):
    env = {"K8S_AUTH_KUBECONFIG": lab["kubeconfig"], "K8S_AUTH_CONTEXT": "tfops-lab"}
    _ok(run_playbook("auth_probe.yml", env=env), lab, kube_system_uid)


def test_client_certificate(lab, kube_system_uid):
    pki = f"{lab['state_dir']}/pki"
    _ok(run_playbook("auth_probe.yml", {
        "probe_host": lab["server"], "probe_ca_cert": f"{pki}/ca.crt",
        "probe_client_cert": f"{pki}/admin.crt", "probe_client_key": f"{pki}/admin.key"}),
        lab, kube_system_uid)


def test_default_kubeconfig_location(lab, kube_system_uid):
    # Nothing given: in-cluster config is absent here, so $KUBECONFIG / ~/.kube/config is used.
    _ok(run_playbook("auth_probe.yml", env={"KUBECONFIG": lab["kubeconfig"]}), lab, kube_system_uid)


def test_wrong_ca_fails_verification(lab, tmp_path):
    run = run_playbook("auth_probe.yml", {
        "probe_host": lab["server"], "probe_api_key": lab["token"],
        "probe_ca_cert": "/etc/ssl/certs/ca-certificates.crt"})
    assert run.rc != 0
    assert "CERTIFICATE_VERIFY_FAILED" in run.stdout or "certificate verify failed" in run.stdout


def test_service_account_token_and_forbidden_message(lab, api_client, ns):
    token = service_account_token(api_client, ns, "probe")
    env = {"K8S_AUTH_HOST": lab["server"], "K8S_AUTH_API_KEY": token,
           "K8S_AUTH_SSL_CA_CERT": f"{lab['state_dir']}/pki/ca.crt"}
    run = run_playbook("auth_probe.yml", env=env)
    assert run.rc != 0
    result = run.task_results(TASK)
    assert result["msg"].startswith("forbidden: get namespaces/kube-system")
    assert result["error"] == "Forbidden"
    assert token not in run.stdout + run.stderr
    # Granted read on namespaces, the same token works.
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_cluster_role({"metadata": {"name": f"{ns}-ns-read"}, "rules": [
        {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get"]}]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": f"{ns}-ns-read"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": f"{ns}-ns-read"},
        "subjects": [{"kind": "ServiceAccount", "name": "probe", "namespace": ns}]})
    try:
        run = run_playbook("auth_probe.yml", env=env)
        assert run.rc == 0, run.stdout[-2000:]
    finally:
        rbac.delete_cluster_role_binding(f"{ns}-ns-read")
        rbac.delete_cluster_role(f"{ns}-ns-read")


def test_impersonation(lab):
    run = run_playbook("auth_probe.yml", {"probe_kubeconfig": lab["kubeconfig"],
                                          "probe_impersonate_user": "nobody-in-particular"})
    assert run.rc != 0
    assert "forbidden" in run.task_results(TASK)["msg"]
    assert "nobody-in-particular" in run.task_results(TASK)["msg"]


def test_unreachable_api_server_is_a_clear_error(lab):
    import socket
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = run_playbook("auth_probe.yml", {"probe_host": f"https://127.0.0.1:{port}",
                                          "probe_api_key": lab["token"],
                                          "probe_ca_cert": f"{lab['state_dir']}/pki/ca.crt"})
    assert run.rc != 0
    result = run.task_results(TASK)
    assert result["msg"].startswith(f"cannot reach the API server https://127.0.0.1:{port}")
    assert lab["token"] not in run.stdout + run.stderr
