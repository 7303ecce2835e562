"""The state machine (docs/operator-behaviour.md 3.3) of the lab's operator double, without a cluster."""
from dataclasses import replace

import pytest

from lab.tensorfusion import rollout
from lab.tensorfusion.rollout import ComponentState, Policy, Resources, manage_update

T0 = 1_800_000_000.0


class Pool:
    """One component of one pool: applies Decisions the way the operator does, and plays the
    node controller (a node put into a batch restarts and comes back updated on ``settle``)."""

    def __init__(self, nodes, policy, state=ComponentState(), updated=()):
        self.nodes = list(nodes)
        self.updated = set(updated)
        self.pending = set()
        self.policy = policy
        self.state = state
        self.status_writes = 0
        self.completions = []   # progress after each completed batch
        self.waits = 0          # batch-gap requeues

    def resources(self):
        stale = [n for n in self.nodes if n not in self.updated]
        return Resources(total=len(self.nodes), updated=len(self.nodes) - len(stale),
                         recheck=bool(self.pending), stale=stale)

    def reconcile(self, h, now):
        d = manage_update(self.state, h, self.policy, self.resources(), now)
        if d.annotations is not None:
            self.state = replace(self.state, in_progress=d.annotations["in_progress"],
                                 last_time=d.annotations["last_time"])
        if d.status is not None:
            self.status_writes += 1
            if d.status.progress > self.state.progress or (d.status.synced and not self.state.synced):
                self.completions.append(d.status.progress)
            self.state = replace(self.state, hash=d.status.hash, progress=d.status.progress,
                                 synced=d.status.synced)
        if d.requeue_after is not None and d.annotations and d.annotations["last_time"]:
            self.waits += 1
        for name in d.update:
            self.pending.add(name)
        return d

    def settle(self):
        self.updated |= self.pending
        self.pending.clear()

    def run(self, h, now=T0, rounds=200):
        """Reconcile until synced (or rounds run out), jumping the clock over every requeue."""
        for _ in range(rounds):
            d = self.reconcile(h, now)
            self.settle()
            if self.state.synced and self.state.hash == h and not d.update:
                return now
            now += d.requeue_after or 0.5
        return now


NODES10 = [f"n{i:02d}" for i in range(10)]


def test_first_observation_records_hash_without_progress_even_with_auto():
    d = manage_update(ComponentState(), "h1", Policy(auto=True), Resources(3, 0), T0)
    assert d.status == ComponentState("h1", 0, False) and not d.update and d.annotations is None


def test_twenty_percent_over_ten_nodes_moves_in_five_batches():
    pool = Pool(NODES10, Policy(auto=True, percentage=20), ComponentState("old", 100, True),
                updated=())
    batches = []
    now = T0
    for _ in range(100):
        d = pool.reconcile("new", now)
        if d.update:
            batches.append(list(d.update))
        pool.settle()
        if pool.state.synced:
            break
        now += d.requeue_after or 0.5
    assert pool.completions == [20, 40, 60, 80, 100]
    assert batches == [NODES10[i:i + 2] for i in range(0, 10, 2)]  # oldest first, 2 per batch
    assert pool.state == ComponentState("new", 100, True, "", "")


def test_two_nodes_at_thirty_percent_four_completions_three_waits():
    pool = Pool(["a", "b"], Policy(auto=True, percentage=30), ComponentState("old", 100, True))
    pool.run("new")
    assert pool.completions == [30, 60, 90, 100]
    assert pool.waits == 3


def test_batch_gap_is_max_of_interval_and_floor_and_interval_is_read_live():
    state = ComponentState("h", 20, False, "h", rollout.rfc3339(T0))
    res = Resources(10, 2, stale=NODES10[2:])
    d = manage_update(state, "h", Policy(True, 20, 1.0), res, T0 + 1.0)
    assert d.requeue_after == pytest.approx(2.0) and d.status is None and not d.update
    d = manage_update(state, "h", Policy(True, 20, 10.0), res, T0 + 4.0)
    assert d.requeue_after == pytest.approx(6.0)
    d = manage_update(state, "h", Policy(True, 20, 1.0), res, T0 + 4.0)  # shortened: resumes
    assert d.update == NODES10[2:4]
    d = manage_update(state, "h", Policy(True, 20, 1.0), res, T0 + 1.5, gap_floor=1.0)
    assert d.update == NODES10[2:4]


def test_new_config_mid_rollout_restarts_at_batch_zero_with_newest_hash():
    pool = Pool(NODES10, Policy(auto=True, percentage=20), ComponentState("old", 100, True))
    now = T0
    while 60 not in pool.completions:
        d = pool.reconcile("new", now)
        pool.settle()
        now += d.requeue_after or 0.5
    pool.updated = set()  # every node is out of date for "newer"
    d = pool.reconcile("newer", now)
    assert d.annotations == {"in_progress": "newer", "last_time": ""}
    assert d.status.hash == "newer" and d.status.progress == 0 and not d.status.synced
    assert d.update == NODES10[:2]  # batch 0 again, oldest first: every node is stale for "newer"


def test_auto_update_false_freezes_and_false_to_true_resumes():
    pool = Pool(NODES10, Policy(auto=False, percentage=20), ComponentState("old", 100, True))
    d = pool.reconcile("new", T0)
    assert d.status == ComponentState("new", 0, False)
    for k in range(5):
        d = pool.reconcile("new", T0 + k)
        assert d == rollout.Decision(note="auto update off")
    # Every node replaced by hand: still frozen, never synced.
    pool.updated = set(NODES10)
    assert pool.reconcile("new", T0 + 10).status is None and not pool.state.synced
    # Turned on: a campaign starts and fast-forwards to 100 in one pass.
    pool.policy = Policy(auto=True, percentage=20)
    d = pool.reconcile("new", T0 + 11)
    assert d.status.progress == 100 and d.status.synced and not d.update
    # ... and, as upstream's update of its own, the campaign's start is written first: a watcher
    # of the pool sees the in-progress hash even when the same reconcile finishes it.
    assert d.started == {"in_progress": "new", "last_time": ""}
    assert d.annotations == {"in_progress": "", "last_time": ""}


def test_auto_update_turned_off_mid_rollout_freezes_progress_and_annotations():
    pool = Pool(NODES10, Policy(auto=True, percentage=20), ComponentState("old", 100, True))
    now = T0
    while 40 not in pool.completions:
        d = pool.reconcile("new", now)
        pool.settle()
        now += d.requeue_after or 0.5
    frozen = pool.state
    assert frozen.hash == "new" and frozen.progress == 40
    pool.policy = Policy(auto=False, percentage=20)
    for k in range(10):
        assert pool.reconcile("new", now + 100 * k).update == []
    assert pool.state == frozen and frozen.in_progress == "new"


def test_pending_node_blocks_forever_with_3s_recheck_and_no_status_write():
    pool = Pool(NODES10, Policy(auto=True, percentage=20), ComponentState("old", 100, True))
    pool.reconcile("new", T0)        # campaign starts, first batch of two nodes
    assert pool.pending == {"n00", "n01"}
    writes = pool.status_writes
    for k in range(1000):            # n00/n01 never come back
        d = pool.reconcile("new", T0 + 3 * k)
        assert d.requeue_after == 3.0 and d.status is None and not d.update
    assert pool.status_writes == writes and pool.state.progress == 0


def test_empty_pool_never_syncs():
    d = manage_update(ComponentState(), "h", Policy(auto=True), Resources(0, 0), T0)
    state = d.status
    for k in range(50):
        d = manage_update(state, "h", Policy(auto=True), Resources(0, 0), T0 + k)
        assert d.status is None
        if d.annotations:
            state = replace(state, **d.annotations)
    assert state.in_progress == "h" and not state.synced and state.progress == 0
    # A change on an empty synced pool: the annotation moves, the status keeps the old hash.
    d = manage_update(ComponentState("old", 100, True), "new", Policy(auto=True),
                      Resources(0, 0), T0)
    assert d.status is None and d.annotations == {"in_progress": "new", "last_time": ""}


def test_recheck_during_change_leaves_old_hash_in_status():
    d = manage_update(ComponentState("old", 100, True), "new", Policy(auto=True),
                      Resources(3, 0, recheck=True), T0)
    assert d.status is None and d.annotations["in_progress"] == "new" and d.requeue_after == 3.0


def test_default_batch_percentage_rolls_everything_at_once():
    pool = Pool(NODES10, Policy(auto=True), ComponentState("old", 100, True))
    d = pool.reconcile("new", T0)
    assert d.update == NODES10
    pool.settle()
    pool.reconcile("new", T0 + 1)
    assert pool.completions == [100] and pool.state.synced


def test_zero_percentage_stalls_instead_of_rolling():
    d = manage_update(ComponentState("old", 100, True), "new", Policy(True, 0, 1.0),
                      Resources(4, 0, stale=["a", "b", "c", "d"]), T0)
    assert not d.update and d.status is None and "division by zero" in d.note


def test_fast_forward_when_objects_already_current():
    assert rollout.desired_updated_delta(10, 7, 20, 0) == (1, 60, 3)
    assert rollout.desired_updated_delta(10, 10, 20, 0) == (0, 80, 4)  # step 7 then says 100


def test_component_status_is_omitempty():
    patch = rollout.component_status_patch("worker", ComponentState("abc", 0, False))
    assert patch == {"worker": "abc", "workerConfigSynced": None, "workerUpdateProgress": None}
    patch = rollout.component_status_patch("client", ComponentState("", 100, True))
    assert patch == {"client": None, "clientConfigSynced": True, "clientUpdateProgress": 100}


def test_policy_defaults_when_absent_and_maintenance_fields_ignored():
    assert rollout.policy_from_pool({"nodeManagerConfig": {}}, "hypervisor") == Policy(False, 100, 1.0)
    spec = {"nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {
        "autoUpdateHypervisor": True, "batchPercentage": 20, "batchInterval": "1m30s",
        "maxDuration": "1s", "maintenanceWindow": {"includes": ["2 2 * * *"]}}}}
    assert rollout.policy_from_pool(spec, "hypervisor") == Policy(True, 20, 90.0)
    assert rollout.policy_from_pool(spec, "worker").auto is False


@pytest.mark.parametrize("text,seconds", [("1s", 1.0), ("500ms", 0.5), ("2h45m", 9900.0),
                                          ("1.5s", 1.5), ("0", 0.0), ("bogus", 1.0), ("", 1.0),
                                          ("10", 1.0), ("3 s", 1.0)])
def test_parse_duration_like_go(text, seconds):
    assert rollout.parse_duration(text) == pytest.approx(seconds)


def test_with_no_floor_the_next_batch_is_due_once_the_interval_has_passed():
    """Upstream: after a batch the pool is requeued after max(interval, 3 s), but any event of the
    pool (its own status write is one) finds the next batch due once batchInterval has passed
    since the whole-second stamp. The lab's floor (default 3 s) holds it longer."""
    done = manage_update(ComponentState("h", 0, False, "h", ""), "h", Policy(True, 20, 1.0),
                         Resources(10, 2, stale=NODES10[2:]), T0 + 0.7, gap_floor=0.0)
    assert done.status.progress == 20 and done.annotations["last_time"] == rollout.rfc3339(T0)
    assert done.requeue_after == 3.0
    state = replace(done.status, last_time=done.annotations["last_time"])
    res = Resources(10, 2, stale=NODES10[2:])
    d = manage_update(state, "h", Policy(True, 20, 1.0), res, T0 + 0.9, gap_floor=0.0)
    assert d.update == [] and d.requeue_after == pytest.approx(0.1)
    assert manage_update(state, "h", Policy(True, 20, 1.0), res, T0 + 1.0, gap_floor=0.0).update \
        == NODES10[2:4]
    # The double's default floor: 3 s from the stamp, whatever the interval.
    assert manage_update(state, "h", Policy(True, 20, 1.0), res, T0 + 1.0).requeue_after == \
        pytest.approx(2.0)
    assert manage_update(state, "h", Policy(True, 20, 1.0), res, T0 + 3.0).update == NODES10[2:4]


def test_a_batch_time_that_is_no_rfc3339_time_stalls_the_campaign():
    res = Resources(10, 2, stale=NODES10[2:])
    d = manage_update(ComponentState("h", 20, False, "h", "yesterday"), "h", Policy(True, 20, 1.0),
                      res, T0 + 100)
    assert not d.update and d.status is None and d.annotations is None and d.requeue_after > 0
    # Go's RFC 3339 with an offset or fractions is a time like any other.
    for stamp in ("2027-01-15T16:00:00+08:00", "2027-01-15T08:00:00.250Z"):
        d = manage_update(ComponentState("h", 20, False, "h", stamp), "h", Policy(True, 20, 1.0),
                          res, rollout.parse_rfc3339("2027-01-15T08:00:10Z"))
        assert d.update == NODES10[2:4], stamp
