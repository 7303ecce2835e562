"""report/interrupted.py: the record of a run that did not finish, in each report form."""
import datetime
import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import interrupted, record, render

REF = {"namespace": "tensor-fusion-sys", "configmap": "tfops-report-upgrade-prod-20261207t020000z-abc",
       "playbook": "upgrade", "host": "prod", "started": "2026-12-07T02:00:00.000000Z", "run_id": "abc",
       "keep": 10, "release": "tensor-fusion", "store": "both"}
VIEW = {"name": "tensorfusion-ops-maintenance", "holder": "ops@bastion run=abc purpose=upgrade", "user": "ops",
        "host": "bastion", "job_id": "4242", "process": "pid=77 started=1",
        "acquire_time": datetime.datetime(2026, 12, 7, 2, 0, 3, tzinfo=datetime.timezone.utc),
        "renew_time": "2026-12-07T02:05:00.000000Z", "record": REF,
        "rolling": [{"cluster": "tf", "pool": "shared", "components": ["hypervisor"]}]}


def built(**kwargs):
    pool = interrupted.pool_entry("tf", "shared", "tf-shared", {"hypervisor": (40, False)}, ["hypervisor"])
    args = dict(paused=["hypervisor of GPUPool tf-shared at 40%"],
                release={"name": "tensor-fusion", "revision": 7, "status": "deployed"}, pools=[pool])
    args.update(kwargs)
    return interrupted.build(REF, VIEW, "2026-12-07T02:06:00.000000Z", "its lock's warden",
                             "its ansible-playbook ended without releasing the lock", **args)


def test_the_record_of_a_run_stopped_by_a_signal_in_every_form():
    rec = built()
    assert rec["status"] == "interrupted" and rec["failed"] and rec["resumable"] and rec["changed"] is None
    assert rec["seconds"] == 360.0 and rec["error"]["step"] == "pools" and rec["paused_pools"] == ["tf-shared"]
    assert rec["interrupted"]["lock_taken"] == "2026-12-07T02:00:03.000000Z" and rec["interrupted"]["job_id"] == "4242"
    assert rec["lock"]["released"] is True
    line = record.summary_line(rec)
    assert line.startswith("upgrade on prod: did not finish (interrupted, cancelled or killed): recorded by its lock's warden")
    assert "paused hypervisor of GPUPool tf-shared at 40% (the same change run again resumes)" in line
    assert "Helm release tensor-fusion at revision 7, deployed" in line
    files = render.report_files(rec)
    assert json.loads(files["report.json"])["status"] == "interrupted"
    for form in ("report.md", "report.html"):
        text = files[form]
        assert "did not finish" in text and "tf/shared hypervisor" in text and "4242" in text, form
        assert "hypervisor of GPUPool tf-shared at 40%" in text and "tf-shared" in text
    assert "Pool tf-shared: hypervisor 40% (paused: hypervisor)" in files["report.md"]
    assert 'class="interrupted"' in files["report.html"]


def test_a_release_left_pending_and_a_pause_that_failed_are_said():
    rec = built(paused=[], pause_failed="forbidden: patch tensorfusionclusters",
                release={"name": "tensor-fusion", "revision": 8, "status": "pending-upgrade"})
    line = record.summary_line(rec)
    assert "could not pause its rollouts (forbidden: patch tensorfusionclusters): look at the pools" in line
    assert "revision 8, pending-upgrade (a helm write cut off: the rollback runbook brings it back" in line
    assert not rec["resumable"]


def test_a_taker_s_record_has_no_rollouts_when_the_run_waited_for_none():
    view = dict(VIEW, rolling=[])
    rec = interrupted.build(REF, view, "2026-12-07T02:06:00Z", "the run that took its lock over (me)",
                            "its holder stopped renewing the lock")
    assert rec["error"]["step"] is None and rec["pools"] == [] and rec["lock"]["released"] is False
    assert "recorded by the run that took its lock over (me); what it changed is what the cluster shows" in \
        record.summary_line(rec)
    render.report_files(rec)  # every form renders


def test_the_lease_keeps_where_the_run_s_report_goes_while_the_run_holds_it():
    now = datetime.datetime(2026, 12, 7, 2, tzinfo=datetime.timezone.utc)
    me = dict(holder="me", record=REF)
    taken = locks.lease_after(None, "create", me, "n", "l", now, 120)
    assert locks.lease_view(taken)["record"] == REF
    # a renewal that does not say (a fence's) keeps it; the release drops it
    renewed = locks.lease_after(taken, "renew", dict(holder="me"), "n", "l", now, 120)
    assert locks.lease_view(renewed)["record"] == REF
    released = locks.lease_after(renewed, "release", dict(holder="me"), "n", "l", now, None)
    assert locks.RECORD not in released["metadata"]["annotations"]
    # another holder's take without a record of its own leaves none of the last one's
    again = locks.lease_after(taken, "take_over", dict(holder="other"), "n", "l", now, 120)
    assert locks.lease_view(again)["record"] is None
    assert locks.parse_record("{not json") is None and locks.parse_record('{"namespace": "n"}') is None


def test_the_lease_names_the_write_in_flight_until_it_is_cleared():
    now = datetime.datetime(2026, 12, 7, 2, tzinfo=datetime.timezone.utc)
    taken = locks.lease_after(None, "create", dict(holder="me"), "n", "l", now, 120)
    writer = dict(pid=4242, started=99, host="bastion", what="helm upgrade of release tensor-fusion-sys/tf")
    marked = locks.lease_after(taken, "renew", dict(holder="me", writing=writer), "n", "l", now, 120)
    assert locks.lease_view(marked)["writing"] == writer
    kept = locks.lease_after(marked, "renew", dict(holder="me"), "n", "l", now, 120)
    assert locks.lease_view(kept)["writing"] == writer
    cleared = locks.lease_after(kept, "renew", dict(holder="me", writing={}), "n", "l", now, 120)
    assert locks.lease_view(cleared)["writing"] is None
    assert locks.lease_view(locks.lease_after(marked, "release", dict(holder="me"), "n", "l", now, None))["writing"] is None
    assert locks.parse_writing("pid=x started=1") is None
