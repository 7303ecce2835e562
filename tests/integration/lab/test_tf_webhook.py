"""The Pod webhook: TensorFusion-enabled Pods get the injection of docs/operator-behaviour.md 6, and a test Pod can show
the virtual GPU it sees (env, limits, gpu-ids of a GPU on its own node)."""
import pytest
from kubernetes.client.rest import ApiException

from .conftest import POOL

NSX = "tf-webhook-test"


def pod(name, annotations, containers=None, labels=None):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": NSX,
        "labels": {"tensor-fusion.ai/enabled": "true", **(labels or {})},
        "annotations": annotations},
        "spec": {"containers": containers or [{"name": "app", "image": "busybox", "resources": {
            "limits": {"nvidia.com/gpu": "1", "cpu": "1"}}}]}}


@pytest.fixture(scope="module")
def ns(tfx):
    try:
        tfx.core.create_namespace({"metadata": {"name": NSX}})
    except ApiException as exc:
        if exc.status != 409:
            raise
    # Pods are admitted only once the namespace's default ServiceAccount exists.
    def default_sa():
        try:
            return tfx.core.read_namespaced_service_account("default", NSX)
        except ApiException as exc:
            if exc.status != 404:
                raise
            return None
    tfx.until(default_sa, what="the default ServiceAccount")
    return NSX


def test_request_annotation_is_required(tfx, ns):
    with pytest.raises(ApiException) as err:
        tfx.core.create_namespaced_pod(ns, pod("no-request", {}))
    assert "tflops-request" in err.value.body and "denied" in err.value.body


def test_two_containers_need_inject_container(tfx, ns):
    two = [{"name": "a", "image": "busybox"}, {"name": "b", "image": "busybox"}]
    with pytest.raises(ApiException) as err:
        tfx.core.create_namespaced_pod(ns, pod("two", {"tensor-fusion.ai/tflops-request": "10"}, two))
    assert "inject-container" in err.value.body


def test_local_pod_is_injected_and_sees_its_gpu(tfx, ns):
    created = tfx.core.create_namespaced_pod(ns, pod("local", {
        "tensor-fusion.ai/tflops-request": "20", "tensor-fusion.ai/vram-request": "1024Mi"}))
    lab, ann = created.metadata.labels, created.metadata.annotations
    pool = tfx.pool()
    assert lab["tensor-fusion.ai/component"] == "worker"                 # local mode default
    assert lab["tensor-fusion.ai/gpupool"] == POOL                          # the default pool
    assert lab["tensor-fusion.ai/pod-template-hash"] == \
        pool["status"]["componentStatus"]["client"]
    assert lab["tensor-fusion.ai/workload"] == "local"
    assert ann["tensor-fusion.ai/vram-request"] == "1Gi"                    # normalised
    assert ann["tensor-fusion.ai/vram-limit"] == "1Gi"
    assert ann["tensor-fusion.ai/tflops-limit"] == "20"
    for key, value in (("qos", "medium"), ("gpu-count", "1"), ("is-local-gpu", "true"),
                       ("isolation", "soft"), ("inject-container", "app"),
                       ("embedded-worker", "true"), ("gpupool", POOL)):
        assert ann[f"tensor-fusion.ai/{key}"] == value
    ctr = created.spec.containers[0]
    env = {e.name: e for e in ctr.env}
    assert env["HYPERVISOR_IP"].value_from.field_ref.field_path == "status.hostIP"
    assert env["HYPERVISOR_PORT"].value == str(
        pool["spec"]["componentConfig"]["hypervisor"]["portNumber"])
    assert env["TF_ISOLATION_MODE"].value == "soft" and "LD_PRELOAD" in env
    assert "nvidia.com/gpu" not in (ctr.resources.limits or {}) and ctr.resources.limits["cpu"]
    assert created.spec.scheduler_name == "tensor-fusion-scheduler"
    assert [i.name for i in created.spec.init_containers] == ["init-soft-limiter"]
    wl = tfx.get("tensorfusionworkloads", "local", ns)
    assert wl["metadata"]["labels"]["tensor-fusion.ai/gpupool"] == POOL
    assert wl["spec"]["resources"]["requests"] == {"tflops": "20", "vram": "1Gi"}
    # Once bound and running, the Pod carries the GPU it got, a GPU of its own node.
    got = tfx.until(lambda: (lambda p: p if p.status.phase == "Running" and p.metadata.annotations
                             .get("tensor-fusion.ai/gpu-ids") else None)(
        tfx.core.read_namespaced_pod("local", ns)), what="gpu-ids")
    gpu = tfx.get("gpus", got.metadata.annotations["tensor-fusion.ai/gpu-ids"])
    assert gpu["status"]["nodeSelector"]["kubernetes.io/hostname"] == got.spec.node_name
    assert got.status.host_ip  # what HYPERVISOR_IP resolves to
    tfx.until(lambda: (tfx.get("tensorfusionworkloads", "local", ns).get("status") or {}).get(
        "podTemplateHash"), what="workload hash")


def test_remote_pod_gets_client_injection(tfx, ns):
    created = tfx.core.create_namespaced_pod(ns, pod("remote", {
        "tensor-fusion.ai/tflops-request": "5", "tensor-fusion.ai/is-local-gpu": "false",
        "tensor-fusion.ai/isolation": "hard", "tensor-fusion.ai/vram-limit": "2Gi",
        "tensor-fusion.ai/vram-request": "2Gi"}))
    env = {e.name: e.value for e in created.spec.containers[0].env}
    endpoint = tfx.pool()["spec"]["componentConfig"]["client"]["operatorEndpoint"]
    assert created.metadata.labels["tensor-fusion.ai/component"] == "client"
    assert created.metadata.annotations["tensor-fusion.ai/selected-workload"] == "remote"
    assert env["TENSOR_FUSION_OPERATOR_GET_CONNECTION_URL"].startswith(endpoint + "/api/connection?")
    assert env["TF_LD_LIBRARY_PATH"] == "/tensor-fusion" and env["TF_GPU_MEMORY_LIMIT"] == "2048"
    assert [i.name for i in created.spec.init_containers] == ["inject-lib"]


def test_pods_without_the_label_are_untouched(tfx, ns):
    plain = pod("plain", {})
    plain["metadata"]["labels"] = {}
    created = tfx.core.create_namespaced_pod(ns, plain)
    assert created.metadata.annotations is None
    assert created.spec.containers[0].resources.limits["nvidia.com/gpu"] == "1"
