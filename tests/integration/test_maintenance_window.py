"""maintenance_window end to end through ansible-playbook: cron and explicit windows, failing
outside with the next start, report mode, clear errors, check mode, and the default window read
from a real GPUPool and from a TensorFusionCluster on the lab's API server."""
import datetime
import uuid

import pytest
from kubernetes import client

from lab.tensorfusion import install_crds

from .ansible_runner import run_playbook
from .helpers import GROUP, VERSION

TASK = "Evaluate the window"


def evaluate(extra, args=()):
    run = run_playbook("maintenance_window.yml", extra, args=args)
    return run, run.task_results(TASK)


def ok_run(extra, args=()):
    run, result = evaluate(extra, args)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert result["changed"] is False
    return run, result


def ok(extra, args=()):
    return ok_run(extra, args)[1]


def status(run, task=TASK):
    return [r["status"] for r in run.results if r["task"] == task][-1]


def failed(extra, args=()):
    run, result = evaluate(extra, args)
    assert run.rc != 0 and status(run) == "failed", run.stdout[-3000:]
    return result


def test_cron_window_across_midnight_in_a_time_zone_and_its_deadline_reaches_later_tasks():
    run, res = ok_run({"window_cron": ["0 23 * * *"], "window_duration": "4h",
                       "window_timezone": "Asia/Shanghai", "window_safety_margin": "15m",
                       "window_now": "2026-11-30T01:30:00"})  # 01:30 Shanghai, after midnight
    assert res["inside"] is True
    assert (res["window_start"], res["window_end"]) == ("2026-11-29T15:00:00Z", "2026-11-29T19:00:00Z")
    assert res["time_left_seconds"] == int(1.5 * 3600)
    assert res["deadline"] == "2026-11-29T18:45:00Z"
    assert res["next_start"] == "2026-11-30T15:00:00Z"
    assert res["source"] == {"type": "cron", "cron": ["0 23 * * *"], "duration_seconds": 14400}
    assert "deadline 2026-11-29T18:45:00Z" in run.stdout


def test_daylight_saving_change_through_the_module():
    # Berlin skips 02:00-03:00 on 2026-03-29: the 02:30 window opens at 03:00 CEST.
    res = ok({"window_cron": ["30 2 * * *"], "window_duration": "2h",
              "window_timezone": "Europe/Berlin", "window_now": "2026-03-29T03:10:00+02:00"})
    assert (res["window_start"], res["window_end"]) == ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00Z")


def test_outside_the_window_fails_with_the_next_start():
    res = failed({"window_cron": ["0 2 * * 6"], "window_duration": "4h",
                  "window_timezone": "Europe/Berlin", "window_now": "2026-11-25T12:00:00Z"})
    assert res["error"] == "OutsideWindow"
    assert res["msg"].startswith("outside the maintenance window: the next one opens "
                                 "2026-11-28 02:00 CET")
    assert res["next_start"] == "2026-11-28T01:00:00Z" and res["inside"] is False


def test_report_mode_only_reports():
    res = ok({"window_cron": ["0 2 * * 6"], "window_duration": "4h",
              "window_now": "2026-11-25T12:00:00Z", "window_mode": "report"})
    assert res["inside"] is False and res["deadline"] is None
    assert res["next_start"] == "2026-11-28T02:00:00Z"


def test_too_close_to_the_end_fails_inside_the_window():
    res = failed({"window_start": "2026-11-30T02:00:00Z", "window_end": "2026-11-30T04:00:00Z",
                  "window_safety_margin": "30m", "window_now": "2026-11-30T03:40:00Z"})
    assert res["inside"] is True and res["deadline_passed"] is True
    assert "only 20m0s is left, within the safety margin of 30m0s" in res["msg"]


def test_explicit_window_on_the_real_clock():
    now = datetime.datetime.now(datetime.timezone.utc)
    end = now + datetime.timedelta(hours=1)
    res = ok({"window_start": (now - datetime.timedelta(minutes=5)).isoformat(),
              "window_end": end.isoformat(), "window_safety_margin": "600"})
    assert res["inside"] is True
    assert 3500 <= res["time_left_seconds"] <= 3600
    deadline = datetime.datetime.fromisoformat(res["deadline"].replace("Z", "+00:00"))
    assert abs((deadline - (end - datetime.timedelta(minutes=10))).total_seconds()) < 1
    assert res["source"] == {"type": "explicit"}


def test_check_mode_runs_fully():
    res = ok({"window_cron": ["0 2 * * *"], "window_duration": "1h",
              "window_now": "2026-11-30T02:30:00Z"}, args=["--check"])
    assert res["inside"] is True and res["window_end"] == "2026-11-30T03:00:00Z"


@pytest.mark.parametrize("extra,message", [
    ({"window_cron": ["0 2 * *"], "window_duration": "1h"}, "has 4 fields"),
    ({"window_cron": ["0 2 * * *"], "window_duration": "1 hour"}, "duration: '1 hour' is not a Go duration"),
    ({"window_cron": ["0 2 * * *"], "window_duration": "1h", "window_timezone": "Europe/Paris_"},
     "unknown time zone 'Europe/Paris_'"),
    ({"window_start": "2026-11-30T04:00:00Z", "window_end": "2026-11-30T02:00:00Z"}, "not after its start"),
    ({"window_start": "soon", "window_end": "2026-11-30T02:00:00Z"}, "start: 'soon' is not an ISO 8601 time"),
    ({"window_cron": ["0 2 * * *"]}, "missing parameter(s) required by 'cron': duration"),
    ({"window_start": "2026-11-30T02:00:00Z", "window_end": "2026-11-30T04:00:00Z",
      "window_duration": "1h"}, "parameters are mutually exclusive: start|duration"),
])
def test_bad_input_is_a_clear_error(extra, message):
    res = failed(extra)
    assert message in res["msg"]


# --- the pool's declared window -----------------------------------------------------------------

def _policy(includes=None, max_duration=None):
    policy = {"autoUpdateHypervisor": True}
    if includes is not None:
        policy["maintenanceWindow"] = {"includes": includes}
    if max_duration:
        policy["maxDuration"] = max_duration
    return {"nodeManagerConfig": {"nodePoolRollingUpdatePolicy": policy}}


@pytest.fixture(scope="module")
def tf_objects(lab, api_client):
    install_crds(api_client)
    custom = client.CustomObjectsApi(api_client)
    suffix = uuid.uuid4().hex[:6]
    names = {"pool": "win-pool-" + suffix, "bare": "win-bare-" + suffix,
             "default": "win-default-" + suffix, "cluster": "win-tfc-" + suffix}
    pools = [(names["pool"], _policy(["2 2 * * *"], "4h")),
             (names["bare"], _policy()),
             (names["default"], _policy(["0 3 * * *"]))]
    for name, spec in pools:
        custom.create_cluster_custom_object(GROUP, VERSION, "gpupools", {
            "apiVersion": "tensor-fusion.ai/v1", "kind": "GPUPool", "metadata": {"name": name},
            "spec": spec})
    custom.create_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", {
        "apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionCluster",
        "metadata": {"name": names["cluster"]},
        "spec": {"gpuPools": [
            {"name": "shared", "specTemplate": _policy(["CRON_TZ=Asia/Shanghai 0 1 * * 6"], "6h")},
            {"name": "train", "specTemplate": _policy(["0 4 * * *"], "1h")}]}})
    yield dict(names, kubeconfig=lab["kubeconfig"])
    for name, _spec in pools:
        custom.delete_cluster_custom_object(GROUP, VERSION, "gpupools", name)
    custom.delete_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters",
                                        names["cluster"])


def test_default_window_is_the_gpupools_own(lab, tf_objects):
    res = ok({"window_kubeconfig": tf_objects["kubeconfig"], "window_pool": tf_objects["pool"],
              "window_timezone": "Asia/Shanghai", "window_now": "2026-11-30T03:00:00+08:00"})
    assert res["inside"] is True
    assert (res["window_start"], res["window_end"]) == ("2026-11-29T18:02:00Z", "2026-11-29T22:02:00Z")
    assert res["source"] == {"type": "pool", "pool": tf_objects["pool"], "cron": ["2 2 * * *"],
                             "max_duration": "4h", "duration_seconds": 14400}
    assert res["api_server"] == lab["server"]


def test_pool_cron_is_read_in_utc_by_default(tf_objects):
    res = failed({"window_kubeconfig": tf_objects["kubeconfig"], "window_pool": tf_objects["pool"],
                  "window_now": "2026-11-30T03:00:00+08:00"})
    assert res["next_start"] == "2026-11-30T02:02:00Z"
    assert res["source"]["pool"] == tf_objects["pool"]


def test_pool_max_duration_defaults_to_the_crd_default_and_duration_overrides_it(tf_objects):
    res = ok({"window_kubeconfig": tf_objects["kubeconfig"], "window_pool": tf_objects["default"],
              "window_now": "2026-11-30T03:02:00Z"})
    assert res["source"]["max_duration"] == "10m" and res["window_end"] == "2026-11-30T03:10:00Z"
    assert res["deadline"] == "2026-11-30T03:05:00Z"
    res = ok({"window_kubeconfig": tf_objects["kubeconfig"], "window_pool": tf_objects["default"],
              "window_now": "2026-11-30T03:30:00Z", "window_duration": "1h"})
    assert res["window_end"] == "2026-11-30T04:00:00Z"


def test_window_read_from_the_tensorfusioncluster(tf_objects):
    # The shared pool's expression carries its own zone: Saturday 01:00 Shanghai = Fri 17:00 UTC.
    base = {"window_kubeconfig": tf_objects["kubeconfig"], "window_cluster": tf_objects["cluster"]}
    res = ok(dict(base, window_pool="shared", window_now="2026-11-27T18:00:00Z"))
    assert res["window_start"] == "2026-11-27T17:00:00Z" and res["window_end"] == "2026-11-27T23:00:00Z"
    assert res["source"]["pool"] == tf_objects["cluster"] + "-shared"
    assert res["source"]["cluster"] == tf_objects["cluster"]
    res = ok(dict(base, window_pool=tf_objects["cluster"] + "-train",
                  window_now="2026-11-27T04:30:00Z"))
    assert res["window_end"] == "2026-11-27T05:00:00Z"
    res = failed(dict(base, window_now="2026-11-27T04:30:00Z"))
    assert "has 2 GPU pools (shared, train): say which with pool" in res["msg"]


def test_pool_without_a_window_is_open_unless_told_otherwise(tf_objects):
    base = {"window_kubeconfig": tf_objects["kubeconfig"], "window_pool": tf_objects["bare"]}
    res = ok(base)
    assert res["inside"] is True and res["always_open"] is True and res["deadline"] is None
    assert "declares no maintenanceWindow.includes" in res["msg"]
    res = failed(dict(base, window_when_undeclared="closed"))
    assert res["inside"] is False and "never open" in res["msg"]


def test_missing_pool_is_a_clear_error(tf_objects):
    res = failed({"window_kubeconfig": tf_objects["kubeconfig"], "window_pool": "no-such-pool"})
    assert res["msg"].startswith("get gpupools/no-such-pool failed")
    assert "not found" in res["msg"] and res["status"] == 404
