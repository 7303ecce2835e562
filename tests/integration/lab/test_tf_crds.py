"""The lab's CRDs on a real v1.20 API server: defaults, bounds, required fields, pruning."""
import pytest
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


def test_zero_batch_percentage_in_tfc_becomes_100_in_the_pool(tfx):
    pools = tfx.tfc()["spec"]["gpuPools"]
    old = pools[0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"].get(
        "batchPercentage", 100)
    tfx.policy(batchPercentage=40)
    tfx.wait_pool(lambda p: p["spec"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"][
        "batchPercentage"] == 40)
    tfx.policy(batchPercentage=0)
    try:
        assert tfx.tfc()["spec"]["gpuPools"][0]["specTemplate"]["nodeManagerConfig"][
            "nodePoolRollingUpdatePolicy"]["batchPercentage"] == 0
        tfx.wait_pool(lambda p: p["spec"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"][
            "batchPercentage"] == 100)
    finally:
        tfx.policy(batchPercentage=old)
