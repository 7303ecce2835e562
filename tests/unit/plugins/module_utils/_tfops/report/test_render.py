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


def test_a_rollback_that_first_recovered_a_pending_release_says_so():
    """#45: a release left pending-upgrade by a helm write cut off is brought back to its last
    deployed revision before the rollback; the report's line (Markdown and HTML) says so."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render
    rollback = {"chart_version_before": "1.8.7", "chart_version": "1.8.6", "revision_before": 7,
                "revision_after": 8, "target_revision": 5, "method": "rollback",
                "recovered": {"from_status": "pending-upgrade", "from_revision": 6, "to_revision": 5}}
    line = report_render.rollback_line(rollback)
    assert line.startswith("the release was stuck pending-upgrade at revision 6 (a helm write cut off): "
                           "rolled back to its last deployed revision 5 first; then chart 1.8.7 -> 1.8.6")
    assert "stuck" not in report_render.rollback_line(dict(rollback, recovered=None))


def test_the_version_table_says_what_runs_not_only_what_was_written():
    """#45 item 5: worker and client images a chart wrote with autoUpdate off are not "after" in
    the sense of running: the table says so; a component still rolling says how far."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import record
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render
    info = {"data": {"pools": [{"name": "tf-shared", "images": {"hypervisor": "hv:2", "worker": "w:2", "client": "c:2"},
                                "components": {"hypervisor": {"synced": True, "auto_update": True, "progress": 100},
                                               "worker": {"synced": False, "auto_update": False, "progress": 0},
                                               "client": {"synced": False, "auto_update": True, "progress": 40}}}]}}
    after = {"chart_version": "1.8.7", "pools": record.pool_versions(info), "not_running": record.pool_running(info)}
    rows = dict((r[0], r[2]) for r in report_render._versions_rows({"versions": {"before": {}, "after": after}}))  # pylint: disable=protected-access
    assert rows["tf-shared hypervisor"] == "hv:2"
    assert rows["tf-shared worker"] == "w:2 (not rolled: autoUpdate off, only new Pods get it)"
    assert rows["tf-shared client"] == "c:2 (rolling, 40%)"
