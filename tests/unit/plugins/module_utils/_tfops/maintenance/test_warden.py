"""maintenance/warden.py: what the lock's warden does for each thing its fence reports (a fake
fence and clock: the loop's decisions; the warden against a real lab is in test_fence.py)."""
import os
import socket

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    ControllerGone,
    InvalidInput,
    LockLost,
    NotLockHolder,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import retry
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import fence as fences
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import warden


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


class Fence:
    """Raises (or returns) what ``events`` says, one per look (the first check, then each
    heartbeat); then beats quietly."""

    def __init__(self, events, ttl=120):
        self.events, self.ttl, self.beats = list(events), ttl, 0

    def check(self, doing=None):
        self.heartbeat()

    def heartbeat(self):
        self.beats += 1
        if self.events:
            event = self.events.pop(0)
            if event is not None:
                raise event

    def seconds_to_next(self):
        return 1.0


def run(fence, release=None, lifetime=3600, ttl=None):
    clock, released = Clock(), []

    def do_release():
        released.append(clock.now)
        failure = release.pop(0) if isinstance(release, list) else release
        if failure is not None:
            raise failure
    outcome = warden.watch(fence, do_release, sleep=clock.sleep, clock=clock, lifetime=lifetime, ttl=ttl)
    return outcome, released, clock.now


def test_it_renews_while_the_run_works_and_releases_once_its_ansible_playbook_is_gone():
    fence = Fence([None] * 5 + [ControllerGone("gone")])
    outcome, released, when = run(fence)
    assert outcome == "released" and released == [5.0] and fence.beats == 6


def test_a_lease_that_no_longer_names_the_run_ends_it_without_a_write():
    assert run(Fence([None, LockLost("released by the run")]))[:2] == ("not ours", [])
    # the run released it just before ending: the release finds it not the run's
    assert run(Fence([ControllerGone("gone")]), release=NotLockHolder("held by another"))[0] == "not ours"


def test_an_unreachable_api_server_is_waited_out_until_the_ttl_would_have_ended():
    outage = [ApiError("connection refused")] * 10
    outcome, released, _ended = run(Fence(outage + [ControllerGone("gone")], ttl=120))
    assert outcome == "released" and released == [10.0]  # back after 10 s: then released
    outcome, released, when = run(Fence([ControllerGone("gone")] * 500, ttl=30), release=ApiError("down"))
    assert outcome == "unreachable" and 30 < when <= 32 and len(released) > 25  # tried each second


def test_a_release_that_keeps_failing_before_the_first_look_is_bounded_by_the_locks_ttl():
    """The run was gone before the warden's first look (no TTL read from the Lease yet): the
    lock's own TTL bounds the tries."""
    fence = Fence([ControllerGone("gone")] * 500, ttl=None)
    outcome, released, when = run(fence, release=ApiError("down"), ttl=20)
    assert outcome == "unreachable" and 20 < when <= 22


def test_credentials_no_longer_accepted_end_it_at_once():
    """A job's token revoked when the job ended (401) or its rights taken (403): no retry helps."""
    assert run(Fence([ControllerGone("gone")]), release=ApiError("Unauthorized", status=401))[0] == "refused"
    assert run(Fence([None, ApiError("forbidden", status=403)]))[0] == "refused"


def gone(n=1):
    return [ApiError("connection refused", unreachable=True)] * n


def test_a_starting_api_server_that_refuses_for_seconds_is_waited_out():
    """A kube-apiserver just back from an outage answers 403 (and 401) until its RBAC and token
    caches are filled (measured on the lab: 403 for 50 ms after each restart); the warden
    releases once it accepts (CI #2 found a Lease left held by a warden that took that 403 for
    revoked credentials)."""
    starting = [ApiError("forbidden", status=403)] * 5 + [ApiError("Unauthorized", status=401)] * 3
    outcome, released, _when = run(Fence(gone(40) + starting + [ControllerGone("gone")], ttl=120))
    assert outcome == "released" and released == [48.0]
    # the run ended during the outage: its release is refused while the API server starts
    outcome, released, _when = run(Fence([ControllerGone("gone")] * 60), release=gone(20) + starting + [None])
    assert outcome == "released" and len(released) == 29
    # a refusal long after the API server came back is not its start
    late = gone(5) + [ApiError("forbidden", status=403)] * 200
    outcome, _released, when = run(Fence(late, ttl=600))
    assert outcome == "refused" and 5 + retry.AUTH_SETTLE_SECONDS - 1 <= when <= 5 + retry.AUTH_SETTLE_SECONDS + 1


def test_a_run_that_never_ends_is_left_after_the_lifetime():
    assert run(Fence([]), lifetime=10)[0] == "lifetime"


def test_the_release_says_why_in_the_lease():
    me = dict(holder="u@h run=abc purpose=upgrade", why=warden.gone_reason(4242))
    lease = {"metadata": {"name": "l", "namespace": "n", "annotations": {}},
             "spec": {"holderIdentity": me["holder"], "leaseDurationSeconds": 120}}
    import datetime
    now = datetime.datetime(2026, 12, 7, tzinfo=datetime.timezone.utc)
    released = locks.lease_after(lease, "release", me, "n", "l", now, None)
    why = released["metadata"]["annotations"][locks.RELEASED_WHY]
    assert "pid 4242" in why and "ended without releasing" in why and "warden" in why
    again = locks.lease_after(released, "take", dict(holder="next"), "n", "l", now, 120)
    assert locks.RELEASED_WHY not in again["metadata"]["annotations"]
    plain = locks.lease_after(lease, "release", dict(holder=me["holder"]), "n", "l", now, None)
    assert locks.RELEASED_WHY not in plain["metadata"]["annotations"]


def test_the_collections_root_is_the_folder_that_holds_ansible_collections():
    root = warden.collections_root()
    assert os.path.isdir(os.path.join(root, "ansible_collections", "tensorfusion", "ops", "plugins"))
    assert warden.collections_root("/z/p.zip/ansible_collections/tensorfusion/ops/plugins/module_utils/_tfops/"
                                   "maintenance/warden.py") == "/z/p.zip"


@pytest.mark.parametrize("seconds", [0.5, 5])
def test_a_warden_that_does_not_start_is_an_error_that_says_so(seconds, tmp_path):
    """A warden that cannot watch (here: no API server at that address) fails its start with
    what it said; nothing is left running."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import resolve_auth
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import TfopsError
    auth = resolve_auth(dict(host="https://127.0.0.1:9", api_key="t", validate_certs=False), environ={})
    with pytest.raises(TfopsError, match="warden did not start.*cannot reach the API server https://127.0.0.1:9"):
        with warden.Starting(auth, "ns", "lock", "me", dict(pid=os.getpid(), started=1), 120, timeout=seconds):
            pass


class Lease:
    """The Lease as the warden's release reads and writes it."""

    def __init__(self, holder="run-1"):
        self.holder, self.released = holder, None

    def read(self):
        return {"metadata": {"name": "l", "namespace": "n", "annotations": {}},
                "spec": {"holderIdentity": self.holder, "leaseDurationSeconds": 120}}

    def release(self, me):
        self.released = me


def no_such_pool(kube, view):
    raise InvalidInput("TensorFusionCluster tf has no pool 'x'")


@pytest.mark.parametrize("before, says", [
    (lambda kube, view: ["hypervisor of GPUPool tf-shared at 40%"], "first paused the rollout of hypervisor of GPUPool tf-shared at 40%"),
    (lambda kube, view: [], "released by its warden"),
    (no_such_pool,
     "could not pause the run's rollouts (TensorFusionCluster tf has no pool 'x'): look at the pools"),
    (lambda kube, view: {}["boom"], "could not pause the run's rollouts (KeyError: 'boom')"),
])
def test_the_release_of_a_run_that_is_gone_pauses_first_and_a_failed_pause_does_not_keep_the_lock(before, says):
    lease = Lease()
    warden.release(None, lease, dict(holder="run-1", pid=7), before)
    assert lease.released["holder"] == "run-1" and says in lease.released["why"], lease.released


def test_a_pause_that_meets_an_absent_api_server_waits_with_the_release():
    lease = Lease()

    def away(kube, view):
        raise ApiError("connection refused", unreachable=True)
    with pytest.raises(ApiError):
        warden.release(None, lease, dict(holder="run-1", pid=7), away)
    assert lease.released is None
    with pytest.raises(NotLockHolder):
        warden.release(None, Lease(holder="another"), dict(holder="run-1", pid=7), away)


@pytest.mark.parametrize("record, says", [
    (lambda kube, view, paused, failed, dest: ("configmap://ns/tfops-report-x", None), "; its record: configmap://ns/tfops-report-x"),
    (lambda kube, view, paused, failed, dest: (None, "forbidden: create configmaps"),
     "; its record could not be written (forbidden: create configmaps)"),
    (lambda kube, view, paused, failed, dest: {}["boom"], "; its record could not be written (KeyError: 'boom')"),
])
def test_the_release_writes_the_run_s_record_after_the_pause_and_a_record_that_fails_does_not_keep_the_lock(record, says):
    seen = []

    def spy(kube, view, paused, failed, dest):
        seen.append((paused, failed, dest))
        return record(kube, view, paused, failed, dest)
    lease = Lease()
    warden.release(None, lease, dict(holder="run-1", pid=7, report_dest="/r"),
                   lambda kube, view: ["hypervisor of GPUPool p at 40%"], spy)
    assert seen == [(["hypervisor of GPUPool p at 40%"], None, "/r")]
    assert lease.released["why"].endswith(says) and "first paused the rollout" in lease.released["why"]


def test_a_run_gone_while_its_helm_writes_keeps_its_lock_until_helm_is_done():
    """Ctrl-C or a cancelled job mid-chart: helm (in a session of its own) goes on writing; the
    warden renews the run's lock meanwhile and releases once helm has ended, never before."""
    kept = []

    class Keeping(Fence):
        def keep(self):
            kept.append(True)
    outcome, released, _when = run(Keeping([ControllerGone("gone")] * 20),
                                   release=[warden.StillWriting("helm upgrade")] * 6 + [None])
    assert outcome == "released" and len(released) == 7 and len(kept) == 6


def test_the_release_waits_while_the_lease_names_a_live_writer():
    lease = Lease()
    me = os.getpid()
    with open("/proc/%d/stat" % me) as handle:
        started = fences.parse_stat(handle.read())[1]

    def with_writer(pid, start):
        view = Lease.read(lease)
        view["metadata"]["annotations"][locks.WRITING] = locks.format_writing(
            dict(pid=pid, started=start, host=socket.gethostname(), what="helm upgrade of release n/r"))
        return view
    lease.read = lambda: with_writer(me, started)
    with pytest.raises(warden.StillWriting, match="helm upgrade of release n/r"):
        warden.release(None, lease, dict(holder="run-1", pid=7))
    assert lease.released is None
    # the same pid started at another time is another process: the writer is gone
    lease.read = lambda: with_writer(me, started + 1)
    warden.release(None, lease, dict(holder="run-1", pid=7))
    assert lease.released["holder"] == "run-1"
