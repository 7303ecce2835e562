"""cluster/info.py's pure parts: which Warning Events the picture keeps."""
import datetime

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster.info import newest_events


def event(time, obj, reason="Failed"):
    return {"time": time, "namespace": "tensor-fusion-sys", "object": obj, "reason": reason,
            "message": reason, "count": 1}


def test_two_warnings_of_one_object_in_one_second_are_both_kept_and_never_compared():
    """Both have the same time and object: a selection that compared the events themselves broke
    (TypeError: '<' not supported between dicts) and tf_cluster_info crashed on such a cluster."""
    same = [event("2026-12-06T19:45:00Z", "pod/hypervisor-gpu-0", reason)
            for reason in ("FailedMount", "BackOff", "Unhealthy")]
    older = event("2026-12-06T19:40:00Z", "pod/other")
    assert newest_events(same + [older], limit=10) == same + [older]
    kept = newest_events([older] + same, limit=2)
    assert len(kept) == 2 and all(e["object"] == "pod/hypervisor-gpu-0" for e in kept)


def test_newest_first_at_most_the_limit_and_none_before_since():
    events = [event("2026-12-06T19:4%d:00Z" % minute, "pod/p%d" % minute) for minute in (3, 1, 4, 2)]
    assert [e["object"] for e in newest_events(events, limit=3)] == ["pod/p4", "pod/p3", "pod/p2"]
    since = datetime.datetime(2026, 12, 6, 19, 42, 30, tzinfo=datetime.timezone.utc)
    assert [e["object"] for e in newest_events(events, limit=10, since=since)] == ["pod/p4", "pod/p3"]
    assert newest_events(events, limit=0) == []


def test_an_event_without_a_time_is_the_oldest_and_is_not_filtered_by_since():
    events = [event(None, "pod/untimed"), event("2026-12-06T19:41:00Z", "pod/timed")]
    since = datetime.datetime(2026, 12, 6, 19, 50, tzinfo=datetime.timezone.utc)
    assert [e["object"] for e in newest_events(events, limit=10)] == ["pod/timed", "pod/untimed"]
    assert [e["object"] for e in newest_events(events, limit=10, since=since)] == ["pod/untimed"]
