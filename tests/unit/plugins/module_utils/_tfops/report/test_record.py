"""The run record: step times and status, the outcome, versions, pool timelines, the rendering
(self-contained HTML with SVG, Markdown) and the files' permissions; no secret survives."""
import json
import os
import stat

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import record
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout

from ..gpupool.test_release_changes import HV  # helpers shared with that file

T0 = "2026-11-29T02:00:00Z"


def marks(*names, step=10):
    return [{"step": n, "at": "2026-11-29T02:%02d:%02dZ" % divmod(i * step, 60)} for i, n in enumerate(names)]


def info(images, findings=()):
    return {"api_server": "https://k8s:6443", "findings": list(findings),
            "data": {"pools": [{"name": "tensor-fusion-shared", "images": images}]}}


def pool_result(progress_events, changed=True, failed=False, paused=None):
    r = {"changed": changed, "pool": "shared", "gpupool": "tensor-fusion-shared", "cluster": "tensor-fusion",
         "changed_components": ["hypervisor"] if changed else [], "waited_for": ["hypervisor"],
         "components": {"hypervisor": {"before_hash": "a", "after_hash": "b", "progress": progress_events[-1][1],
                                       "synced": progress_events[-1][1] == 100},
                        "worker": {"before_hash": "w", "after_hash": "w", "progress": 100, "synced": True}},
         "timeline": [{"time": t, "component": "hypervisor", "progress": p, "synced": p == 100}
                      for t, p in progress_events],
         "nodes": {"total": 10, "updated": 2, "stuck": 0}}
    if failed:
        r.update(failed=True, msg="deadline reached", paused=paused)
    return r


def upgrade_params(**over):
    params = {"playbook": "upgrade", "host": "lab", "started": T0,
              "steps": marks("lock", "window", "precheck", "snapshot", "upgrade", "pools", "verify"),
              "results": {"lock": {"changed": True}, "precheck": info({"hypervisor": "hv:1"}),
                          "snapshot": {"changed": True, "bundle": "/s/b1", "meta": {
                              "revision": 1, "chart": "tensor-fusion", "chart_version": "1.8.6",
                              "app_version": "2.16.0"}},
                          "upgrade": {"changed": True, "chart": "tensor-fusion", "chart_version": "1.8.7",
                                      "app_version": "2.17.0", "revision_after": 2,
                                      "diff": [{"after": {"password": "hunter2"}}]},
                          "pools": [pool_result([("2026-11-29T02:00:51Z", 20)]),
                                    pool_result([("2026-11-29T02:00:55Z", 40), ("2026-11-29T02:01:00Z", 100)],
                                                changed=False)],
                          "verify": info({"hypervisor": "hv:2"})},
              "snapshot": {"changed": True, "bundle": "/s/b1", "meta": {"revision": 1, "chart_version": "1.8.6"}}}
    params.update(over)
    return params


def test_steps_end_when_the_next_begins_and_carry_their_status():
    steps = record.build_steps(marks("lock", "upgrade"), {"upgrade": {"changed": True}}, "2026-11-29T02:00:25Z")
    assert [(s["name"], s["seconds"], s["status"]) for s in steps] == [("lock", 10.0, "ok"), ("upgrade", 15.0, "changed")]


def test_a_step_without_a_time_is_refused():
    with pytest.raises(InvalidInput):
        record.build_steps([{"step": "lock"}], {}, T0)


@pytest.mark.parametrize("results,expected", [
    (None, "ok"), ({"skipped": True}, "skipped"), ([{"changed": False}, {"changed": True}], "changed"),
    ([{"changed": True}, {"failed": True}], "failed")])
def test_step_status(results, expected):
    assert record.step_status(results) == expected


def test_an_upgrade_that_changed_things_succeeded_with_versions_before_and_after():
    rec = record.build_record(upgrade_params(), "2026-11-29T02:01:30Z")
    assert rec["status"] == "succeeded" and rec["changed"] and not rec["failed"]
    assert rec["versions"]["before"]["chart_version"] == "1.8.6"
    assert rec["versions"]["after"]["chart_version"] == "1.8.7" and rec["versions"]["after"]["revision"] == 2
    assert rec["versions"]["before"]["pools"] == {"tensor-fusion-shared": {"hypervisor": "hv:1"}}
    assert rec["versions"]["after"]["pools"] == {"tensor-fusion-shared": {"hypervisor": "hv:2"}}
    assert rec["snapshot"] == {"path": "/s/b1", "revision": 1, "chart_version": "1.8.6"}
    pool, = rec["pools"]
    assert [e["seconds"] for e in pool["timeline"]] == [0.0, 4.0, 9.0]
    assert list(pool["components"]) == ["hypervisor"]
    assert "hunter2" not in json.dumps(rec)


def test_bookkeeping_changes_alone_are_unchanged():
    params = upgrade_params()
    params["results"].update(upgrade={"changed": False, "chart_version": "1.8.7", "revision_after": 2},
                             pools=[pool_result([("2026-11-29T02:00:51Z", 100)], changed=False)])
    params["results"]["pools"][0]["changed"] = False
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["status"] == "unchanged" and not rec["changed"]


def test_outcomes_of_failures():
    paused = upgrade_params(error={"step": "pools", "task": "roll", "msg": "deadline"})
    paused["results"]["pools"] = [pool_result([("2026-11-29T02:00:51Z", 20)], failed=True, paused=["hypervisor"])]
    failed = {"failed": True, "msg": "deadline", "paused": ["hypervisor"], "task_pool": "shared",
              "timeline": [{"time": "2026-11-29T02:00:58Z", "component": "hypervisor", "progress": 30}]}
    paused["results"]["pools"] = [pool_result([("2026-11-29T02:00:51Z", 20)], changed=True), failed]
    paused["results"]["pools"][0]["invocation"] = {"module_args": {"pool": "shared"}}
    rec = record.build_record(paused, "2026-11-29T02:01:30Z")
    assert rec["status"] == "resumable" and rec["resumable"] and rec["failed"]
    pool, = rec["pools"]  # the failed call belongs to the same pool, its timeline too
    assert pool["gpupool"] == "tensor-fusion-shared" and pool["paused"] == ["hypervisor"]
    assert [e["progress"] for e in pool["timeline"]] == [20, 30]
    assert rec["paused_pools"] == ["shared"]

    rolled = upgrade_params(error={"step": "verify", "task": "assert", "msg": "unhealthy"})
    rolled["steps"] = rolled["steps"] + marks("rollback", "verify_after_rollback")[:0] + [
        {"step": "rollback", "at": "2026-11-29T02:01:20Z"}, {"step": "verify_after_rollback", "at": "2026-11-29T02:01:25Z"}]
    rolled["results"]["rollback"] = {"changed": True, "chart_version": "1.8.6", "revision_after": 3,
                                     "target_revision": 1, "method": "rollback"}
    rolled["results"]["verify_after_rollback"] = info({"hypervisor": "hv:1"})
    rec = record.build_record(rolled, "2026-11-29T02:01:30Z")
    assert rec["status"] == "rolled_back" and rec["rollback"]["ok"]
    assert rec["versions"]["after"]["chart_version"] == "1.8.6"
    assert [s["status"] for s in rec["steps"] if s["name"] == "verify"] == ["failed"]

    rolled["results"]["rollback"] = {"failed": True, "msg": "helm said no"}
    assert record.build_record(rolled, "2026-11-29T02:01:30Z")["status"] == "rollback_failed"

    early = upgrade_params(steps=marks("lock", "window", "precheck"),
                           error={"step": "precheck", "task": "assert", "msg": "blocking"})
    early["results"] = {"precheck": info({"hypervisor": "hv:1"})}
    rec = record.build_record(early, "2026-11-29T02:01:30Z")
    assert rec["status"] == "failed" and rec["error"]["msg"] == "blocking"


def test_html_is_self_contained_with_one_svg_per_pool(tmp_path):
    rec = record.build_record(upgrade_params(), "2026-11-29T02:01:30Z")
    html = report_render.render_html(rec)
    assert html.count("<svg") == 1 and "<polyline" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "https://" not in html.replace("https://k8s:6443", "")
    assert "<script" not in html and "<link" not in html and "src=" not in html


def test_svg_escapes_names():
    svg = report_render.svg_timeline({"gpupool": "<x>", "timeline": [
        {"seconds": 0.0, "component": "hypervisor", "progress": 50, "time": "t"}]})
    assert "<x>" not in svg and "&lt;x&gt;" in svg


def test_markdown_summary():
    md = report_render.render_markdown(record.build_record(upgrade_params(), "2026-11-29T02:01:30Z"))
    assert md.startswith("# upgrade on lab: succeeded") and "chart 1.8.6 -> 1.8.7" in md
    assert "| pools | changed |" in md


def test_files_are_0600_in_a_0700_folder(tmp_path):
    rec = record.build_record(upgrade_params(), "2026-11-29T02:01:30Z")
    folder, files = report_render.write_report(str(tmp_path / "artifacts"), rec)
    assert os.path.basename(folder) == "upgrade-lab-20261129T020000Z"
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert [os.path.basename(f) for f in files] == ["report.html", "report.json", "report.md"]
    assert all(stat.S_IMODE(os.stat(f).st_mode) == 0o600 for f in files)
    assert json.loads(open(os.path.join(folder, "report.json")).read())["status"] == "succeeded"
    assert not [n for n in os.listdir(folder) if n.startswith(".tmp")]


def test_a_check_mode_run_is_a_plan_never_a_success():
    rec = record.build_record(upgrade_params(check_run=True), "2026-11-29T02:01:30Z")
    line = record.summary_line(rec)
    assert rec["check_mode"] and line.startswith("check mode, nothing written - plan of upgrade on lab: planned")
    assert rec["status"] == "planned" and not rec["failed"] and not rec["changed"]
    assert "verified" not in line and "succeeded" not in line
    assert rec["snapshot"] is None and rec["versions"]["after"] == {}


def test_the_summary_names_only_the_chart_versions_it_knows():
    def rec(before, after):
        return {"versions": {"before": {"chart_version": before}, "after": {"chart_version": after}},
                "status": "unchanged", "playbook": "precheck", "host": "lab", "seconds": 3, "paused_pools": []}
    assert record.summary_line(rec(None, None)) == "precheck on lab: nothing changed in 3s"
    assert record.summary_line(rec("1.8.7", "1.8.7")) == "precheck on lab: nothing changed (chart 1.8.7) in 3s"
    assert record.summary_line(rec("1.8.7", None)) == "precheck on lab: nothing changed (chart 1.8.7) in 3s"
    assert record.summary_line(rec("1.8.6", "1.8.7")).endswith("(chart 1.8.6 -> 1.8.7) in 3s")


def test_a_failed_step_that_wrote_makes_the_run_changed():
    """The resumable run and the failed one both changed the cluster: report.json says so."""
    params = upgrade_params(error={"step": "pools", "task": "roll", "msg": "no progress"})
    params["results"]["upgrade"] = {"changed": False, "chart_version": "1.8.7", "revision_after": 2}
    params["results"]["pools"] = [{"failed": True, "changed": True, "msg": "no progress", "task_pool": "shared"}]
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["status"] == "failed" and rec["changed"] is True
    assert [s["changed"] for s in rec["steps"] if s["name"] == "pools"] == [True]
    assert "failed after changing the cluster, not rolled back" in record.summary_line(rec)
    params["results"]["pools"][0]["changed"] = False
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["changed"] is False and "failed before any change" in record.summary_line(rec)


def test_warnings_are_kept_once_with_their_step():
    params = upgrade_params()
    outage = "the API server could not be used for 31s (9 failed requests, retried; last: refused)"
    params["results"]["pools"][0]["warnings"] = [outage]
    params["results"]["pools"][1]["warnings"] = [outage]
    params["results"]["lock"]["warnings"] = ["took over a stale lock"]
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["warnings"] == [{"step": "lock", "msg": "took over a stale lock"}, {"step": "pools", "msg": outage}]
    assert outage in report_render.render_html(rec) and outage in report_render.render_markdown(rec)


def test_the_lock_state_before_and_after_its_release():
    lease = {"name": "tensorfusion-ops-maintenance", "holder": "ops@bastion purpose=upgrade",
             "expires": "2026-11-29T03:00:00.000000Z"}
    params = upgrade_params()
    params["results"]["lock"] = {"changed": False, "lease": lease}
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["lock"] == {"held_by_this_run": True, "name": lease["name"], "holder": lease["holder"],
                           "released": False, "held_until": lease["expires"], "msg": "not released yet"}
    assert "stays held" not in record.summary_line(rec), "the report written before the release"
    params["results"]["unlock"] = {"failed": True, "msg": "cannot reach the API server"}
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["lock"]["released"] is False and rec["lock"]["msg"] == "cannot reach the API server"
    assert record.summary_line(rec).endswith(
        "; the maintenance lock stays held until 2026-11-29T03:00:00.000000Z (its release failed)")
    assert rec["status"] == "succeeded", "the change itself stands"
    # #45: with the lock's warden the lock does not stay held: the warden releases it once the
    # API server answers (the TTL is only the latest).
    params["results"]["lock"] = {"changed": False, "lease": lease, "warden": {"pid": 4711}}
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["lock"]["warden"] == 4711
    assert record.summary_line(rec).endswith(
        "; the maintenance lock's release failed: the run's lock warden (pid 4711) releases it as soon as "
        "the API server answers, and it expires at 2026-11-29T03:00:00.000000Z at the latest")
    params["results"]["lock"] = {"changed": False, "lease": lease}
    params["results"]["unlock"] = {"changed": False}
    assert record.build_record(params, "2026-11-29T02:01:30Z")["lock"]["released"] is True
    params["results"]["lock"] = {"failed": True, "msg": "held by someone else"}
    assert record.build_record(params, "2026-11-29T02:01:30Z")["lock"] == {"held_by_this_run": False}


def test_a_rollback_that_never_started_leaves_the_upgraded_release_and_says_why():
    params = upgrade_params(error={"step": "pools", "task": "roll", "msg": "unreachable",
                                   "failed_steps": ["pools", "rollback"],
                                   "step_errors": {"rollback": "the API server stayed unreachable for 60s"}})
    params["steps"] = params["steps"] + [{"step": "rollback", "at": "2026-11-29T02:01:20Z"}]
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["status"] == "rollback_failed" and rec["rollback"]["ok"] is False
    assert rec["rollback"]["msg"] == "the API server stayed unreachable for 60s"
    assert [s["msg"] for s in rec["steps"] if s["name"] == "rollback"] == ["the API server stayed unreachable for 60s"]
    assert rec["versions"]["after"]["chart_version"] == "1.8.7", "what is left: the upgraded release"


def test_a_rollback_that_refused_its_snapshot_is_a_failed_run_that_changed_nothing_more():
    """helm_release refuses a bundle before any write with refused=true and changed=false: the run
    is 'failed' (not 'rollback_failed'), its rollback step changed nothing, and a changed flag
    alone does not make a refusal (a rollback that wrote and then failed stays rollback_failed)."""
    params = upgrade_params(error={"step": "pools", "task": "roll", "msg": "stalled",
                                   "failed_steps": ["pools", "rollback"],
                                   "step_errors": {"rollback": "snapshot b is unusable, nothing restored"}})
    params["steps"] = params["steps"] + [{"step": "rollback", "at": "2026-11-29T02:01:20Z"}]
    msg = "snapshot b is unusable, nothing restored: the index's signature does not verify"
    params["results"]["rollback"] = {"failed": True, "changed": False, "refused": True,
                                     "error": "UnusableBundle", "msg": msg}
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["status"] == "failed" and rec["failed"]
    assert rec["rollback"] == {"ok": False, "refused": True, "target_revision": None, "method": None, "msg": msg}
    assert [s["changed"] for s in rec["steps"] if s["name"] == "rollback"] == [False]
    assert record.summary_line(rec).startswith(
        "upgrade on lab: failed after changing the cluster, not rolled back (the snapshot was refused before any write)")
    # The rollback runbook alone: nothing changed at all.
    alone = {"playbook": "rollback", "host": "lab", "started": T0, "steps": marks("lock", "window", "rollback"),
             "results": {"rollback": dict(params["results"]["rollback"])},
             "error": {"step": "rollback", "task": "Roll back", "msg": msg}}
    rec = record.build_record(alone, "2026-11-29T02:01:30Z")
    assert (rec["status"], rec["changed"]) == ("failed", False)
    assert "failed before any change (the snapshot was refused before any write)" in record.summary_line(rec)
    # Not a refusal: written, or no refused field (message text is never read).
    for rollback in ({"failed": True, "changed": True, "refused": True, "msg": msg},
                     {"failed": True, "changed": False, "msg": msg}):
        params["results"]["rollback"] = rollback
        assert record.build_record(params, "2026-11-29T02:01:30Z")["status"] == "rollback_failed"


def test_a_failed_rotation_lists_what_it_created_modified_and_put_back_in_every_rendering():
    failed = {"failed": True, "changed": True, "failed_step": "roll", "deleted": [],
              "secret": {"name": "db-1a2b", "keys": ["pw"], "digest": "sha256:x"},
              "steps": [{"step": "create", "status": "ok", "detail": "db-1a2b"},
                        {"step": "repoint", "status": "ok", "consumer": "Deployment ns/web", "changed": True},
                        {"step": "roll", "status": "failed", "consumer": "Deployment ns/web"},
                        {"step": "restore", "status": "ok", "detail": "Deployment ns/web points at db again"}]}
    rotation = record.rotation_summary(failed)
    assert rotation == {"secret": "db-1a2b", "failed_step": "roll", "created": ["db-1a2b"],
                        "modified": ["Deployment ns/web"], "put_back": ["Deployment ns/web points at db again"],
                        "not_put_back": [], "deleted": []}
    rotated = {"rotation": rotation}
    assert "<h2>Rotation of db-1a2b</h2>" in report_render.render_html(dict(_minimal_record(), **rotated))
    assert "Rotation of db-1a2b: created db-1a2b; modified Deployment ns/web; put back Deployment ns/web " \
           "points at db again" in report_render.render_markdown(dict(_minimal_record(), **rotated))
    assert record.rotation_summary(None) is None and record.rotation_summary({"skipped": True}) is None
    # #45 item 5: a rotation put back is headlined so; one that failed early still names its Secret
    headline = record.summary_line(dict(_minimal_record(), status="failed", changed=True, rotation=rotation))
    assert "the rotation put back what it had changed" in headline and "not rolled back" not in headline
    left = dict(rotation, not_put_back=["Deployment ns/api"])
    assert "not rolled back" in record.summary_line(dict(_minimal_record(), status="failed", changed=True, rotation=left))
    early = {"failed": True, "changed": False, "steps": [], "invocation": {"module_args": {"name": "db"}}}
    assert record.rotation_summary(early)["secret"] == "db"
    assert "None" not in str(record.rotation_summary({"failed": True, "steps": []})["secret"])


def _minimal_record():
    return record.build_record(dict(upgrade_params(), results={}, playbook="rotate_secret"), "2026-11-30T02:10:00Z")


def test_a_verify_that_could_not_reach_the_api_server_is_no_rollback_and_says_so():
    results = dict(upgrade_params()["results"], verify={
        "failed": True, "unreachable": True, "api_server": "https://k8s:6443",
        "msg": "cannot reach the API server https://k8s:6443 to list pods: Connection refused"})
    error = {"step": "verify", "task": "Gather the health picture after the change", "msg": results["verify"]["msg"]}
    rec = record.build_record(upgrade_params(results=results, error=error), "2026-11-29T02:01:30Z")
    assert rec["status"] == "failed" and rec["changed"] and rec["unverified"] and rec["rollback"] is None
    assert "verify could not reach the API server" in record.summary_line(rec)
    assert "not rolled back" in record.summary_line(rec)
    finding = dict(results, verify=dict(info({"hypervisor": "hv:2"}), failed=True, msg="verify failed: a pool is not Running"))
    rec = record.build_record(upgrade_params(results=finding, error=dict(error, msg="verify failed")), "2026-11-29T02:01:30Z")
    assert not rec["unverified"], "a finding is a finding"


def rollback_run_params():
    rollback = {"changed": True, "chart": "tensor-fusion", "chart_version": "1.8.6", "app_version": "2.16.0",
                "chart_version_before": "1.8.7", "app_version_before": "2.17.0", "revision_before": 5,
                "revision_after": 6, "target_revision": 3, "method": "upgrade-to-stored-chart",
                "snapshot": {"path": "secret://tf/snap"},
                "component_config": [{"cluster": "tensor-fusion", "pool": "shared", "gpupool": "tensor-fusion-shared",
                                      "changed_components": [], "waited_for": [], "written": True,
                                      "restored": [{"field": "batchPercentage", "from": 34, "to": 17},
                                                   {"field": "worker.podTemplate", "hidden": True}]}]}
    return {"playbook": "rollback", "host": "lab", "started": T0,
            "steps": marks("lock", "window", "rollback", "verify_after_rollback"),
            "results": {"lock": {"changed": True}, "rollback": rollback,
                        "verify_after_rollback": info({"hypervisor": "hv:1"})},
            "snapshot": {"path": "secret://tf/snap", "revision": 3, "chart_version": "1.8.6"}}


def test_a_rollback_run_reports_the_chart_it_came_from_and_each_pool_it_restored():
    rec = record.build_record(rollback_run_params(), "2026-11-29T02:01:30Z")
    assert rec["status"] == "succeeded" and rec["rollback"]["ok"]
    assert rec["versions"]["before"]["chart_version"] == "1.8.7" and rec["versions"]["after"]["chart_version"] == "1.8.6"
    assert "(chart 1.8.7 -> 1.8.6)" in record.summary_line(rec)
    assert rec["rollback"]["chart_version_before"] == "1.8.7"
    assert rec["rollback"]["pools"] == [{"gpupool": "tensor-fusion-shared", "written": True, "waited_for": [],
                                         "restored": [{"field": "batchPercentage", "from": 34, "to": 17},
                                                      {"field": "worker.podTemplate", "hidden": True}]}]
    pool, = rec["pools"]
    assert pool["gpupool"] == "tensor-fusion-shared" and pool["restored"]
    md = report_render.render_markdown(rec)
    assert "Rollback: chart 1.8.7 -> 1.8.6, release revision 5 -> 6 (revision 3 recorded" in md
    assert "pools restored: tensor-fusion-shared" in md
    assert "Pool tensor-fusion-shared: no campaign; restored by the rollback: batchPercentage 34 -> 17, " \
           "worker.podTemplate changed" in md
    assert "nothing rolled" not in md
    html = report_render.render_html(rec)
    assert "<h2>Rollback</h2>" in html and "batchPercentage 34 -&gt; 17" in html


def test_an_upgrade_rolled_back_keeps_its_pool_timeline_and_says_what_the_rollback_restored():
    params = upgrade_params()
    rollback = dict(rollback_run_params()["results"]["rollback"])
    rollback["component_config"] = [dict(rollback["component_config"][0], waited_for=["hypervisor"], timeline=[
        {"time": "2026-11-29T02:01:10Z", "component": "hypervisor", "progress": 100, "synced": True}])]
    params["results"] = dict(params["results"], rollback=rollback)
    params["steps"] = marks("lock", "window", "precheck", "snapshot", "upgrade", "pools", "rollback")
    params["error"] = {"step": "pools", "msg": "health gate"}
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["status"] == "rolled_back"
    pool, = rec["pools"]
    assert max(e["progress"] for e in pool["timeline"]) == 100  # the pools step's own (it reached 100 here)
    assert all(e["time"] != "2026-11-29T02:01:10Z" for e in pool["timeline"]), "the rollback's campaign is not drawn over it"
    assert pool["restored"][0] == {"field": "batchPercentage", "from": 34, "to": 17}


BUSINESS = {"gate": "pause", "workloads": None, "percent": None, "started": T0, "ended": "2026-11-29T02:00:58Z",
            "business_workloads": 4, "changed": 1, "share": 25, "reached": True, "warned": 0,
            "changes": [{"kind": "Deployment", "namespace": "shop", "name": "api", "change": "changed", "writes": 1,
                         "fields": [{"field": "spec.containers[app].resources.requests.cpu", "from": "100m", "to": "2"},
                                    {"field": "spec.containers[app].env", "hidden": True}]}],
            "unseen": [], "resource_versions": {"Deployment": "42"}}


def test_business_changes_are_in_the_pool_record_and_a_gate_pause_is_said():
    params = upgrade_params(error={"step": "pools", "task": "roll", "msg": "stopped by the business changes gate"})
    first = pool_result([("2026-11-29T02:00:51Z", 20)])
    first["business_changes"] = dict(BUSINESS, changes=[], changed=0, share=0, reached=False)
    failed = {"failed": True, "msg": "rollout of GPUPool tensor-fusion-shared stopped by the business changes gate",
              "error": "BusinessChangesPaused", "paused": ["hypervisor"], "task_pool": "shared",
              "business_changes": BUSINESS}
    params["results"]["pools"] = [first, failed]
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    pool, = rec["pools"]
    assert pool["business_changes"]["changes"] == BUSINESS["changes"]  # the last call's: the whole rollout
    assert "resource_versions" not in pool["business_changes"]
    assert rec["status"] == "resumable" and rec["business_paused"] == ["shared"]
    line = record.summary_line(rec)
    assert "the business changes gate paused pools shared" in line and "1 of 4 business workloads, 25%" in line
    assert "window" not in line
    markdown = report_render.render_markdown(rec)
    assert "Deployment shop/api: spec.containers[app].resources.requests.cpu 100m -> 2" in markdown
    assert "business workloads changed during the rollout: 1 of 4 (25%), gate pause, reached" in markdown
    html = report_render.render_html(rec)
    assert "Deployment shop/api: spec.containers[app].resources.requests.cpu 100m -&gt; 2" in html


def test_a_window_pause_is_not_said_to_be_the_business_gate():
    params = upgrade_params(error={"step": "pools", "task": "roll", "msg": "deadline"})
    params["results"]["pools"] = [pool_result([("2026-11-29T02:00:51Z", 20)], failed=True, paused=["hypervisor"])]
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    assert rec["business_paused"] == [] and rec["pools"][0]["business_changes"] is None
    assert "the window ended mid-rollout" in record.summary_line(rec)


def test_a_pool_record_names_at_most_50_business_workloads_and_counts_the_rest():
    entry = BUSINESS["changes"][0]
    many = dict(BUSINESS, changed=60, business_workloads=60, share=100,
                changes=[dict(entry, name="api-%02d" % i) for i in range(60)])
    params = upgrade_params()
    params["results"]["pools"] = [dict(pool_result([("2026-11-29T02:00:51Z", 100)]), business_changes=many)]
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    kept = rec["pools"][0]["business_changes"]
    assert len(kept["changes"]) == 50 and kept["changes_omitted"] == 10 and kept["changed"] == 60
    assert "  - and 10 more" in report_render.render_markdown(rec)


# A plan's record says "would" and what it would set, from and to; how a plain helm rollback to a
# revision that recorded a pause must be followed.
def test_a_plan_names_images_and_policy_from_and_to_and_says_would():
    before = rollout.pool_view({"componentConfig": {"hypervisor": {"image": HV + "2.16.0"}},
                                "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": 100}}})
    after = rollout.pool_view({"componentConfig": {"hypervisor": {"image": HV + "2.17.0"}},
                               "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": 20,
                                                                                     "autoUpdateHypervisor": True}}})
    spec_changes = rollout.field_changes(before, after)
    pool = {"task_pool": "shared", "pool": "shared", "gpupool": "tensor-fusion-shared", "changed": True,
            "waited_for": ["hypervisor"], "changed_components": ["hypervisor"], "spec_changes": spec_changes,
            "schedule": {"nodes": 10, "batch_percentage": 20, "batch_interval": "1s", "batch_count": 5,
                         "batch_sizes": [2, 2, 2, 2, 2], "batch_seconds": 5.0, "seconds": 40.0, "batches": []}}
    params = upgrade_params(check_run=True)
    params["results"] = dict(params["results"], pools=[pool], upgrade=dict(
        params["results"]["upgrade"], reasons=["chart tensor-fusion-1.8.6 -> tensor-fusion-1.8.7"], revision_before=1,
        manifest_changes={"added": {}, "changed": {"Deployment": ["tf/controller"]}, "removed": {}}))
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    plan = rec["plan"]
    assert plan["pools"][0]["spec_changes"] == [
        {"field": "hypervisor.image", "from": HV + "2.16.0", "to": HV + "2.17.0"},
        {"field": "autoUpdateHypervisor", "from": None, "to": True},
        {"field": "batchPercentage", "from": 100, "to": 20}]
    line = record.summary_line(rec)
    assert "would upgrade chart 1.8.6 -> 1.8.7" in line
    assert "pool shared would roll hypervisor (hypervisor.image %s -> %s" % (HV + "2.16.0", HV + "2.17.0") in line
    assert "batchPercentage 100 -> 20" in line
    rows = dict((text, step) for step, text in report_render.plan_rows(plan))
    assert any(t.startswith("would upgrade chart 1.8.6 -> 1.8.7") for t in rows)
    assert "would change Deployment: tf/controller" in rows
    assert any("shared would roll hypervisor" in t and "hypervisor.image" in t for t in rows)
    # The steps of a plan wrote nothing: those that would write say so.
    upgrade_step = next(s for s in rec["steps"] if s["name"] == "upgrade")
    assert upgrade_step["status"] == "would change" and upgrade_step["changed"] is False and upgrade_step["would_change"]
    html = report_render.render_html(rec)
    assert "would change" in html and "<th>would change</th>" in html


def test_the_report_says_how_a_plain_helm_rollback_to_a_revision_with_a_pause_must_be_followed():
    params = upgrade_params()
    precheck = dict(info({"hypervisor": "hv:1"}), data=dict(info({"hypervisor": "hv:1"})["data"], clusters=[
        {"name": "tensor-fusion", "paused": {"shared": ["hypervisor"]}}]))
    params["results"] = dict(params["results"], precheck=precheck, upgrade=dict(
        params["results"]["upgrade"], name="tensor-fusion-sys", revision_before=1, revision_after=2))
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    notes = [w["msg"] for w in rec["warnings"] if w["step"] == "upgrade"]
    assert len(notes) == 1 and "helm revision 2 of release tensor-fusion-sys records tensor-fusion/shared" in notes[0]
    assert "`helm rollback tensor-fusion-sys 2`" in notes[0] and "autoUpdateHypervisor back to true" in notes[0]
    held = upgrade_params()
    held["results"] = dict(held["results"], upgrade=dict(held["results"]["upgrade"], name="r", revision_before=1,
                                                         revision_after=2, held_for_provider_configs=["tensor-fusion/shared"]))
    assert [w for w in record.build_record(held, "2026-11-29T02:01:30Z")["warnings"] if w["step"] == "upgrade"]
    nothing = record.build_record(upgrade_params(), "2026-11-29T02:01:30Z")
    assert not [w for w in nothing["warnings"] if w["step"] == "upgrade"], "no pause, nothing to say"
    unchanged = upgrade_params(steps=marks("lock", "precheck", "upgrade"))
    unchanged["results"] = dict(params["results"], upgrade=dict(params["results"]["upgrade"], changed=False,
                                                                revision_after=1))
    assert not [w for w in record.build_record(unchanged, "2026-11-29T02:01:30Z")["warnings"] if w["step"] == "upgrade"]
