"""Health gates' decisions without a cluster: settings, the hold, the picture and what fails it."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import gates
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput


def gpu(name, node, phase="Running", message=""):
    return {"metadata": {"name": name, "labels": {"tensor-fusion.ai/managed-by": node}},
            "status": {"phase": phase, "message": message}}


def pod(name, node, ready=True, restarts=0, uid=None, ns="tensor-fusion-sys", image="hv:new"):
    return {"metadata": {"name": name, "namespace": ns, "uid": uid or name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": image}]},
            "status": {"phase": "Running",
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       "containerStatuses": [{"restartCount": restarts}]}}


def event(kind, name, reason="BackOff", namespace=None):
    return {"involvedObject": {"kind": kind, "name": name, "namespace": namespace},
            "reason": reason, "message": "m"}


def spec(**over):
    return gates.normalize(dict({"bake_seconds": 10}, **over))


def healthy(nodes=("n1", "n2")):
    return dict(gpus=[gpu("%s-gpu-0" % n, n) for n in nodes],
                hvs=[pod("hypervisor-%s" % n, n) for n in nodes],
                tf=[pod("app-%s" % n, n, ns="apps") for n in nodes], events=[])


def pic(nodes=("n1", "n2"), gpus=None, hvs=None, tf=None, events=None, baseline=None):
    base = healthy(nodes)
    return gates.picture(list(nodes), base["gpus"] if gpus is None else gpus,
                         base["hvs"] if hvs is None else hvs, base["tf"] if tf is None else tf,
                         events or [], baseline or {})


def test_no_gates_is_none_and_defaults_fill_in():
    assert gates.normalize(None) is None and gates.normalize({}) is None
    s = gates.normalize({"bake_seconds": 5})
    assert s["gpu_phase"] and s["hypervisor_ready"] and s["max_warning_events"] == 0


@pytest.mark.parametrize("bad,words", [
    ({"bake_seconds": 0}, "bake_seconds"), ({"max_warning_events": -1}, "max_warning_events"),
    ({"rules": [{"code": "X", "expression": "nodes[?"}]}, "not a JMESPath"),
    ({"rules": [{"code": "X"}]}, "code and an expression"),
    ({"http": [{"url": "ftp://x"}]}, "http:// or https://"),
    ({"prometheus": [{"url": "http://p", "query": "up"}]}, "max or a min")])
def test_bad_settings_are_refused(bad, words):
    with pytest.raises(InvalidInput, match=words):
        gates.normalize(dict({"bake_seconds": 10}, **bad))


def test_hold_is_bake_plus_margin_unless_the_interval_is_longer():
    assert gates.hold_seconds(1, 30) == 30 + gates.HOLD_MARGIN_SECONDS
    assert gates.hold_seconds(120, 30) == 120


def test_healthy_batch_passes_during_and_at_the_end():
    assert gates.failures(pic(), spec(), final=False) == []
    assert gates.failures(pic(), spec(), final=True) == []


def test_a_gpu_that_breaks_fails_at_once_with_its_message():
    base = healthy()
    base["gpus"][1] = gpu("n2-gpu-0", "n2", "Unknown", "GPU lost")
    found = gates.failures(pic(gpus=base["gpus"]), spec(), final=False)
    assert [(f["check"], f["node"]) for f in found] == [("gpu_phase", "n2")]
    assert "Unknown: GPU lost" in found[0]["evidence"]


def test_a_gpu_still_pending_fails_only_at_the_end():
    base = healthy()
    base["gpus"][0] = gpu("n1-gpu-0", "n1", "Pending")
    assert gates.failures(pic(gpus=base["gpus"]), spec(), final=False) == []
    assert [f["check"] for f in gates.failures(pic(gpus=base["gpus"]), spec(), final=True)] == ["gpu_phase"]
    assert gates.failures(pic(gpus=base["gpus"]), spec(gpu_phase=False), final=True) == []


def test_hypervisor_not_ready_or_missing_at_the_end():
    base = healthy()
    hvs = [pod("hypervisor-n1", "n1", ready=False)]
    found = gates.failures(pic(hvs=hvs), spec(), final=True)
    assert sorted((f["node"], f["evidence"]) for f in found) == [
        ("n1", "hypervisor Pod hypervisor-n1 is not Ready"), ("n2", "hypervisor Pod is missing")]
    assert gates.failures(pic(hvs=hvs), spec(), final=False) == []
    assert base  # the healthy picture is left as it was


def test_restarts_count_from_the_start_of_the_bake():
    hvs = [pod("hypervisor-n1", "n1", restarts=3, uid="u1"), pod("hypervisor-n2", "n2")]
    assert gates.failures(pic(hvs=hvs, baseline={"u1": 3}), spec(), final=False) == []
    found = gates.failures(pic(hvs=hvs, baseline={"u1": 2}), spec(), final=False)
    assert [(f["check"], f["node"]) for f in found] == [("hypervisor_restarts", "n1")]
    assert gates.failures(pic(hvs=hvs, baseline={"u1": 2}), spec(max_hypervisor_restarts=1), final=False) == []


def test_workload_pods_on_the_nodes_must_be_ready_at_the_end():
    tf = [pod("app-n1", "n1", ns="apps", ready=False), pod("elsewhere", "n9", ns="apps", ready=False)]
    found = gates.failures(pic(tf=tf), spec(), final=True)
    assert [(f["check"], f["node"]) for f in found] == [("workloads_ready", "n1")]
    assert "apps/app-n1" in found[0]["evidence"]


def test_warning_events_are_attributed_to_their_node_and_can_be_ignored():
    events = [event("GPU", "n1-gpu-0"), event("Pod", "hypervisor-n2", namespace="tensor-fusion-sys"),
              event("Pod", "app-n2", "FailedScheduling", namespace="apps"), event("Node", "n9")]
    found = gates.failures(pic(events=events), spec(), final=False)
    assert sorted(f["node"] for f in found) == ["n1", "n2"]
    assert "2 Warning Events" in [f for f in found if f["node"] == "n2"][0]["evidence"]
    found = gates.failures(pic(events=events), spec(ignore_event_reasons=["FailedScheduling"],
                                                    max_warning_events=1), final=False)
    assert found == []


def test_blocking_user_rules_fail_the_gate_and_others_do_not():
    base = healthy()
    base["gpus"][0] = gpu("n1-gpu-0", "n1", "Running", "ECC errors")
    rules = [{"code": "GPU_MESSAGE", "expression": "nodes[?gpus[?message != '']]"},
             {"code": "NOTE", "expression": "nodes", "severity": "warning"}]
    found = gates.failures(pic(gpus=base["gpus"]), spec(rules=rules), final=False)
    assert [(f["check"], f["node"]) for f in found] == [("rule:GPU_MESSAGE", "n1")]


@pytest.mark.parametrize("body,ok", [
    ({"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "0"]}]}}, True),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "3"]}]}}, False),
    ({"status": "success", "data": {"resultType": "vector", "result": []}}, False),
    ({"status": "success", "data": {"resultType": "scalar", "result": [1, "0.5"]}}, True),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"value": [1, "NaN"]}]}}, False),
    ({"status": "error", "error": "bad query"}, False)])
def test_prometheus_verdict(body, ok):
    assert gates.prometheus_verdict({"query": "q", "max": 1}, body)[0] is ok


def test_status_codes():
    assert gates.status_ok({}, 204) and not gates.status_ok({}, 500)
    assert gates.status_ok({"status_codes": [500]}, 500) and not gates.status_ok({"status_codes": [500]}, 200)
