"""The webhook's pure mutation (docs/operator-behaviour.md 6) and the double's small pure helpers."""
import pytest

from lab.tensorfusion import controllers, hashes, webhook
from lab.tensorfusion.operator import Knobs

POOL = {"metadata": {"name": "tensor-fusion-shared"}, "spec": {
    "nodeManagerConfig": {"defaultVendor": "NVIDIA"},
    "componentConfig": {"hypervisor": {"image": "hv:1", "portNumber": 8000},
                        "client": {"image": "cl:1", "operatorEndpoint": "http://op:8080"}}}}


def pod(annotations, containers=None):
    return {"metadata": {"name": "p", "namespace": "ns",
                         "labels": {"tensor-fusion.ai/enabled": "true"},
                         "annotations": annotations},
            "spec": {"containers": containers or [{"name": "app", "image": "x", "resources": {
                "limits": {"nvidia.com/gpu": "2", "cpu": "1"},
                "requests": {"nvidia.com/gpu": "2"}}}]}}


@pytest.mark.parametrize("text,out", [("1024Mi", "1Gi"), ("1Gi", "1Gi"), ("1536Mi", "1536Mi"),
                                      ("100", "100"), ("1000m", "1"), ("500m", "500m"),
                                      ("2000", "2k"), ("0.5Gi", "512Mi")])
def test_normalise_quantity(text, out):
    assert webhook.normalise_quantity(text) == out


def test_requests_are_required():
    with pytest.raises(webhook.Denied, match="tflops-request"):
        webhook.mutate(pod({}), POOL, "w")
    shared = webhook.mutate(pod({"tensor-fusion.ai/isolation": "shared",
                                 "tensor-fusion.ai/gpu-count": "1"}), POOL, "w")
    assert shared["metadata"]["annotations"]["tensor-fusion.ai/isolation"] == "shared"


def test_inject_container_required_with_two_containers():
    two = [{"name": "a", "image": "x"}, {"name": "b", "image": "x"}]
    with pytest.raises(webhook.Denied, match="inject-container"):
        webhook.mutate(pod({"tensor-fusion.ai/tflops-request": "1"}, two), POOL, "w")
    out = webhook.mutate(pod({"tensor-fusion.ai/tflops-request": "1",
                              "tensor-fusion.ai/inject-container": "b"}, two), POOL, "w")
    envs = {c["name"]: c.get("env") for c in out["spec"]["containers"]}
    assert envs["a"] is None and any(e["name"] == "HYPERVISOR_PORT" for e in envs["b"])


def test_local_soft_injection():
    out = webhook.mutate(pod({"tensor-fusion.ai/vram-request": "2048Mi"}), POOL, "wl", "mw:1")
    meta, spec = out["metadata"], out["spec"]
    assert meta["labels"]["tensor-fusion.ai/pod-template-hash"] == hashes.client_hash(POOL["spec"])
    assert meta["labels"]["tensor-fusion.ai/component"] == "worker"
    assert meta["annotations"]["tensor-fusion.ai/vram-limit"] == "2Gi"
    assert "tensor-fusion.ai/tflops-request" not in meta["annotations"]   # only non-zero ones
    ctr = spec["containers"][0]
    assert ctr["resources"] == {"limits": {"cpu": "1"}, "requests": {}}
    env = {e["name"]: e for e in ctr["env"]}
    assert env["HYPERVISOR_PORT"]["value"] == "8000"
    assert env["LD_PRELOAD"]["value"].endswith("libcuda_limiter.so")
    assert spec["initContainers"] == [{"name": "init-soft-limiter", "image": "mw:1"}]


def test_go_struct_drops_zero_values_but_not_raw_extensions():
    spec = {"nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": 0,
                                                                  "autoUpdateWorker": False}},
            "componentConfig": {"hypervisor": {"podTemplate": {"x": 0, "y": False}}}}
    assert controllers.go_struct(spec) == {
        "componentConfig": {"hypervisor": {"podTemplate": {"x": 0, "y": False}}}}


def test_node_selector_matching():
    sel = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]}]}
    assert controllers.selector_matches(sel, {"nvidia.com/gpu.present": "true"})
    assert not controllers.selector_matches(sel, {})
    assert not controllers.selector_matches({}, {"nvidia.com/gpu.present": "true"})


def test_knobs_parse_and_default():
    k = Knobs()
    assert (k.gap_floor, k.pending_recheck, k.stale_status_seconds) == (3.0, 3.0, 0.0)
    k.update({"batchGapFloorSeconds": "0.5", "slowNodes": "a=2, *=1,bad", "staleStatusSeconds": "x"})
    assert k.gap_floor == 0.5 and k.stale_status_seconds == 0.0
    assert k.slow_node_delay("a") == 2.0 and k.slow_node_delay("b") == 1.0
