"""The lab's CRDs (upstream's, CEL rules included) on the lab's API server: defaults, bounds,
required fields, CEL validation, pruning."""
import copy
import json

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

G, V = "tensor-fusion.ai", "v1"


def pool_body(name, policy):
    return {"apiVersion": f"{G}/{V}", "kind": "GPUPool", "metadata": {"name": name},
            "spec": {"nodeManagerConfig": {"nodePoolRollingUpdatePolicy": policy},
                     "componentConfig": {"hypervisor": {"image": "x"}}}}


def test_defaults_and_pruning(tfx):
    created = tfx.co.create_cluster_custom_object(G, V, "gpupools", pool_body(
        "crd-defaults", {"autoUpdate": True}))
    try:
        spec = created["spec"]
        pol = spec["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
        assert pol == {"batchPercentage": 100, "batchInterval": "1s", "maxDuration": "10m"}
        assert spec["componentConfig"]["hypervisor"]["portNumber"] == 8000
        assert spec["nodeManagerConfig"]["defaultIsolationMode"] == "soft"
        assert spec["nodeManagerConfig"]["provisioningMode"] == "AutoSelect"
    finally:
        tfx.co.delete_cluster_custom_object(G, V, "gpupools", "crd-defaults")


@pytest.mark.parametrize("spec", [
    {"componentConfig": {}},                                                   # required
    {"nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": 101}}},
    {"nodeManagerConfig": {"defaultIsolationMode": "bogus"}},
    {"nodeManagerConfig": {}, "componentConfig": {"hypervisor": {"portNumber": 70000}}},
])
def test_validation(tfx, spec):
    with pytest.raises(ApiException) as err:
        tfx.co.create_cluster_custom_object(G, V, "gpupools", {
            "apiVersion": f"{G}/{V}", "kind": "GPUPool", "metadata": {"name": "crd-invalid"},
            "spec": spec})
    assert err.value.status == 422


WORKLOAD_RESOURCES = {"requests": {"tflops": "1", "vram": "1Gi"},
                      "limits": {"tflops": "1", "vram": "1Gi"}}


@pytest.mark.parametrize("plural, kind", [("tensorfusionworkloads", "TensorFusionWorkload"),
                                          ("workloadprofiles", "WorkloadProfile")])
@pytest.mark.parametrize("spec, refusal", [
    ({"gangScheduling": {"minMembers": 1}}, "minMembers must be 0 (default to workload replicas) or >= 2"),
    ({"replicas": 2, "gangScheduling": {"minMembers": 3}},
     "gangScheduling.minMembers must be <= spec.replicas when both are set"),
])
def test_cel_rules_are_enforced_by_the_api_server(tfx, plural, kind, spec, refusal):
    """Upstream's CEL rules are in the lab's CRDs and the API server evaluates them: a write that
    breaks one is refused with upstream's message, and the same object within the rule is taken."""
    body = {"apiVersion": f"{G}/{V}", "kind": kind, "metadata": {"name": "crd-cel"},
            "spec": {"poolName": "none", "resources": WORKLOAD_RESOURCES, **copy.deepcopy(spec)}}
    with pytest.raises(ApiException) as err:
        tfx.co.create_namespaced_custom_object(G, V, "default", plural, body)
    assert err.value.status == 422 and refusal in json.loads(err.value.body)["message"]
    body["spec"]["gangScheduling"]["minMembers"] = 2
    body["spec"]["replicas"] = 2
    tfx.co.create_namespaced_custom_object(G, V, "default", plural, body)
    tfx.co.delete_namespaced_custom_object(G, V, "default", plural, "crd-cel")


def test_zero_batch_percentage_in_tfc_becomes_100_in_the_pool(tfx):
    pools = tfx.tfc()["spec"]["gpuPools"]
    old = pools[0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"].get(
        "batchPercentage", 100)
    tfx.policy(batchPercentage=40)
    tfx.wait_pool(lambda p: p["spec"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"][
        "batchPercentage"] == 40)
    tfx.policy(batchPercentage=0)
    try:
        assert tfx.template()["nodeManagerConfig"][
            "nodePoolRollingUpdatePolicy"]["batchPercentage"] == 0
        tfx.wait_pool(lambda p: p["spec"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"][
            "batchPercentage"] == 100)
    finally:
        tfx.policy(batchPercentage=old)


def test_empty_strings_zeros_and_false_read_back_unchanged_and_null_is_pruned(tfx):
    """Like every real server, the lab's stores "" in a string field (the operator writes them),
    0 and false as they are, and prunes an explicit null."""
    body = pool_body("crd-zero-values", {"batchInterval": "", "batchPercentage": 0,
                                          "autoUpdateHypervisor": False})
    body["spec"]["schedulingConfigTemplate"] = ""
    body["spec"]["defaultUsingLocalGPU"] = False
    body["spec"]["nodeManagerConfig"]["defaultVendor"] = None
    created = tfx.co.create_cluster_custom_object(G, V, "gpupools", body)
    try:
        read = tfx.co.get_cluster_custom_object(G, V, "gpupools", "crd-zero-values")
        for obj in (created, read):
            spec = obj["spec"]
            policy = spec["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
            assert policy["batchInterval"] == "" and policy["batchPercentage"] == 0
            assert policy["autoUpdateHypervisor"] is False
            assert spec["schedulingConfigTemplate"] == "" and spec["defaultUsingLocalGPU"] is False
            # The explicit null is gone, and then defaulted like an absent field.
            assert spec["nodeManagerConfig"]["defaultVendor"] == "NVIDIA"
        patched = tfx.co.patch_cluster_custom_object_status(G, V, "gpupools", "crd-zero-values", {
            "status": {"phase": "Pending", "componentStatus": {"hypervisor": ""},
                       "readyNodes": 0, "notReadyNodes": 0, "totalTFlops": "0",
                       "totalVRAM": "0", "virtualTFlops": "0", "virtualVRAM": "0",
                       "availableTFlops": "0", "availableVRAM": "0"}})
        # (The double reconciles every GPUPool and may add its own hashes to the same status.)
        assert patched["status"]["componentStatus"]["hypervisor"] == ""
    finally:
        tfx.co.delete_cluster_custom_object(G, V, "gpupools", "crd-zero-values")


# Throwaway objects of every kind the double writes status for; none is picked up by its
# reconcilers in a way that matters (no pool selects them, no node carries them).
SMOKE = {
    "tfc": ("tensorfusionclusters", None, {"gpuPools": []}),
    "pool": ("gpupools", None, {"nodeManagerConfig": {}, "componentConfig": {}}),
    "gpunode": ("gpunodes", None, {"manageMode": "AutoSelect"}),
    "gpu": ("gpus", None, None),
    "workload": ("tensorfusionworkloads", "default", {
        "poolName": "none", "resources": {"requests": {"tflops": "1", "vram": "1Gi"},
                                          "limits": {"tflops": "1", "vram": "1Gi"}}}),
}


@pytest.mark.parametrize("kind", sorted(SMOKE))
def test_the_doubles_status_writes_are_schema_complete(tfx, kind):
    """What the double writes passes the upstream-shaped schemas: a status write through its own
    client (which fills the fields upstream's Go types always send) is accepted and reads back
    with every required field, while the same write sent bare is refused (422), as upstream."""
    from lab.tensorfusion import kube as double_kube
    from lab.tensorfusion.store import Store
    plural, ns, spec = SMOKE[kind]
    name = f"smoke-{kind}"
    body = {"apiVersion": f"{G}/{V}", "kind": {"tfc": "TensorFusionCluster", "pool": "GPUPool",
                                               "gpunode": "GPUNode", "gpu": "GPU",
                                               "workload": "TensorFusionWorkload"}[kind],
            "metadata": {"name": name, **({"namespace": ns} if ns else {})}}
    if spec is not None:
        body["spec"] = spec
    if ns:
        tfx.co.create_namespaced_custom_object(G, V, ns, plural, body)
    else:
        tfx.co.create_cluster_custom_object(G, V, plural, body)
    key = f"{ns}/{name}" if ns else name
    api = double_kube.Api(Store())
    api.co, api.core = client.CustomObjectsApi(tfx.api), client.CoreV1Api(tfx.api)
    patch = {"status": {"phase": "Pending" if kind != "workload" else "Running",
                        "conditions": [{"type": "Ready", "status": "False", "reason": "NewCreation",
                                        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}}
    if kind in ("gpunode", "gpu", "workload"):
        patch["status"].pop("conditions")
    required = double_kube.REQUIRED_STATUS[kind]
    # Dropping one required field: refused whether or not the double has written a status yet.
    bare = {"status": {sorted(required)[0]: None}}
    try:
        with pytest.raises(ApiException) as refused:
            if ns:
                tfx.co.patch_namespaced_custom_object_status(G, V, ns, plural, name, bare)
            else:
                tfx.co.patch_cluster_custom_object_status(G, V, plural, name, bare)
        assert refused.value.status == 422
        assert api.patch(kind, key, patch, status=True) is not None
        read = (tfx.co.get_namespaced_custom_object(G, V, ns, plural, name) if ns
                else tfx.co.get_cluster_custom_object(G, V, plural, name))
        for field in required:
            assert field in read["status"], field
    finally:
        if ns:
            tfx.co.patch_namespaced_custom_object(G, V, ns, plural, name,
                                                   {"metadata": {"finalizers": None}})
            tfx.co.delete_namespaced_custom_object(G, V, ns, plural, name)
        else:
            tfx.co.patch_cluster_custom_object(G, V, plural, name,
                                               {"metadata": {"finalizers": None}})
            tfx.co.delete_cluster_custom_object(G, V, plural, name)
