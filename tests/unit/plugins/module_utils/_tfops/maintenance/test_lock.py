"""The maintenance lock's decisions and the Leases they write, as pure functions: the holder's
identity, and a holder that is provably gone (maintenance/holder.py) taken over."""
import datetime

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, parse_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    LockHeld,
    NotLockHolder,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import holder as holders

from .test_holder import RECORDED  # helpers shared with that file


NOW = parse_time("2026-11-30T02:00:00Z")


ME = locks.make_identity("upgrade", user="alice", host="bastion", job="42")


OTHER = locks.make_identity("rotate", user="bob", host="laptop")


def lease(holder, renewed_ago=10, duration=60, acquired_ago=100, transitions=2, **annotations):
    spec = {"leaseTransitions": transitions}
    if holder:
        spec.update(holderIdentity=holder, leaseDurationSeconds=duration,
                    acquireTime=micro_time(NOW - datetime.timedelta(seconds=acquired_ago)),
                    renewTime=micro_time(NOW - datetime.timedelta(seconds=renewed_ago)))
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "lock", "namespace": "tf", "resourceVersion": "77",
                         "annotations": dict(("tensorfusion.ops/" + k, v) for k, v in annotations.items()),
                         "managedFields": [{"manager": "x"}]},
            "spec": spec}


def view(obj):
    return locks.lease_view(obj, NOW)


def test_identity_names_user_host_job_and_purpose():
    assert ME["holder"] == "alice@bastion job=42 purpose=upgrade"
    assert OTHER["holder"] == "bob@laptop purpose=rotate"
    assert locks.make_identity("x", holder="pinned", user="u", host="h")["holder"] == "pinned"
    with pytest.raises(InvalidInput):
        locks.make_identity(" ")


def test_job_id_from_awx_variables_in_order():
    assert locks.job_id({"AWX_JOB_ID": "7", "TOWER_JOB_ID": "8"}) == "7"
    assert locks.job_id({"JOB_ID": "6", "AWX_JOB_ID": "7"}) == "6"
    assert locks.job_id({"TOWER_JOB_ID": "8"}) == "8"
    assert locks.job_id({"JOB_ID": ""}) is None


def test_view_of_a_held_lease():
    v = view(lease(OTHER["holder"], renewed_ago=10, duration=60, purpose="rotate", user="bob"))
    assert v["holder"] == OTHER["holder"] and v["purpose"] == "rotate" and v["user"] == "bob"
    assert v["expires"] == NOW + datetime.timedelta(seconds=50)
    assert not v["stale"]
    assert locks.lease_view(None) is None


def test_acquire_no_lease_creates():
    assert locks.decide_acquire(None, ME["holder"], NOW) == ("create", None)


def test_acquire_free_lease_takes_it():
    assert locks.decide_acquire(view(lease(None)), ME["holder"], NOW) == ("take", None)


def test_taking_a_lock_that_a_warden_released_for_an_interrupted_run_says_so():
    """#45 item 2: the run that comes next says that the run before it did not finish."""
    released = lease(None, **{"released-by": OTHER["holder"], "released-at": "2026-12-07T02:00:00Z",
                              "released-why": "the run's ansible-playbook (pid 7) ended without releasing the lock"})
    action, warning = locks.decide_acquire(view(released), ME["holder"], NOW)
    assert action == "take" and OTHER["holder"] in warning and "did not finish" in warning
    assert "pid 7" in warning and "2026-12-07T02:00:00Z" in warning
    # a lock its run released itself: nothing to say
    plain = lease(None, **{"released-by": OTHER["holder"], "released-at": "2026-12-07T02:00:00Z"})
    assert locks.decide_acquire(view(plain), ME["holder"], NOW) == ("take", None)


def test_acquire_own_lease_renews():
    assert locks.decide_acquire(view(lease(ME["holder"])), ME["holder"], NOW) == ("renew", None)


def test_acquire_live_lease_of_another_fails_with_who_and_since_when():
    with pytest.raises(LockHeld) as exc:
        locks.decide_acquire(view(lease(OTHER["holder"], renewed_ago=59, duration=60)), ME["holder"], NOW)
    assert str(exc.value) == (
        "the maintenance lock tf/lock is held by bob@laptop purpose=rotate since "
        "2026-11-30T01:58:20.000000Z (last renewed 2026-11-30T01:59:01.000000Z, expires "
        "2026-11-30T02:00:01.000000Z)")
    assert exc.value.details["holder"] == OTHER["holder"]
    assert exc.value.details["lease"]["acquire_time"] == "2026-11-30T01:58:20.000000Z"


def test_acquire_stale_lease_of_another_takes_it_over_with_a_warning():
    action, warning = locks.decide_acquire(view(lease(OTHER["holder"], renewed_ago=60, duration=60)),
                                           ME["holder"], NOW)
    assert action == "take_over"
    assert "from bob@laptop purpose=rotate since" in warning and "stopped renewing" in warning


def test_a_holder_without_times_or_duration_is_stale():
    broken = lease(OTHER["holder"])
    del broken["spec"]["leaseDurationSeconds"]
    assert locks.decide_acquire(view(broken), ME["holder"], NOW)[0] == "take_over"


def test_release_decisions():
    assert locks.decide_release(None, ME["holder"]) == ("none", None)
    assert locks.decide_release(view(lease(None)), ME["holder"]) == ("none", None)
    assert locks.decide_release(view(lease(ME["holder"])), ME["holder"]) == ("release", None)
    with pytest.raises(NotLockHolder, match="refusing to release .* held by bob@laptop"):
        locks.decide_release(view(lease(OTHER["holder"])), ME["holder"])
    # Even a stale lock of another is not released without force.
    with pytest.raises(NotLockHolder):
        locks.decide_release(view(lease(OTHER["holder"], renewed_ago=3600)), ME["holder"])
    action, warning = locks.decide_release(view(lease(OTHER["holder"])), ME["holder"], force=True)
    assert action == "force_release" and "bob@laptop" in warning


def test_create_body():
    body = locks.lease_after(None, "create", ME, "tf", "lock", NOW, 900)
    assert body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "tensorfusion.ops"}
    assert body["metadata"]["annotations"] == {
        "tensorfusion.ops/purpose": "upgrade", "tensorfusion.ops/user": "alice",
        "tensorfusion.ops/host": "bastion", "tensorfusion.ops/job-id": "42"}
    assert body["spec"] == {"holderIdentity": ME["holder"], "leaseDurationSeconds": 900,
                            "acquireTime": "2026-11-30T02:00:00.000000Z",
                            "renewTime": "2026-11-30T02:00:00.000000Z", "leaseTransitions": 0}


def test_renew_keeps_acquire_time_and_transitions_and_the_resource_version():
    before = lease(ME["holder"], transitions=3)
    body = locks.lease_after(before, "renew", ME, "tf", "lock", NOW, 900)
    assert body["spec"]["acquireTime"] == before["spec"]["acquireTime"]
    assert body["spec"]["renewTime"] == "2026-11-30T02:00:00.000000Z"
    assert body["spec"]["leaseTransitions"] == 3
    assert body["metadata"]["resourceVersion"] == "77"
    assert "managedFields" not in body["metadata"]
    assert before["metadata"]["managedFields"]  # the read object is not modified


def test_take_over_counts_a_transition_and_replaces_the_annotations():
    before = lease(OTHER["holder"], transitions=3, purpose="rotate", user="bob", host="laptop")
    body = locks.lease_after(before, "take_over", ME, "tf", "lock", NOW, 900)
    assert body["spec"]["holderIdentity"] == ME["holder"]
    assert body["spec"]["leaseTransitions"] == 4
    assert body["spec"]["acquireTime"] == "2026-11-30T02:00:00.000000Z"
    assert body["metadata"]["annotations"]["tensorfusion.ops/user"] == "alice"
    no_job = locks.make_identity("upgrade", user="carol", host="h")
    body = locks.lease_after(lease(ME["holder"], job_id="42"), "take_over", no_job, "tf", "lock", NOW, 9)
    assert "tensorfusion.ops/job-id" not in body["metadata"]["annotations"]


def test_release_clears_the_holder_and_taking_it_back_is_no_transition():
    before = lease(ME["holder"], transitions=3, purpose="upgrade")
    released = locks.lease_after(before, "release", ME, "tf", "lock", NOW, None)
    assert "holderIdentity" not in released["spec"] and "renewTime" not in released["spec"]
    assert released["spec"]["leaseTransitions"] == 3
    assert released["metadata"]["annotations"] == {
        "tensorfusion.ops/released-by": ME["holder"],
        "tensorfusion.ops/released-at": "2026-11-30T02:00:00.000000Z"}
    again = locks.lease_after(released, "take", ME, "tf", "lock", NOW, 60)
    assert again["spec"]["leaseTransitions"] == 3
    assert "tensorfusion.ops/released-by" not in again["metadata"]["annotations"]
    other = locks.lease_after(released, "take", OTHER, "tf", "lock", NOW, 60)
    assert other["spec"]["leaseTransitions"] == 4


def test_the_rollouts_a_holder_waits_for_are_noted_by_its_renewals_and_gone_with_the_lock():
    """What an interrupted run's warden pauses (#45 item 1): set and cleared by renewals that say
    so, kept by those that do not (the warden's), dropped by a release or a take."""
    rolling = [{"cluster": "tf", "pool": "shared", "components": ["hypervisor"]},
               {"cluster": "tf", "pool": "b", "components": ["hypervisor", "worker"]}]
    held = lease(ME["holder"])
    noted = locks.lease_after(held, "renew", dict(ME, rolling=rolling), "tf", "lock", NOW, 60)
    assert noted["metadata"]["annotations"][locks.ROLLING] == "tf/shared:hypervisor;tf/b:hypervisor,worker"
    assert view(noted)["rolling"] == rolling
    kept = locks.lease_after(noted, "renew", ME, "tf", "lock", NOW, 60)
    assert view(kept)["rolling"] == rolling
    cleared = locks.lease_after(noted, "renew", dict(ME, rolling=[]), "tf", "lock", NOW, 60)
    assert locks.ROLLING not in cleared["metadata"]["annotations"] and view(cleared)["rolling"] == []
    for action in ("release", "take_over"):
        assert locks.ROLLING not in locks.lease_after(noted, action, OTHER, "tf", "lock", NOW, 60)["metadata"]["annotations"]
    assert locks.parse_rolling("garbage;tf/:x;/p:x") == []


def test_clock_offset_from_the_date_header():
    sent = parse_time("2026-11-30T02:00:00Z").timestamp()
    # The server says 03:00:00 (the true time lies within that second) while this host says 02:00.
    offset = locks.clock_offset("Mon, 30 Nov 2026 03:00:00 GMT", sent, sent + 0.2)
    assert offset == pytest.approx(3600 + 0.5 - 0.1)
    behind = locks.clock_offset("Mon, 30 Nov 2026 01:59:00 GMT", sent, sent)
    assert behind == pytest.approx(-59.5)
    # Within the header's resolution and the request's latency: no correction.
    assert locks.clock_offset("Mon, 30 Nov 2026 02:00:01 GMT", sent, sent + 0.3) == 0.0
    assert locks.clock_offset(None, sent, sent) == 0.0
    assert locks.clock_offset("not a date", sent, sent) == 0.0


class _StubLeases:
    """Just enough of a Kube for LeaseLock.acquire: /version with a Date header, no Lease, a create."""

    def __init__(self, server_epoch):
        import email.utils
        self.date = email.utils.formatdate(server_epoch, usegmt=True)
        self.api_client = None
        self.calls = []

    def resource(self, kind, group=None):
        import types
        return types.SimpleNamespace(group_version="coordination.k8s.io/v1", get=None, create=None)

    def call(self, verb, desc, _fn, **kwargs):
        import types
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError
        self.calls.append(verb)
        if desc == "/version":
            return {}, 200, {"Date": self.date}
        if verb == "get":
            raise ApiError("not found", status=404)
        return types.SimpleNamespace(to_dict=lambda: kwargs["body"])


def test_the_lock_reads_the_injected_host_clock_and_hook_not_the_environment(monkeypatch):
    """Tests inject a host clock and a hook between read and write; nothing is read from the
    environment (a variable left set in an execution environment changes nothing)."""
    monkeypatch.setenv("TFOPS_TEST_LOCK_CLOCK_SKEW", "3600")
    monkeypatch.setenv("TFOPS_TEST_LOCK_PAUSE_BEFORE_WRITE", "30")
    server = NOW.timestamp()
    plain = locks.LeaseLock(_StubLeases(server), "tf", "lock", host_clock=lambda: server)
    assert plain.acquire(ME, 60)["clock_offset_seconds"] == 0.0
    seen = []
    kube = _StubLeases(server)
    ahead = locks.LeaseLock(kube, "tf", "lock", host_clock=lambda: server + 3600,
                            before_write=lambda: seen.append(list(kube.calls)))
    result = ahead.acquire(ME, 60)
    assert result["clock_offset_seconds"] == pytest.approx(-3600, abs=2)
    assert result["lease"]["renew_time"].startswith("2026-11-30T02:00:0"), "the server's time"
    assert seen == [["get", "get"]], "called once, after the read and before the write"
    assert kube.calls[-1] == "create"


def test_two_runs_of_one_user_on_one_host_are_two_holders():
    one = locks.make_identity("upgrade", user="alice", host="bastion", run="k3j2h4g5q1", pid=4242)
    two = locks.make_identity("upgrade", user="alice", host="bastion", run="z9y8x7w6v5", pid=4343)
    assert one["holder"] == "alice@bastion pid=4242 run=k3j2h4g5q1 purpose=upgrade"
    assert one["holder"] != two["holder"]
    assert locks.make_identity("upgrade", user="a", host="h", job="42", run="r1")["holder"] == \
        "a@h job=42 run=r1 purpose=upgrade"


@pytest.mark.parametrize("bad", ["", "has space", "x" * 65, "semi;colon"])
def test_a_run_id_that_would_blur_the_holder_is_refused(bad):
    with pytest.raises(InvalidInput, match="run_id"):
        locks.make_identity("upgrade", run=bad)


HOLDER = "alice@bastion pid=4242 run=k3j2h4g5q1 purpose=upgrade"


def test_a_gone_holder_is_taken_over_at_once_with_a_warning():
    held = view(lease(HOLDER, renewed_ago=5, duration=3600, host="bastion"))
    assert not held["stale"]
    action, warning = locks.decide_acquire(held, "me", NOW, gone=lambda v: "its process is no longer running")
    assert action == "take_over"
    assert "at once" in warning and HOLDER in warning and "no longer running" in warning


def test_a_live_holder_or_one_nothing_is_known_of_keeps_the_lock():
    held = view(lease(HOLDER, renewed_ago=5, duration=3600))
    with pytest.raises(LockHeld):
        locks.decide_acquire(held, "me", NOW, gone=lambda v: None)
    with pytest.raises(LockHeld):
        locks.decide_acquire(held, "me", NOW)


def test_the_lease_records_the_process_keeps_it_on_a_fence_renewal_and_drops_it_on_release():
    me = locks.make_identity("upgrade", user="alice", host="bastion", run="k3j2h4g5q1", pid=4242,
                             process=holders.format_process(RECORDED))
    taken = locks.lease_after(None, "create", me, "tf", "lock", NOW, 60)
    assert taken["metadata"]["annotations"][locks.PROCESS] == holders.format_process(RECORDED)
    assert locks.lease_view(taken, NOW)["process"] == holders.format_process(RECORDED)
    fence_me = dict((k, v) for k, v in me.items() if k != "process")  # what a fence renews with
    renewed = locks.lease_after(taken, "renew", fence_me, "tf", "lock", NOW, 60)
    assert renewed["metadata"]["annotations"][locks.PROCESS] == holders.format_process(RECORDED)
    released = locks.lease_after(renewed, "release", me, "tf", "lock", NOW, None)
    assert locks.PROCESS not in released["metadata"]["annotations"]
    other = locks.make_identity("upgrade", user="bob", host="laptop")
    taken_over = locks.lease_after(taken, "take_over", other, "tf", "lock", NOW, 60)
    assert locks.PROCESS not in taken_over["metadata"]["annotations"], "a holder without a process records none"


def test_ttl_and_holder_are_bounded_before_anything_is_written():
    """#46: a TTL of 1e9 s (31 years) and a holder with a newline (forged log lines) or of 100 kB
    were accepted; both the module and the runbooks' inputs use these checks."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
    assert locks.check_ttl(120) == 120 and locks.check_ttl(86400) == 86400
    for bad, said in ((0, "at least 1 second"), (10 ** 9, "more than a day")):
        with pytest.raises(InvalidInput, match=said):
            locks.check_ttl(bad)
    assert locks.check_holder("ops@host run=1 purpose=upgrade") and locks.check_holder(None) is None
    for bad, said in (("a\nWARNING forged", "line break"), ("x" * 100000, "100000 characters"),
                      ("   ", "non-empty"), (7, "non-empty")):
        with pytest.raises(InvalidInput, match=said):
            locks.check_holder(bad)
