"""tf_cluster_info on the lab: a healthy installation has no blocking finding, and each unhealthy
case made on the lab (a pending release, a stuck hypervisor, a stopped controller, a fragile
business workload) shows up with its code."""
import uuid

from kubernetes import client

from .ansible_runner import run_playbook
from .test_gpupool_rollout import _wait_pool
from .settle import controller_stopped, settle


def info(lab, **opts):
    extra = {"lab_kubeconfig": lab["kubeconfig"], **{"ci_" + k: v for k, v in opts.items()}}
    run = run_playbook("tf_cluster_info.yml", extra)
    res = run.task_results("Info")
    assert run.rc == 0, res.get("msg")
    return res


def codes(res, severity=None):
    return sorted({f["code"] for f in res["findings"] if severity in (None, f["severity"])})


def test_healthy_lab_has_no_blocking_finding(lab, api_client):
    settle(api_client)
    res = info(lab)
    assert res["summary"]["blocking"] == 0, res["findings"]
    data = res["data"]
    assert [c["name"] for c in data["clusters"]] == ["tensor-fusion"]
    assert data["pools"][0]["name"] == "tensor-fusion-shared"
    assert len(data["gpunodes"]) == lab["nodes"] == data["gpus"]["total"]
    assert len(data["hypervisors"]) == lab["nodes"]
    assert data["release"]["status"] == "deployed"
    assert data["controller"][0]["available"] >= 1
    assert res["api_requests"] <= 20, "a few list calls, not one per object"


def test_cached_and_consistent_reads_agree(lab, api_client):
    """The watch-cache reads (default) and the paged etcd reads give the same picture, and the
    GPUs counted from the Table view's Phase column are the GPUs listed."""
    settle(api_client)
    cached, consistent = info(lab), info(lab, cached_reads=False)
    for key in ("gpunodes", "hypervisors", "gpus", "workloads", "pools", "release"):
        assert cached["data"][key] == consistent["data"][key], key
    gpus = client.CustomObjectsApi(api_client).list_cluster_custom_object("tensor-fusion.ai", "v1", "gpus")["items"]
    assert cached["data"]["gpus"]["total"] == len(gpus)
    assert cached["data"]["gpus"]["by_phase"] == {
        phase: sum(1 for g in gpus if (g.get("status") or {}).get("phase", "") == phase)
        for phase in {(g.get("status") or {}).get("phase", "") for g in gpus}}
    assert cached["api_requests"] <= consistent["api_requests"]


def test_pending_release_is_blocking(lab, api_client):
    core = client.CoreV1Api(api_client)
    ns = "ci-" + uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": ns}})
    try:
        # Helm's own storage record of a release stuck mid-upgrade (only the labels matter here).
        core.create_namespaced_secret(ns, {"metadata": {
            "name": "sh.helm.release.v1.tf.v2",
            "labels": {"owner": "helm", "name": "tf", "status": "pending-upgrade", "version": "2"}},
            "type": "helm.sh/release.v1", "stringData": {"release": "not read"}})
        res = info(lab, namespace=ns, release_name="tf")
        assert "RELEASE_PENDING" in codes(res, "blocking")
        assert "CONTROLLER_MISSING" in codes(res, "blocking")
    finally:
        core.delete_namespace(ns)


def test_stuck_hypervisor_pending_node_and_recovery(lab, api_client):
    core = client.CoreV1Api(api_client)
    pod = core.read_namespaced_pod("hypervisor-tfops-gpu-3", "tensor-fusion-sys")
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                      "data": {"neverReadyImages": pod.spec.containers[0].image}})
    try:
        core.delete_namespaced_pod("hypervisor-tfops-gpu-3", "tensor-fusion-sys")
        _wait_pool(api_client, lambda p: (p.get("status") or {}).get("phase") != "Running")
        res = info(lab)
        blocking = codes(res, "blocking")
        for code in ("HYPERVISOR_NOT_READY", "GPUNODE_NOT_RUNNING", "POOL_NOT_RUNNING"):
            assert code in blocking, res["findings"]
        stuck = [f for f in res["findings"] if f["code"] == "HYPERVISOR_NOT_READY"]
        assert "tfops-gpu-3" in stuck[0]["message"] and "ImagePullBackOff" in stuck[0]["message"]
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    _wait_pool(api_client, lambda p: (p.get("status") or {}).get("phase") == "Running")


def test_fragile_business_workload_warnings(lab, api_client):
    apps = client.AppsV1Api(api_client)
    core = client.CoreV1Api(api_client)
    ns = "ci-" + uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": ns}})
    labels = {"app": "llm", "tensor-fusion.ai/enabled": "true"}
    try:
        apps.create_namespaced_deployment(ns, {
            "metadata": {"name": "llm"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llm"}},
                     "template": {"metadata": {"labels": labels, "annotations": {
                         "tensor-fusion.ai/tflops-request": "10", "tensor-fusion.ai/vram-request": "1Gi"}},
                         "spec": {"containers": [{"name": "c", "image": "registry.lab/llm:1"}]}}}})
        res = info(lab)
        mine = sorted(f["code"] for f in res["findings"] if f["object"] == f"deployment/{ns}/llm")
        assert mine == ["WORKLOAD_NO_PDB", "WORKLOAD_NO_READINESS_PROBE", "WORKLOAD_SINGLE_REPLICA"]
        apps.patch_namespaced_deployment("llm", ns, {"spec": {"replicas": 2, "template": {"spec": {
            "containers": [{"name": "c", "readinessProbe": {"tcpSocket": {"port": 80}}}]}}}})
        pdb = {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget",
               "metadata": {"name": "llm"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "llm"}}}}
        from kubernetes.dynamic import DynamicClient
        DynamicClient(api_client).resources.get(api_version="policy/v1beta1", kind="PodDisruptionBudget") \
            .create(body=pdb, namespace=ns)
        res = info(lab)
        assert not [f for f in res["findings"] if f["object"] == f"deployment/{ns}/llm"]
    finally:
        core.delete_namespace(ns)


def test_findings_per_code_counts_what_it_leaves_out(lab, api_client, ns):
    """Two fragile workloads, one finding of each code shown: the other one is counted, in the
    marker finding, in findings_omitted and in the summary."""
    apps = client.AppsV1Api(api_client)
    for name in ("llm-a", "llm-b"):
        labels = {"app": name, "tensor-fusion.ai/enabled": "true"}
        apps.create_namespaced_deployment(ns, {
            "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "registry.lab/llm:1"}]}}}})
    full = info(lab, findings_per_code=0)
    capped = info(lab, findings_per_code=1)
    code = "WORKLOAD_NO_PDB"
    assert len([f for f in full["findings"] if f["code"] == code]) >= 2
    shown = [f for f in capped["findings"] if f["code"] == code]
    assert len(shown) == 2 and shown[-1]["object"] == "%d more" % capped["findings_omitted"][code]
    assert shown[-1]["severity"] == "warning"
    assert capped["summary"] == full["summary"] and full["findings_omitted"] == {}


def test_stopped_controller_is_blocking(lab, api_client):
    with controller_stopped(api_client):
        res = info(lab)
        ctl = [f for f in res["findings"] if f["code"] == "CONTROLLER_NOT_READY"]
        assert ctl and ctl[0]["severity"] == "blocking" and "0 of 0 replicas available" in ctl[0]["message"]


def test_custom_rule_and_bad_rule(lab):
    res = info(lab, rules=[{"code": "FEW_NODES", "severity": "warning",
                            "expression": "pools[?total_nodes < `100`]", "description": "fewer than 100 nodes"}])
    assert "FEW_NODES" in codes(res, "warning")
    run = run_playbook("tf_cluster_info.yml", {"lab_kubeconfig": lab["kubeconfig"], "ci_rules": [
        {"code": "X", "severity": "info", "expression": "pools[?"}]})
    assert run.rc != 0 and "not a JMESPath expression" in run.task_results("Info")["msg"]
