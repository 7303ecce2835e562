"""Health gates between batches, on the session lab (10 GPU nodes, batches of 20 %): a hypervisor
whose GPUs break once it is Ready stops at the first batch with the other nodes untouched, a
healthy image passes every gate (and the pool keeps its own batchInterval), and an HTTP check
that answers 500 stops the rollout too."""
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from kubernetes import client

from lab import tensorfusion as tf

from .helpers import NS, gpupool, tfc
from .test_gpupool_rollout import HV, hv, rollout


def hypervisors(api_client):
    """{node: (Pod uid, image)} of the live hypervisor Pods."""
    pods = client.CoreV1Api(api_client).list_namespaced_pod(
        NS, label_selector="tensor-fusion.ai/component=hypervisor").items
    return {p.spec.node_name: (p.metadata.uid, p.spec.containers[0].image)
            for p in pods if p.metadata.deletion_timestamp is None}


def policy(api_client):
    return tfc(api_client)["spec"]["gpuPools"][0]["specTemplate"]["nodeManagerConfig"][
        "nodePoolRollingUpdatePolicy"]


@pytest.fixture
def healthy_again(lab, api_client):
    """Afterwards: no fault knob, and the pool on a good image, rolled by the module itself."""
    yield
    tf.set_knobs(api_client, failGpuImages=None)
    run, res = rollout(lab, **hv("gates-restored", pct=50))
    assert run.rc == 0, res.get("msg")


def stopped_after_the_first_batch(api_client, before, image):
    now = hypervisors(api_client)
    rolled = sorted(n for n, (uid, img) in now.items() if img == image)
    untouched = sorted(n for n, (uid, _img) in now.items() if before.get(n, (None,))[0] == uid)
    return rolled, untouched


def test_gpus_that_break_after_ready_stop_the_rollout_at_the_first_batch(lab, api_client, healthy_again):
    tf.set_knobs(api_client, failGpuImages=":gates-gpu-broken$")
    before = hypervisors(api_client)
    interval = policy(api_client).get("batchInterval")
    run, res = rollout(lab, gates={"bake_seconds": 4}, **hv("gates-gpu-broken"))
    assert run.rc != 0
    assert res["error"] == "GateFailed" and res["changed"] is True, res.get("msg")
    assert "batch 1" in res["msg"] and "gpu_phase" in res["msg"] and "Unknown" in res["msg"]
    gate, = res["gates"]
    assert not gate["passed"] and {f["check"] for f in gate["failures"]} == {"gpu_phase"}
    assert sorted(f["node"] for f in gate["failures"]) == sorted(gate["nodes"]) and len(gate["nodes"]) == 2
    assert res["gate_paused"] == ["hypervisor"] and "paused" not in res
    assert policy(api_client)["autoUpdateHypervisor"] is False
    # The hold (bake + 5 s) is over well before this: nothing else rolls, the pool stays paused.
    time.sleep(12)
    rolled, untouched = stopped_after_the_first_batch(api_client, before, f"{HV}:gates-gpu-broken")
    assert rolled == sorted(gate["nodes"])
    assert len(untouched) == lab["nodes"] - 2 and not set(untouched) & set(rolled)
    assert policy(api_client).get("batchInterval") == interval, "paused, the pool needs no hold"


def test_a_healthy_image_passes_every_gate_and_the_pool_keeps_its_interval(lab, api_client):
    before = policy(api_client).get("batchInterval")
    run, res = rollout(lab, gates={"bake_seconds": 3}, **hv("gates-healthy", pct=50))
    assert run.rc == 0, res.get("msg")
    assert [g["passed"] for g in res["gates"]] == [True, True]
    assert sorted(n for g in res["gates"] for n in g["nodes"]) == sorted(hypervisors(api_client))
    assert all(img == f"{HV}:gates-healthy" for _uid, img in hypervisors(api_client).values())
    assert policy(api_client).get("batchInterval") == before
    # The second batch started only after the first one's bake: its gate comes before 100 %.
    kinds = [("gate" if e.get("gate") else e["progress"]) for e in res["timeline"]]
    assert kinds.index("gate") < kinds.index(100), kinds
    assert res["schedule"]["gate_seconds"] > 0 and res["schedule"]["gate_bake_seconds"] == 3
    assert gpupool(api_client)["status"]["componentStatus"]["hypervisorConfigSynced"] is True
    run, res = rollout(lab, gates={"bake_seconds": 3}, **hv("gates-healthy", pct=50))
    assert run.rc == 0 and res["changed"] is False and res["gates"] is None


class _Answers500(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the name http.server calls
        self.send_response(500)
        self.end_headers()
        self.wfile.write(b"broken")

    def log_message(self, *_args):
        pass


def test_an_http_check_that_answers_500_stops_the_rollout(lab, api_client, healthy_again):
    server = HTTPServer(("127.0.0.1", 0), _Answers500)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/healthz" % server.server_port
    before = hypervisors(api_client)
    try:
        run, res = rollout(lab, gates={"bake_seconds": 2, "http": [{"url": url}]}, **hv("gates-http"))
    finally:
        server.shutdown()
    assert run.rc != 0 and res["error"] == "GateFailed", res.get("msg")
    gate, = res["gates"]
    assert [f["check"] for f in gate["failures"]] == ["http"]
    assert "answered 500" in gate["failures"][0]["evidence"] and url in res["msg"]
    rolled, untouched = stopped_after_the_first_batch(api_client, before, f"{HV}:gates-http")
    assert len(rolled) == 2 and len(untouched) == lab["nodes"] - 2


@pytest.mark.parametrize("gates,words", [
    ({"bake_seconds": 0}, "bake_seconds must be a positive"),
    ({"rules": [{"code": "X", "expression": "nodes[?"}]}, "not a JMESPath expression"),
    ({"http": [{"url": "ftp://example"}]}, "http:// or https://")])
def test_bad_gates_change_nothing(lab, api_client, gates, words):
    rv = tfc(api_client)["metadata"]["resourceVersion"]
    generation = gpupool(api_client)["metadata"]["generation"]
    run, res = rollout(lab, gates=gates, **hv("gates-never"))
    assert run.rc != 0 and words in res["msg"], res.get("msg")
    assert tfc(api_client)["metadata"]["resourceVersion"] == rv
    assert gpupool(api_client)["metadata"]["generation"] == generation
