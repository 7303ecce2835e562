"""The benchmarks' own parsing: the API server's request counter, the operator double's status
writes, and the merged rollout time (bench/ is never run by the test suite)."""
from bench import apimetrics, oplog
from bench.runbook import rollout_seconds

METRICS = """# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="tensor-fusion.ai",resource="gpupools",scope="resource",subresource="",verb="GET",version="v1"} 7
apiserver_request_total{code="404",component="apiserver",dry_run="",group="tensor-fusion.ai",resource="gpupools",scope="resource",subresource="",verb="GET",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="",subresource="",verb="GET",version=""} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="status",verb="PATCH",version="v1"} 1.2e+03
apiserver_request_total{code="200",component="apiserver",dry_run="",group="tensor-fusion.ai",resource="tensorfusionclusters",scope="resource",subresource="",verb="PATCH",version="v1"} 2
apiserver_request_total{code="200",component="apiserver",dry_run="",group="tensor-fusion.ai",resource="tensorfusionclusters",scope="resource",subresource="status",verb="PATCH",version="v1"} 9
apiserver_request_duration_seconds_bucket{verb="GET",le="0.1"} 99
"""


def test_parse_sums_codes_and_reads_exponents():
    counts = apimetrics.parse(METRICS)
    assert counts[("GET", "tensor-fusion.ai", "gpupools", "")] == 8
    assert counts[("PATCH", "", "pods", "status")] == 1200
    assert counts[("GET", "", "", "")] == 4
    assert len(counts) == 5  # other metric families are ignored


def test_delta_takes_off_the_first_scrape():
    before = apimetrics.parse(METRICS)
    after = before.copy()
    after[("GET", "", "", "")] += 3  # the first scrape's GET /metrics and two discovery GETs
    after[("WATCH", "tensor-fusion.ai", "gpupools", "")] += 1
    assert apimetrics.delta(before, after) == {("GET", "", "", ""): 2, ("WATCH", "tensor-fusion.ai", "gpupools", ""): 1}
    assert apimetrics.delta(before, before) == {}


def test_contender_requests_counts_reads_and_spec_writes_only():
    counts = apimetrics.parse(METRICS)
    # reads 8 + 4, the TFC spec PATCH 2; the status writes of the double and the kubelet are not ours
    assert apimetrics.contender_requests(counts) == 14
    assert apimetrics.by_verb(counts)["PATCH tensorfusionclusters/status"] == 9


LOG = """2026-11-29 18:23:20,100 INFO tf-operator pool tensor-fusion-shared hypervisor: batch 1
2026-11-29 18:23:20,200 INFO tf-operator status-write pool=tensor-fusion-shared component=hypervisor hash=bbbb progress=0 synced=false sent=100.000000 acked=100.010000
2026-11-29 18:23:22,200 INFO tf-operator status-write pool=tensor-fusion-shared component=hypervisor hash=bbbb progress=50 synced=false sent=102.000000 acked=102.010000
2026-11-29 18:23:24,200 INFO tf-operator status-write pool=tensor-fusion-shared component=hypervisor hash=bbbb progress=100 synced=true sent=104.000000 acked=104.020000
2026-11-29 18:23:24,300 INFO tf-operator status-write pool=tensor-fusion-other component=hypervisor hash=cccc progress=0 synced=false sent=103.000000 acked=103.010000
2026-11-29 18:23:26,300 INFO tf-operator status-write pool=tensor-fusion-other component=hypervisor hash=cccc progress=100 synced=true sent=106.000000 acked=106.010000
"""


def test_status_writes_and_campaign():
    writes = oplog.status_writes(LOG)
    assert len(writes) == 5
    assert writes[2] == {"pool": "tensor-fusion-shared", "component": "hypervisor", "hash": "bbbb", "progress": 100,
                         "synced": True, "sent": 104.0, "acked": 104.02}
    first, final = oplog.campaign(writes, "tensor-fusion-shared", "hypervisor", "aaaa")
    assert (first["sent"], final["acked"]) == (100.0, 104.02)
    assert oplog.campaign(writes, "tensor-fusion-shared", "hypervisor", "bbbb") == (None, None)
    first, final = oplog.campaign(writes[:2], "tensor-fusion-shared", "hypervisor", "aaaa")
    assert first is not None and final is None  # still rolling


def test_rollout_seconds_merges_overlapping_campaigns():
    writes = oplog.status_writes(LOG)
    total, campaigns = rollout_seconds(writes, 0, 200)
    assert campaigns == 2
    assert abs(total - 6.01) < 1e-6  # 100.0 .. 106.01, the two campaigns overlap
    assert rollout_seconds(writes, 105, 200) == (0.0, 0)


def test_allowed_requests_leave_out_the_labs_own_readers():
    counts = apimetrics.parse(METRICS)
    counts[("GET", "", "pods", "")] += 50  # the kubelet stand-in reading its Pods
    counts[("LIST", "", "pods", "")] += 2
    counts[("LIST", "batch", "cronjobs", "")] += 3  # the controller manager
    # discovery 4 + LIST pods 2; the GPUPool GETs are not the precheck's, the cron jobs not anyone's
    assert apimetrics.contender_requests(counts, apimetrics.PRECHECK) == 6
    # a rollout: discovery 4, GPUPool GETs 8, the TensorFusionCluster spec PATCH 2, LIST pods 2
    assert apimetrics.contender_requests(counts, apimetrics.ROLLOUT) == 16


def test_from_by_verb_round_trips():
    counts = apimetrics.parse(METRICS)
    again = apimetrics.from_by_verb(apimetrics.by_verb(counts))
    assert apimetrics.contender_requests(again, apimetrics.ROLLOUT) == apimetrics.contender_requests(
        counts, apimetrics.ROLLOUT)
    assert again[("PATCH", "", "tensorfusionclusters", "status")] == 9


def test_fleet_interpreter_wrapper_records_its_childs_cpu_and_exit_code(tmp_path):
    import json
    import subprocess
    import sys
    from bench import fleet
    log = tmp_path / "modules.jsonl"
    wrapper = tmp_path / "python"
    wrapper.write_text(fleet.WRAPPER.format(python=sys.executable, log=str(log)))
    wrapper.chmod(0o700)
    script = tmp_path / "AnsiballZ_x.py"
    script.write_text("import sys\nsum(range(2000000))\nprint('out')\nsys.exit(3)\n")
    done = subprocess.run([str(wrapper), str(script)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (3, "out\n")
    entry, = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["module"] == "AnsiballZ_x.py" and entry["cpu"] > 0 and entry["start"] <= entry["end"]


def test_fleet_reports_reads_each_hosts_statuses_written_since(tmp_path):
    import json
    import os
    from bench import fleet
    for name, status, mtime in (("upgrade-cluster-1-20261203T010000Z", "succeeded", 100),
                                ("upgrade-cluster-1-20261203T020000Z", "rolled_back", 300),
                                ("upgrade-cluster-2-20261203T020000Z", "failed", 300)):
        (tmp_path / name).mkdir()
        path = tmp_path / name / "report.json"
        path.write_text(json.dumps({"status": status}))
        os.utime(path, (mtime, mtime))
    assert fleet._reports(tmp_path, "cluster-1", since=200) == ["rolled_back"]
    assert fleet._reports(tmp_path, "cluster-3", since=0) == []


def test_fleet_profile_sums_tasks_by_action_and_module_cpu_by_module():
    from bench import fleet
    tasks = [{"action": "set_fact", "start": 10.0, "end": 10.5}, {"action": "set_fact", "start": 11.0, "end": 11.25},
             {"action": "tensorfusion.ops.run_report", "start": 12.0, "end": 14.0},
             {"action": "tensorfusion.ops.run_report", "start": 15.0, "end": None}]
    # Two piped modules (no file name: the task they ran in names them), one by its file's name.
    modules = [{"module": "-", "start": 12.5, "end": 13.0, "cpu": 0.75},
               {"module": "AnsiballZ_run_report.py", "cpu": 0.5},
               {"module": "-", "start": 30.0, "end": 31.0, "cpu": 0.25},
               {"module": "AnsiballZ_maintenance_lock.py", "cpu": 1.0}]
    prof = fleet.profile(tasks, modules)
    assert prof["actions"] == {"set_fact": {"tasks": 2, "seconds": 0.75},
                               "tensorfusion.ops.run_report": {"tasks": 2, "seconds": 2.0}}
    assert prof["modules"] == {"run_report": {"runs": 2, "cpu_seconds": 1.25}, "-": {"runs": 1, "cpu_seconds": 0.25},
                               "maintenance_lock": {"runs": 1, "cpu_seconds": 1.0}}
    text = fleet.render_profile({"name": "single-noop", "clusters": {"cluster-0": {"profile": prof}}})
    assert text.index("tensorfusion.ops.run_report") < text.index("set_fact")
    assert text.index("run_report ") < text.index("maintenance_lock")


def test_processes_cpu_seconds_counts_a_busy_child_and_nothing_for_a_gone_pid():
    import subprocess
    import sys
    import time

    from bench.proc import processes_cpu_seconds
    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.3: pass\ntime.sleep(30)"])
    try:
        deadline = time.monotonic() + 20
        while processes_cpu_seconds([child.pid]) < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_cpu_seconds([child.pid]) >= 0.25
    finally:
        child.kill()
        child.wait()
    assert processes_cpu_seconds([child.pid]) == 0.0


def test_the_operators_table_gives_each_double_timing_and_why_upstream_is_empty():
    from bench.runbook import UPSTREAM_SKIPPED, render_operators
    report = {"nodes": 10, "batch_percentage": 20, "batch_interval": "1s", "operators": [
        {"operator": "double, upstream's batch timing (floor 0)", "runs": [{}, {}], "seconds": 40.0,
         "rollout_seconds": 10.0, "overhead_seconds": 30.0, "ratio": 4.0},
        {"operator": "upstream", "blocked": UPSTREAM_SKIPPED}]}
    text = render_operators(report)
    assert "40.00" in text and "10.00" in text and "4.00" in text and "median of 2" in text
    assert "upstream: not measured: TFOPS_OPERATOR_BINARY" in text


def test_a_watched_pool_s_status_changes_are_writes_as_the_double_logs_them():
    """bench/poolwatch.py records a component's (hash, progress, synced) changes only."""
    from bench import oplog
    from bench.poolwatch import PoolStatusRecorder
    recorder = PoolStatusRecorder.__new__(PoolStatusRecorder)
    recorder.writes, recorder.last = [], {}

    def pool(hash_, progress, synced):
        return {"metadata": {"name": "p"}, "status": {"componentStatus": {
            "hypervisor": hash_, "hypervisorUpdateProgress": progress, "hypervisorConfigSynced": synced}}}
    for state in (("a", 100, True), ("a", 100, True), ("b", 0, False), ("b", 50, False), ("b", 100, True)):
        recorder._record(pool(*state))  # pylint: disable=protected-access
    mine = [w for w in recorder.status_writes() if w["component"] == "hypervisor"]
    assert [(w["hash"], w["progress"], w["synced"]) for w in mine] == [
        ("a", 100, True), ("b", 0, False), ("b", 50, False), ("b", 100, True)]
    first, final = oplog.campaign(recorder.status_writes(), "p", "hypervisor", "a")
    assert first["hash"] == "b" and final["progress"] == 100
