"""report/render.py (with report/record.py's record): what the run report draws and says."""


def test_the_report_keeps_gates_and_draws_their_bake():
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import record
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render
    gate = {"batch": 1, "nodes": ["n1", "n2"], "passed": False, "seconds": 4.0,
            "failures": [{"check": "gpu_phase", "node": "n1", "evidence": "GPU n1-gpu-0 is Unknown"}]}
    result = {"pool": "shared", "gpupool": "tf-shared", "failed": True, "waited_for": ["hypervisor"],
              "gates": [gate], "gate_paused": ["hypervisor"], "timeline": [
                  {"time": "2026-12-03T02:00:00.000000Z", "component": "hypervisor", "progress": 20, "synced": False},
                  {"time": "2026-12-03T02:00:05.000000Z", "component": "hypervisor", "progress": 20, "synced": False,
                   "gate": gate}]}
    pool, = record.pool_progress([result])
    assert pool["gates"] == [gate] and pool["paused"] == ["hypervisor"]
    assert pool["timeline"][1]["gate"] == gate and pool["timeline"][1]["seconds"] == 5.0
    svg = report_render.svg_timeline(pool)
    assert 'fill="#d62728" opacity="0.2"' in svg and "FAILED after 4.0s of bake" in svg
    assert report_render.gate_text(gate).startswith("batch 1 (n1, n2): FAILED")
