"""Window arithmetic: durations, time zones, cron windows across midnight and daylight-saving
changes, merging, the safety margin, and the pool's declared window."""
import datetime
import os
import time

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import window as w
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    MissingDependency,
    OutsideWindow,
)

UTC = datetime.timezone.utc
BERLIN = w.get_zone("Europe/Berlin")
NEW_YORK = w.get_zone("America/New_York")
SHANGHAI = w.get_zone("Asia/Shanghai")
LORD_HOWE = w.get_zone("Australia/Lord_Howe")


def t(text):
    return w.parse_instant(text)


def window(exprs, duration, now, tz=UTC, margin="0s"):
    return w.scheduled_window(w.parse_schedules(exprs, tz), w.parse_duration(duration), t(now),
                              w.parse_duration(margin), tz)


# --- durations ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,seconds", [
    ("10m", 600), ("1h30m", 5400), ("1.5h", 5400), ("90s", 90), ("300ms", 0.3), ("2h45m30s", 9930),
    (".5h", 1800), ("+5m", 300), ("0", 0), ("3600", 3600), ("1us", 1e-6), ("1\u00b5s", 1e-6),
    (120, 120),
])
def test_go_durations(text, seconds):
    assert w.parse_duration(text).total_seconds() == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "h", "5d", "1h 30m", "1x", "ten minutes", "5m-", "."])
def test_bad_durations_are_clear_errors(text):
    with pytest.raises(InvalidInput, match="not a Go duration such as 1s"):
        w.parse_duration(text, "duration")


def test_negative_duration_is_refused():
    with pytest.raises(InvalidInput, match="negative"):
        w.parse_duration("-5m")


def test_format_duration():
    assert w.format_duration(datetime.timedelta(hours=2, minutes=5)) == "2h5m0s"
    assert w.format_duration(datetime.timedelta(seconds=42)) == "42s"


# --- zones and instants ----------------------------------------------------------------------

def test_unknown_time_zone_is_a_clear_error():
    with pytest.raises(InvalidInput, match="unknown time zone 'Mars/Olympus'"):
        w.get_zone("Mars/Olympus")


def test_naive_times_are_read_in_the_zone_and_offsets_win():
    assert w.parse_instant("2026-11-30T02:00:00", SHANGHAI) == t("2026-11-29T18:00:00Z")
    assert w.parse_instant("2026-11-30T02:00:00+01:00", SHANGHAI) == t("2026-11-30T01:00:00Z")
    assert w.parse_instant("2026-11-30T02:00:00Z", SHANGHAI) == t("2026-11-30T02:00:00Z")


def test_bad_time_is_a_clear_error():
    with pytest.raises(InvalidInput, match="start: 'tomorrow' is not an ISO 8601 time"):
        w.parse_instant("tomorrow", UTC, "start")


def test_skipped_wall_clock_time_maps_to_the_jump():
    # Berlin, 2026-03-29: 02:00 CET jumps to 03:00 CEST (01:00 UTC).
    assert w.local_to_utc(datetime.datetime(2026, 3, 29, 2, 30), BERLIN) == t("2026-03-29T01:00:00Z")
    assert w.local_to_utc(datetime.datetime(2026, 3, 29, 2, 0), BERLIN) == t("2026-03-29T01:00:00Z")
    assert w.local_to_utc(datetime.datetime(2026, 3, 29, 3, 0), BERLIN) == t("2026-03-29T01:00:00Z")
    assert w.local_to_utc(datetime.datetime(2026, 3, 29, 1, 59), BERLIN) == t("2026-03-29T00:59:00Z")
    # Lord Howe (UTC+10:30) skips only half an hour: 02:00 -> 02:30 on 2026-10-04 (15:30 UTC).
    assert w.local_to_utc(datetime.datetime(2026, 10, 4, 2, 15), LORD_HOWE) == t("2026-10-03T15:30:00Z")


def test_repeated_wall_clock_time_maps_to_its_first_occurrence():
    # Berlin, 2026-10-25: 03:00 CEST goes back to 02:00 CET (01:00 UTC); 02:30 happens twice.
    assert w.local_to_utc(datetime.datetime(2026, 10, 25, 2, 30), BERLIN) == t("2026-10-25T00:30:00Z")
    assert w.local_to_utc(datetime.datetime(2026, 10, 25, 3, 0), BERLIN) == t("2026-10-25T02:00:00Z")


# --- cron expressions --------------------------------------------------------------------------

@pytest.mark.parametrize("expr,match", [
    ("0 2 * *", "has 4 fields"),
    ("0 0 2 * * *", "has 6 fields"),
    ("61 2 * * *", "not a valid crontab expression"),
    ("0 25 * * *", "not a valid crontab expression"),
    ("@every 1h", "@every is not supported"),
    ("@reboot", "@reboot is not supported"),
    ("CRON_TZ=Nowhere/Land 0 2 * * *", "unknown time zone"),
])
def test_bad_cron_is_a_clear_error(expr, match):
    with pytest.raises(InvalidInput, match=match):
        w.CronSchedule(expr)


def test_cron_that_never_fires_is_a_clear_error():
    with pytest.raises(InvalidInput, match="never fires"):
        window(["0 2 30 2 *"], "1h", "2026-11-29T12:00:00Z")


def test_missing_croniter_is_reported_clearly(monkeypatch):
    monkeypatch.setattr(w, "HAS_CRONITER", False)
    monkeypatch.setattr(w, "CRONITER_IMPORT_ERROR", ImportError("No module named 'croniter'"))
    with pytest.raises(MissingDependency, match="the Python library 'croniter' is required"):
        w.CronSchedule("0 2 * * *")


def test_descriptors_and_names_are_accepted():
    assert window(["@daily"], "1h", "2026-11-29T00:30:00Z")["inside"]
    assert window(["0 2 * * SAT"], "1h", "2026-11-28T02:30:00Z")["inside"]  # a Saturday
    assert not window(["0 2 * * SAT"], "1h", "2026-11-29T02:30:00Z")["inside"]


# --- cron windows ----------------------------------------------------------------------------

def test_window_across_midnight():
    late = window(["0 22 * * *"], "4h", "2026-11-29T23:30:00Z")
    assert (late["inside"], late["window_start"], late["window_end"]) == (
        True, "2026-11-29T22:00:00Z", "2026-11-30T02:00:00Z")
    assert late["time_left_seconds"] == 2 * 3600 + 30 * 60
    assert late["next_start"] == "2026-11-30T22:00:00Z"
    after_midnight = window(["0 22 * * *"], "4h", "2026-11-30T01:59:59Z")
    assert after_midnight["window_start"] == "2026-11-29T22:00:00Z"
    assert after_midnight["time_left_seconds"] == 1
    closed = window(["0 22 * * *"], "4h", "2026-11-30T02:00:00Z")
    assert not closed["inside"] and closed["next_start"] == "2026-11-30T22:00:00Z"
    assert closed["next_end"] == "2026-12-01T02:00:00Z"


def test_start_is_inside_and_end_is_outside():
    assert window(["0 2 * * *"], "1h", "2026-11-29T02:00:00Z")["inside"]
    assert not window(["0 2 * * *"], "1h", "2026-11-29T03:00:00Z")["inside"]


def test_window_in_a_time_zone():
    # 02:00 in Shanghai is 18:00 UTC the day before.
    res = window(["0 2 * * *"], "4h", "2026-11-29T19:00:00Z", SHANGHAI)
    assert (res["window_start"], res["window_end"]) == ("2026-11-29T18:00:00Z", "2026-11-29T22:00:00Z")
    assert "2026-11-30 02:00 CST to 2026-11-30 06:00 CST" in res["msg"]
    assert not window(["0 2 * * *"], "4h", "2026-11-29T02:30:00Z", SHANGHAI)["inside"]


def test_cron_tz_prefix_wins_over_the_option():
    res = window(["CRON_TZ=Asia/Shanghai 0 2 * * *"], "4h", "2026-11-29T19:00:00Z", BERLIN)
    assert res["window_start"] == "2026-11-29T18:00:00Z"


def test_spring_forward_window_due_in_the_skipped_hour_opens_at_the_jump():
    # 02:30 does not exist in Berlin on 2026-03-29: the window opens at 03:00 CEST (01:00 UTC)
    # and lasts its full two hours of elapsed time.
    before = window(["30 2 * * *"], "2h", "2026-03-29T00:59:00Z", BERLIN)
    assert not before["inside"]
    assert (before["next_start"], before["next_end"]) == ("2026-03-29T01:00:00Z", "2026-03-29T03:00:00Z")
    res = window(["30 2 * * *"], "2h", "2026-03-29T01:00:00Z", BERLIN)
    assert (res["inside"], res["window_start"], res["window_end"]) == (
        True, "2026-03-29T01:00:00Z", "2026-03-29T03:00:00Z")
    # The days around it: 02:30 CET (01:30 UTC) and 02:30 CEST (00:30 UTC).
    assert res["next_start"] == "2026-03-30T00:30:00Z"
    assert window(["30 2 * * *"], "2h", "2026-03-28T01:45:00Z", BERLIN)["window_start"] == \
        "2026-03-28T01:30:00Z"


def test_spring_forward_duration_is_elapsed_time():
    # 01:00 CET + 3h of elapsed time ends at 05:00 CEST, not 04:00 wall clock.
    res = window(["0 1 * * *"], "3h", "2026-03-29T02:30:00Z", BERLIN)
    assert (res["window_start"], res["window_end"]) == ("2026-03-29T00:00:00Z", "2026-03-29T03:00:00Z")
    assert "2026-03-29 01:00 CET to 2026-03-29 05:00 CEST" in res["msg"]


def test_fall_back_duration_is_elapsed_time():
    # 01:00 CEST + 3h of elapsed time ends at 03:00 CET: two hours on the wall clock.
    res = window(["0 1 * * *"], "3h", "2026-10-25T01:30:00Z", BERLIN)
    assert (res["window_start"], res["window_end"]) == ("2026-10-24T23:00:00Z", "2026-10-25T02:00:00Z")
    assert "2026-10-25 01:00 CEST to 2026-10-25 03:00 CET" in res["msg"]


def test_fall_back_window_due_in_the_repeated_hour_opens_once():
    # 02:30 happens twice in Berlin on 2026-10-25 (00:30 UTC in CEST, 01:30 UTC in CET).
    first = window(["30 2 * * *"], "2h", "2026-10-25T00:30:00Z", BERLIN)
    assert (first["window_start"], first["window_end"]) == ("2026-10-25T00:30:00Z", "2026-10-25T02:30:00Z")
    # During the second 02:45 the window that opened at the first 02:30 still runs...
    second = window(["30 2 * * *"], "2h", "2026-10-25T01:45:00Z", BERLIN)
    assert second["window_start"] == "2026-10-25T00:30:00Z"
    assert second["time_left_seconds"] == 45 * 60
    # ... and no second window opens at the second 02:30.
    assert second["next_start"] == "2026-10-26T01:30:00Z"
    after = window(["30 2 * * *"], "30m", "2026-10-25T01:40:00Z", BERLIN)
    assert not after["inside"] and after["next_start"] == "2026-10-26T01:30:00Z"


def test_fall_back_frequent_schedule_skips_the_repeated_stretch():
    # Every 30 minutes for 10 minutes: the wall-clock times 02:00 and 02:30 count once (in CEST).
    res = window(["*/30 * * * *"], "10m", "2026-10-25T01:05:00Z", BERLIN)  # 02:05 CET
    assert not res["inside"]
    assert res["next_start"] == "2026-10-25T02:00:00Z"  # 03:00 CET
    assert window(["*/30 * * * *"], "10m", "2026-10-25T00:05:00Z", BERLIN)["inside"]  # 02:05 CEST


def test_new_york_spring_forward():
    # 2026-03-08 02:00 EST jumps to 03:00 EDT (07:00 UTC); 02:15 opens the window at 03:00 EDT.
    res = window(["15 2 * * *"], "1h", "2026-03-08T07:10:00Z", NEW_YORK)
    assert (res["window_start"], res["window_end"]) == ("2026-03-08T07:00:00Z", "2026-03-08T08:00:00Z")
    assert res["next_start"] == "2026-03-09T06:15:00Z"


def test_touching_and_overlapping_windows_merge():
    res = window(["0 1 * * *", "0 3 * * *"], "2h", "2026-11-29T02:30:00Z")
    assert (res["window_start"], res["window_end"]) == ("2026-11-29T01:00:00Z", "2026-11-29T05:00:00Z")
    res = window(["0 1 * * *", "30 2 * * *"], "2h", "2026-11-29T01:15:00Z")
    assert res["window_end"] == "2026-11-29T04:30:00Z"
    assert res["next_start"] == "2026-11-30T01:00:00Z"


def test_a_schedule_that_never_closes_is_followed_a_week_ahead():
    res = window(["0 * * * *"], "90m", "2026-11-29T12:10:00Z")
    assert res["inside"]
    end = t(res["window_end"])
    assert t("2026-12-06T12:00:00Z") <= end <= t("2026-12-06T14:00:00Z")
    assert t(res["window_start"]) <= t("2026-11-22T13:00:00Z")


def test_several_expressions_pick_the_earliest_next_window():
    res = window(["0 2 * * 6", "0 22 * * 3"], "2h", "2026-11-25T12:00:00Z")  # a Wednesday
    assert res["next_start"] == "2026-11-25T22:00:00Z"


def test_results_do_not_depend_on_the_host_time_zone():
    old = os.environ.get("TZ")
    try:
        os.environ["TZ"] = "America/Los_Angeles"
        time.tzset()
        res = window(["30 2 * * *"], "2h", "2026-03-29T01:00:00Z", BERLIN)
    finally:
        if old is None:
            os.environ.pop("TZ")
        else:
            os.environ["TZ"] = old
        time.tzset()
    assert res["window_start"] == "2026-03-29T01:00:00Z"


# --- margin, explicit windows, enforcement ---------------------------------------------------

def test_deadline_is_the_end_minus_the_margin():
    res = window(["0 2 * * *"], "4h", "2026-11-29T03:00:00Z", margin="15m")
    assert res["deadline"] == "2026-11-29T05:45:00Z" and not res["deadline_passed"]
    assert w.enforce(res) is res


def test_past_the_deadline_is_refused_with_the_next_start():
    res = window(["0 2 * * *"], "4h", "2026-11-29T05:50:00Z", margin="15m")
    assert res["inside"] and res["deadline_passed"]
    with pytest.raises(OutsideWindow, match="only 10m0s is left, within the safety margin of 15m0s") as exc:
        w.enforce(res)
    assert exc.value.details["next_start"] == "2026-11-30T02:00:00Z"


def test_outside_is_refused_with_the_next_start():
    res = window(["0 2 * * *"], "4h", "2026-11-29T12:00:00Z", BERLIN)
    with pytest.raises(OutsideWindow, match="the next one opens 2026-11-30 02:00 CET") as exc:
        w.enforce(res)
    assert exc.value.details["next_start"] == "2026-11-30T01:00:00Z"
    assert exc.value.details["inside"] is False


def test_explicit_window():
    start, end = t("2026-11-30T22:00:00+08:00"), t("2026-12-01T02:00:00+08:00")
    margin = w.parse_duration("10m")
    before = w.explicit_window(start, end, t("2026-11-30T13:00:00Z"), margin, SHANGHAI)
    assert not before["inside"] and before["next_start"] == "2026-11-30T14:00:00Z"
    inside = w.explicit_window(start, end, t("2026-11-30T15:00:00Z"), margin, SHANGHAI)
    assert inside["inside"] and inside["deadline"] == "2026-11-30T17:50:00Z"
    assert inside["time_left_seconds"] == 3 * 3600
    after = w.explicit_window(start, end, t("2026-11-30T18:00:00Z"), margin, SHANGHAI)
    assert not after["inside"] and after["next_start"] is None
    assert "closed 2026-12-01 02:00 CST and no other is scheduled" in after["msg"]
    with pytest.raises(InvalidInput, match="not after its start"):
        w.explicit_window(end, start, t("2026-11-30T15:00:00Z"), margin, SHANGHAI)


# --- the pool's declared window -----------------------------------------------------------------

def _spec(policy):
    return {"nodeManagerConfig": {"nodePoolRollingUpdatePolicy": policy}}


def test_pool_policy_window():
    assert w.pool_policy_window(_spec({"maxDuration": "2h", "maintenanceWindow": {
        "includes": ["2 2 * * *", " "]}})) == (["2 2 * * *"], "2h")
    assert w.pool_policy_window(_spec({"maintenanceWindow": {"includes": ["0 3 * * *"]}})) == (
        ["0 3 * * *"], "10m")
    assert w.pool_policy_window({"nodeManagerConfig": {}}) == ([], "10m")
    assert w.pool_policy_window(None) == ([], "10m")


def test_find_cluster_pool():
    tfc = {"metadata": {"name": "tensor-fusion"}, "spec": {"gpuPools": [
        {"name": "shared", "specTemplate": {"a": 1}}, {"name": "train", "specTemplate": {"b": 2}}]}}
    assert w.find_cluster_pool(tfc, "shared")["specTemplate"] == {"a": 1}
    assert w.find_cluster_pool(tfc, "tensor-fusion-train")["specTemplate"] == {"b": 2}
    with pytest.raises(InvalidInput, match="has no GPU pool gone .it has: shared, train"):
        w.find_cluster_pool(tfc, "gone")
    with pytest.raises(InvalidInput, match="has 2 GPU pools"):
        w.find_cluster_pool(tfc, None)
    single = {"metadata": {"name": "c"}, "spec": {"gpuPools": [{"name": "only"}]}}
    assert w.find_cluster_pool(single, None) == {"name": "only"}
