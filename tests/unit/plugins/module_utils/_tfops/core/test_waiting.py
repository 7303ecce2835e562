"""core/waiting.py's ObjectWatcher without a cluster: list once and watch from the list's
resourceVersion; 410 Gone (an ERROR event or an ApiException) re-lists; other ERROR events heal or
fail by the retry policy; a watch that ends or drops resumes from the last resourceVersion seen;
the deadline ends the wait with a timeout that names what was waited for. The API client is a
scripted fake (kube_fakes.py) of the two calls the watcher makes: a list page and a watch."""
import pytest
from kubernetes.client.rest import ApiException
from urllib3.exceptions import ProtocolError

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import waiting
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    Forbidden,
    InvalidInput,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher

from ansible_collections.tensorfusion.ops.tests.unit.plugins.kube_fakes import (
    Advance,
    FakeDynamic,
    FakeKube,
    FakeResource,
    FakeTime,
    error_event,
    event,
    obj,
    patch_time,
)

NS = "ml"


@pytest.fixture
def clock(monkeypatch):
    fake = FakeTime()
    patch_time(monkeypatch, fake, waiting)
    return fake


def pod(name, version, phase="Pending"):
    return obj(name, version, NS, status={"phase": phase})


def phase_is(name, wanted="Running"):
    """A check: (done, detail) for one Pod's phase."""
    def check(objects):
        current = ((objects.get((NS, name)) or {}).get("status") or {}).get("phase")
        return current == wanted, "pod %s is %s" % (name, current)
    return check


def watcher_for(dynamic, clock, **kwargs):
    kube = FakeKube(dynamic, clock=clock)
    kwargs.setdefault("namespace", NS)
    kwargs.setdefault("label_selector", "app=trainer")
    return kube, ObjectWatcher(kube, FakeResource("pods"), **kwargs)


def versions(dynamic):
    return [call["resource_version"] for call in dynamic.watch_calls]


def test_lists_once_then_watches_from_the_lists_resource_version(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[event("MODIFIED", pod("a", 101, "Running"))]])
    _kube, watcher = watcher_for(dynamic, clock)
    detail = watcher.wait(phase_is("a"), Deadline(timeout=120, clock=clock))
    assert detail == "pod a is Running"
    assert len(dynamic.list_calls) == 1
    assert dynamic.list_calls[0]["path"] == "/api/v1/namespaces/ml/pods"
    assert dynamic.list_calls[0]["query"]["labelSelector"] == "app=trainer"
    assert versions(dynamic) == ["100"]
    call = dynamic.watch_calls[0]
    assert (call["namespace"], call["label_selector"], call["field_selector"]) == (NS, "app=trainer", None)
    assert call["timeout"] == waiting.MAX_WATCH_SECONDS  # 120 s remain: the server cuts it at 60 s
    assert watcher.resource_version == "101"
    assert watcher.requests == 2 and watcher.events == 1
    assert dynamic.closed == 1


def test_already_done_after_the_list_needs_no_watch(clock):
    dynamic = FakeDynamic(lists=[("100", [pod("a", 90, "Running")])])
    _kube, watcher = watcher_for(dynamic, clock)
    assert watcher.wait(phase_is("a"), Deadline(timeout=30, clock=clock)) == "pod a is Running"
    assert dynamic.watch_calls == []


def test_start_lists_before_the_wait_and_the_wait_does_not_list_again(clock):
    dynamic = FakeDynamic(lists=[("100", [pod("a", 90)])],
                          watches=[[event("MODIFIED", pod("a", 101, "Running"))]])
    _kube, watcher = watcher_for(dynamic, clock)
    watcher.start()
    assert watcher.resource_version == "100" and list(watcher.objects) == [(NS, "a")]
    watcher.wait(phase_is("a"), Deadline(timeout=30, clock=clock))
    assert len(dynamic.list_calls) == 1
    assert versions(dynamic) == ["100"]


def test_name_becomes_a_field_selector_and_the_description(clock):
    dynamic = FakeDynamic(lists=[("5", [pod("a", 4, "Running")])])
    _kube, watcher = watcher_for(dynamic, clock, label_selector=None, name="a")
    assert watcher.field_selector == "metadata.name=a"
    assert watcher.desc == "pods in ml (metadata.name=a)"
    watcher.wait(phase_is("a"), Deadline(timeout=30, clock=clock))
    assert dynamic.list_calls[0]["query"]["fieldSelector"] == "metadata.name=a"


def test_410_error_event_relists_and_watches_from_the_new_list(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90), pod("gone", 95)]),
               ("500", [pod("a", 480)])],  # "gone" was deleted while the watch was expired
        watches=[[event("MODIFIED", pod("a", 101)), error_event(410, "Expired", "too old resource version")],
                 [event("MODIFIED", pod("a", 501, "Running"))]])
    _kube, watcher = watcher_for(dynamic, clock)
    seen = []
    detail = watcher.wait(phase_is("a"), Deadline(timeout=120, clock=clock),
                          on_change=lambda objects, detail: seen.append(sorted(n for _ns, n in objects)))
    assert detail == "pod a is Running"
    assert len(dynamic.list_calls) == 2
    assert versions(dynamic) == ["100", "500"]
    assert (NS, "gone") not in watcher.objects, "the re-list replaces what the watcher holds"
    assert seen[0] == ["a", "gone"] and seen[-1] == ["a"]


def test_410_api_exception_from_the_watch_call_relists(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)]), ("300", [pod("a", 290)])],
        watches=[ApiException(status=410, reason="Gone"),
                 [event("MODIFIED", pod("a", 301, "Running"))]])
    _kube, watcher = watcher_for(dynamic, clock)
    assert watcher.wait(phase_is("a"), Deadline(timeout=60, clock=clock)) == "pod a is Running"
    assert len(dynamic.list_calls) == 2
    assert versions(dynamic) == ["100", "300"]
    assert clock.slept == [], "a 410 re-lists at once, without a backoff"


def test_410_api_exception_in_the_middle_of_a_stream_relists(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)]), ("300", [pod("a", 290)])],
        watches=[[event("MODIFIED", pod("a", 101)), ApiException(status=410, reason="Gone")],
                 [event("MODIFIED", pod("a", 301, "Running"))]])
    _kube, watcher = watcher_for(dynamic, clock)
    watcher.wait(phase_is("a"), Deadline(timeout=60, clock=clock))
    assert versions(dynamic) == ["100", "300"]


def test_a_stream_the_server_ends_resumes_from_the_last_resource_version(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[event("MODIFIED", pod("a", 101)), event("MODIFIED", pod("a", 103))],  # then closed
                 [event("MODIFIED", pod("a", 110, "Running"))]])
    _kube, watcher = watcher_for(dynamic, clock)
    watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert len(dynamic.list_calls) == 1, "an ended watch is resumed, not re-listed"
    assert versions(dynamic) == ["100", "103"]
    assert clock.slept == []


def test_a_dropped_connection_backs_off_and_resumes_from_the_last_resource_version(clock):
    dropped = ProtocolError("Connection broken: IncompleteRead(0 bytes read)")
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[event("MODIFIED", pod("a", 101)), dropped],
                 [event("MODIFIED", pod("a", 102, "Running"))]])
    kube, watcher = watcher_for(dynamic, clock)
    watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert len(dynamic.list_calls) == 1
    assert versions(dynamic) == ["100", "101"]
    assert len(clock.slept) == 1 and 0.25 <= clock.slept[0] <= 0.5, "one first backoff step"
    warnings = kube.outages.warnings()
    assert len(warnings) == 1 and "1 failed requests" in warnings[0] and "IncompleteRead" in warnings[0]
    assert kube.outages._open is None, "the next stream ended the outage"


def test_a_refused_watch_call_is_retried_from_the_same_resource_version(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[ConnectionRefusedError("[Errno 111] Connection refused"),
                 ConnectionRefusedError("[Errno 111] Connection refused"),
                 [event("MODIFIED", pod("a", 101, "Running"))]])
    kube, watcher = watcher_for(dynamic, clock)
    watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert versions(dynamic) == ["100", "100", "100"]
    assert len(clock.slept) == 2
    assert "2 failed requests" in kube.outages.warnings()[0]


def test_a_rejected_certificate_is_not_retried(clock):
    import ssl
    rejected = ssl.SSLCertVerificationError("certificate verify failed: CERTIFICATE_VERIFY_FAILED")
    dynamic = FakeDynamic(lists=[("100", [pod("a", 90)])], watches=[rejected])
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(ApiError) as caught:
        watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert caught.value.msg.startswith("cannot reach the API server https://api.test:6443 to watch pods")
    assert caught.value.details["unreachable"] is True
    assert len(dynamic.watch_calls) == 1 and clock.slept == []


def test_a_server_error_event_is_retried_from_the_last_resource_version(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[event("MODIFIED", pod("a", 104)), error_event(500, "InternalError", "etcd leader changed")],
                 [event("MODIFIED", pod("a", 105, "Running"))]])
    kube, watcher = watcher_for(dynamic, clock)
    watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert len(dynamic.list_calls) == 1, "only a 410 re-lists"
    assert versions(dynamic) == ["100", "104"]
    assert len(clock.slept) == 1
    assert "watch pods failed: etcd leader changed (HTTP 500)" in kube.outages.warnings()[0]


def test_a_forbidden_error_event_fails_with_the_verb_and_resource(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[error_event(403, "Forbidden", 'pods is forbidden: User "ops" cannot watch resource "pods"')]])
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(Forbidden) as caught:
        watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert caught.value.msg.startswith("forbidden: watch pods (")
    assert caught.value.verb == "watch" and caught.value.status == 403
    assert len(dynamic.watch_calls) == 1 and clock.slept == []


def test_an_error_event_that_cannot_heal_fails_at_once(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[error_event(400, "BadRequest", "unable to parse labelSelector")]])
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(ApiError) as caught:
        watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert not isinstance(caught.value, Forbidden)
    assert (caught.value.status, caught.value.verb, caught.value.resource) == (400, "watch", "pods")
    assert caught.value.msg.startswith("watch pods failed: ") and caught.value.msg.endswith(" (HTTP 400)")
    assert len(dynamic.watch_calls) == 1 and clock.slept == []


def test_an_error_events_message_reaches_the_error(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[error_event(400, "BadRequest", "unable to parse labelSelector")]])
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(ApiError) as caught:
        watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert "unable to parse labelSelector" in caught.value.msg


def test_the_deadline_ends_the_wait_with_what_was_waited_for(clock):
    def quiet(kwargs):  # a watch on which nothing happens: the server closes it after its timeout
        return [Advance(clock, kwargs["timeout"])]

    dynamic = FakeDynamic(lists=[("100", [pod("a", 90)])], more_watches=quiet)
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(WaitTimeout) as caught:
        watcher.wait(phase_is("a"), Deadline(timeout=150, clock=clock))
    assert caught.value.msg == ("timed out (timeout of 150s) waiting for pods in ml (app=trainer): "
                                "pod a is Pending")
    assert caught.value.details == {"waited_for": "pods in ml (app=trainer)", "last_state": "pod a is Pending"}
    # each watch asks for no more than what remains: 60 + 60 + 30
    assert [c["timeout"] for c in dynamic.watch_calls] == [60, 60, 30]
    assert versions(dynamic) == ["100", "100", "100"]


def test_the_deadline_ends_a_busy_stream_that_never_gets_there(clock):
    """Events keep coming but never the awaited one: the deadline still ends the wait."""
    def busy(kwargs):
        return [item for rv in range(200, 260) for item in
                (Advance(clock, 1), event("MODIFIED", pod("a", rv, "ContainerCreating")))]

    dynamic = FakeDynamic(lists=[("100", [pod("a", 90)])], more_watches=busy)
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(WaitTimeout, match=r"timed out \(timeout of 10s\) waiting for pods in ml "
                                          r"\(app=trainer\): pod a is ContainerCreating"):
        watcher.wait(phase_is("a"), Deadline(timeout=10, clock=clock))
    assert len(dynamic.watch_calls) == 1
    assert watcher.events == 10


def test_a_past_deadline_names_the_absolute_end(clock):
    dynamic = FakeDynamic(lists=[("100", [pod("a", 90)])])
    _kube, watcher = watcher_for(dynamic, clock)
    deadline = Deadline(timeout=600, end="2026-01-01T00:00:00Z", clock=clock)
    with pytest.raises(WaitTimeout, match=r"^timed out \(deadline 2026-01-01T00:00:00\+00:00\) waiting for pods"):
        watcher.wait(phase_is("a"), deadline)
    assert dynamic.watch_calls == []


def test_an_unbounded_wait_is_refused_before_any_request(clock):
    dynamic = FakeDynamic()
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(InvalidInput, match="every wait needs a deadline"):
        watcher.wait(phase_is("a"), Deadline(clock=clock))
    assert dynamic.list_calls == [] and dynamic.watch_calls == []


def test_bookmarks_move_the_resource_version_without_a_check(clock):
    checks = []

    def check(objects):
        checks.append(1)
        return phase_is("a")(objects)

    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[event("BOOKMARK", {"kind": "Pod", "metadata": {"resourceVersion": "150"}})],
                 [event("MODIFIED", pod("a", 151, "Running"))]])
    _kube, watcher = watcher_for(dynamic, clock)
    watcher.wait(check, Deadline(timeout=300, clock=clock))
    assert versions(dynamic) == ["100", "150"]
    assert watcher.events == 1
    # after the list, after the first (ended) stream, after the MODIFIED event
    assert len(checks) == 3


def test_added_and_deleted_events_change_the_objects(clock):
    def none_left(objects):
        return not objects, "%d pods" % len(objects)

    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)])],
        watches=[[event("ADDED", pod("b", 101)), event("DELETED", pod("a", 102)),
                  event("DELETED", pod("b", 103))]])
    _kube, watcher = watcher_for(dynamic, clock)
    seen = []
    detail = watcher.wait(none_left, Deadline(timeout=300, clock=clock),
                          on_change=lambda objects, detail: seen.append(detail))
    assert detail == "0 pods"
    assert seen == ["1 pods", "2 pods", "1 pods", "0 pods"]
    assert watcher.events == 3


def test_wakeup_bounds_each_watch_so_the_check_runs_again(clock):
    """A check that depends on time (a stall) is re-run after wakeup() seconds without events."""
    def check(objects):
        return clock.now >= 1020, "at %s" % clock.now

    def quiet(kwargs):
        return [Advance(clock, kwargs["timeout"])]

    dynamic = FakeDynamic(lists=[("100", [])], more_watches=quiet)
    _kube, watcher = watcher_for(dynamic, clock)
    detail = watcher.wait(check, Deadline(timeout=300, clock=clock), wakeup=lambda: 5)
    assert detail == "at 1020.0"
    assert [c["timeout"] for c in dynamic.watch_calls] == [5, 5, 5, 5]


def test_a_check_that_raises_ends_the_wait_with_its_error(clock):
    class Broken(Exception):
        pass

    def check(objects):
        if (objects.get((NS, "a")) or {}).get("status", {}).get("phase") == "Failed":
            raise Broken("pod a failed")
        return False, "waiting"

    dynamic = FakeDynamic(lists=[("100", [pod("a", 90)])],
                          watches=[[event("MODIFIED", pod("a", 101, "Failed")),
                                    event("MODIFIED", pod("a", 102, "Running"))]])
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(Broken):
        watcher.wait(check, Deadline(timeout=300, clock=clock))
    assert dynamic.closed == 1, "the stream is closed on the way out"


def test_a_periodic_resync_relists(clock):
    def quiet(kwargs):
        return [Advance(clock, kwargs["timeout"])]

    dynamic = FakeDynamic(lists=[("100", [pod("a", 90)]), ("900", [pod("a", 880, "Running")])],
                          more_watches=quiet)
    _kube, watcher = watcher_for(dynamic, clock)
    # an event lost on the way: only the resync's list shows the Pod Running
    detail = watcher.wait(phase_is("a"), Deadline(timeout=1000, clock=clock))
    assert detail == "pod a is Running"
    assert len(dynamic.list_calls) == 2
    # the resync came after more than RESYNC_SECONDS of 60-second watches, not before
    assert len(dynamic.watch_calls) == waiting.RESYNC_SECONDS // waiting.MAX_WATCH_SECONDS + 1


def test_a_relist_that_fails_with_a_server_error_is_retried_and_the_wait_goes_on(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)]),
               ApiException(status=503, reason="Service Unavailable"),
               ("400", [pod("a", 390, "Running")])],
        watches=[[error_event(410, "Expired")]],
        more_watches=lambda kwargs: [Advance(clock, kwargs["timeout"])])  # after the failed list: see the next test
    kube, watcher = watcher_for(dynamic, clock)
    assert watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock)) == "pod a is Running"
    assert len(dynamic.list_calls) == 3
    assert len(clock.slept) == 1
    assert "Service Unavailable" in kube.outages.warnings()[0]


def test_after_a_failed_relist_the_next_request_is_the_list_again(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90), pod("gone", 91)]),
               ApiException(status=503, reason="Service Unavailable"),
               ("400", [pod("a", 390, "Running")])],
        watches=[[error_event(410, "Expired")]])  # any further watch fails the test
    _kube, watcher = watcher_for(dynamic, clock)
    watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))
    assert versions(dynamic) == ["100"]
    assert (NS, "gone") not in watcher.objects


def test_a_relist_that_is_forbidden_fails(clock):
    dynamic = FakeDynamic(
        lists=[("100", [pod("a", 90)]), ApiException(status=403, reason="Forbidden")],
        watches=[[error_event(410, "Expired")]])
    _kube, watcher = watcher_for(dynamic, clock)
    with pytest.raises(Forbidden, match="^forbidden: list pods"):
        watcher.wait(phase_is("a"), Deadline(timeout=300, clock=clock))


def test_sleep_until_never_sleeps_past_the_deadline(clock):
    deadline = Deadline(timeout=3, clock=clock)
    waiting.sleep_until(deadline, 10)
    assert clock.slept == [3.0]
    waiting.sleep_until(deadline, 10)
    assert clock.slept == [3.0, 0.0]
