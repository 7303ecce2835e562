"""gpupool/cluster.py's RolloutWait without a cluster: a rollout that makes no progress for
stall_timeout is Stalled (saying what is stuck), one that keeps moving is not; the wakeup that
makes the watcher re-check a quiet pool; a timeout gets the diagnosis. Time is a FakeTime in place
of the module's clock; the observer is a fake with the pool name and a canned diagnosis. The
paused marker: read per pool, written sorted, and round trips through plan_change."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import waiting
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput, WaitTimeout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import cluster
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import RolloutWait, Stalled, paused_marker, with_paused_marker
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.rollout_task import plan_change

from ansible_collections.tensorfusion.ops.tests.unit.plugins.kube_fakes import (
    Advance,
    FakeDynamic,
    FakeKube,
    FakeResource,
    FakeTime,
    event,
    patch_time,
)

from .test_rollout_task import params, template  # helpers shared with that file

POOL = "tf-pool-a"
OLD, NEW = "h-old", "h-new"


class FakeObserver:
    """What RolloutWait asks of a PoolObserver: the GPUPool's name and a diagnosis."""

    def __init__(self, diag=None):
        self.gpupool = POOL
        self.diagnosed = 0
        self.diag = diag or {
            "pending_nodes": ["gpu-3", "gpu-7"], "total_nodes": 10,
            "hypervisor_pods_not_ready": ["hypervisor-gpu-3: ImagePullBackOff (hv:9 not found)"],
            "hypervisor_restarts": [], "nodes_without_hypervisor_pod": ["gpu-7"],
            "warning_events": {"gpu-7": ["Pod FailedCreate: exceeded quota"]}}

    def diagnose(self):
        self.diagnosed += 1
        return self.diag

    def someone_away(self):
        return False

    def look_for_absences(self, force=False):
        self.looked = force


@pytest.fixture
def clock(monkeypatch):
    fake = FakeTime()
    patch_time(monkeypatch, fake, cluster, waiting)
    return fake


def gpupool(version=1, campaign=None, status_hash=OLD, progress=0, synced=True, comp="hypervisor"):
    annotations = {rollout.IN_PROGRESS % comp: campaign} if campaign else {}
    return {"metadata": {"name": POOL, "resourceVersion": str(version), "annotations": annotations},
            "status": {"phase": "Updating" if campaign else "Running", "componentStatus": {
                comp: status_hash, "%sUpdateProgress" % comp: progress, "%sConfigSynced" % comp: synced}}}


def objects(pool):
    return {(None, POOL): pool}


def waiter_for(stall_timeout=30, until_progress=100, comps=("hypervisor",), observer=None):
    before = gpupool()
    for comp in comps[1:]:
        before["status"]["componentStatus"].update({comp: OLD, "%sUpdateProgress" % comp: 0,
                                                    "%sConfigSynced" % comp: True})
    trackers = [rollout.CampaignTracker(c, before, changed=True) for c in comps]
    return RolloutWait(observer or FakeObserver(), trackers, stall_timeout, until_progress)


def test_no_campaign_for_the_stall_period_is_stalled_and_says_what_is_stuck(clock):
    observer = FakeObserver()
    waiter = waiter_for(stall_timeout=30, observer=observer)
    done, detail = waiter.check(objects(gpupool()))
    assert not done
    assert detail == "hypervisor: the operator has not started a campaign yet (status still shows hash h-old)"
    clock.advance(30)
    assert waiter.check(objects(gpupool())) == (False, detail), "not stalled at exactly stall_timeout"
    assert observer.diagnosed == 0
    clock.advance(1)
    with pytest.raises(Stalled) as caught:
        waiter.check(objects(gpupool()))
    assert caught.value.msg == (
        "rollout of GPUPool tf-pool-a made no progress for 30s (hypervisor: the operator has not "
        "started a campaign yet (status still shows hash h-old); no progress seen since the change): "
        "GPUNodes not Running: gpu-3, gpu-7. no hypervisor Pod exists on gpu-7. "
        "gpu-7: Pod FailedCreate: exceeded quota. "
        "hypervisor Pods not Ready: hypervisor-gpu-3: ImagePullBackOff (hv:9 not found)")
    assert caught.value.details["diagnostics"] is observer.diag
    assert caught.value.details["timeline"] == []
    assert observer.diagnosed == 1


def test_a_campaign_that_stops_moving_is_stalled_with_its_last_progress(clock):
    waiter = waiter_for(stall_timeout=30)
    waiter.check(objects(gpupool(2, campaign=NEW, status_hash=NEW, progress=0, synced=False)))
    clock.advance(20)
    waiter.check(objects(gpupool(3, campaign=NEW, status_hash=NEW, progress=40, synced=False)))
    moved_at = waiter.timeline[-1]["time"]
    # the same status again (a resync, another field's event) is not progress
    clock.advance(25)
    waiter.check(objects(gpupool(4, campaign=NEW, status_hash=NEW, progress=40, synced=False)))
    clock.advance(6)
    with pytest.raises(Stalled) as caught:
        waiter.check(objects(gpupool(5, campaign=NEW, status_hash=NEW, progress=40, synced=False)))
    assert caught.value.msg.startswith(
        "rollout of GPUPool tf-pool-a made no progress for 30s (hypervisor: campaign h-new at 40%%; "
        "last moved to 40%% at %s): GPUNodes not Running: gpu-3, gpu-7" % moved_at)
    assert [(e["progress"], e["seconds"]) for e in caught.value.details["timeline"]] == [(0, 0.0), (40, 20.0)]


def test_a_rollout_that_keeps_progressing_is_not_stalled(clock):
    observer = FakeObserver()
    waiter = waiter_for(stall_timeout=30, observer=observer)
    assert not waiter.check(objects(gpupool()))[0]
    results = []
    for step, progress in enumerate((0, 20, 40, 60, 80, 100)):
        clock.advance(25)  # each move comes within the stall period, 150 s in all
        results.append(waiter.check(objects(gpupool(10 + step, campaign=NEW, status_hash=NEW,
                                                    progress=progress, synced=progress == 100))))
    assert [done for done, _detail in results] == [False] * 5 + [True]
    assert results[-1][1] == "hypervisor: campaign h-new at 100%"
    assert observer.diagnosed == 0
    assert [e["progress"] for e in waiter.timeline] == [0, 20, 40, 60, 80, 100]
    assert [e["synced"] for e in waiter.timeline] == [False] * 5 + [True]
    assert waiter.done_at == {"hypervisor": 150.0}


def test_a_finished_rollout_is_never_stalled(clock):
    waiter = waiter_for(stall_timeout=30)
    done_pool = gpupool(2, campaign=NEW, status_hash=NEW, progress=100, synced=True)
    assert waiter.check(objects(done_pool))[0]
    clock.advance(3600)
    assert waiter.check(objects(done_pool))[0]


def test_one_component_stuck_while_another_moves_is_not_stalled(clock):
    """Progress of any tracked component counts as a move."""
    waiter = waiter_for(stall_timeout=30, comps=("hypervisor", "worker"))

    def pool(version, hv_progress):
        out = gpupool(version, campaign=NEW, status_hash=NEW, progress=hv_progress, synced=False)
        out["status"]["componentStatus"].update(worker=OLD, workerUpdateProgress=0, workerConfigSynced=True)
        return out

    for step in range(5):
        waiter.check(objects(pool(step, step * 20)))
        clock.advance(20)
    # worker never started a campaign; hypervisor moved every 20 s
    done, detail = waiter.check(objects(pool(9, 80)))
    assert not done
    assert detail == ("hypervisor: campaign h-new at 80%; worker: the operator has not started a "
                      "campaign yet (status still shows hash h-old)")
    clock.advance(31)
    with pytest.raises(Stalled, match="worker: the operator has not started a campaign yet"):
        waiter.check(objects(pool(10, 80)))


def test_without_stall_timeout_nothing_stalls(clock):
    observer = FakeObserver()
    waiter = waiter_for(stall_timeout=None, observer=observer)
    waiter.check(objects(gpupool()))
    clock.advance(10 ** 6)
    assert waiter.check(objects(gpupool()))[0] is False
    assert observer.diagnosed == 0
    assert waiter.wakeup() == 10, "a wait that does not move looks who is away every 10 s"


def test_wakeup_is_when_the_stall_period_would_end(clock):
    waiter = waiter_for(stall_timeout=8)
    waiter.check(objects(gpupool()))
    assert waiter.wakeup() == pytest.approx(8.1)
    clock.advance(3)
    assert waiter.wakeup() == pytest.approx(5.1)
    clock.advance(5)
    assert waiter.wakeup() == 0.5, "never less than half a second"
    waiter.check(objects(gpupool(2, campaign=NEW, status_hash=NEW, progress=10, synced=False)))
    assert waiter.wakeup() == pytest.approx(8.1), "a move starts the period again"
    assert waiter_for(stall_timeout=600).wakeup() == 10, "and at least every 10 s (who is away)"


def test_until_progress_is_reached_before_the_campaign_ends(clock):
    waiter = waiter_for(stall_timeout=30, until_progress=50)
    assert not waiter.check(objects(gpupool(2, campaign=NEW, status_hash=NEW, progress=40, synced=False)))[0]
    assert waiter.check(objects(gpupool(3, campaign=NEW, status_hash=NEW, progress=60, synced=False)))[0]
    clock.advance(3600)
    assert waiter.check(objects(gpupool(3, campaign=NEW, status_hash=NEW, progress=60, synced=False)))[0], \
        "reached: no stall"


def test_a_deleted_gpupool_ends_the_wait(clock):
    waiter = waiter_for()
    with pytest.raises(InvalidInput, match="GPUPool tf-pool-a was deleted during the rollout"):
        waiter.check({})


# ---- through the watcher (kube_fakes' scripted client) --------------------------------------------

def pool_watcher(clock, lists, watches=(), more_watches=None):
    dynamic = FakeDynamic(lists=lists, watches=watches, more_watches=more_watches)
    kube = FakeKube(dynamic, clock=clock)
    watcher = ObjectWatcher(kube, FakeResource("gpupools", "GPUPool", namespaced=False,
                                               prefix="/apis/tensor-fusion.ai/v1"), name=POOL)
    return dynamic, watcher


def test_a_quiet_pool_is_found_stalled_by_the_wakeup_not_at_the_deadline(clock):
    dynamic, watcher = pool_watcher(
        clock, lists=[("10", [gpupool()])],
        more_watches=lambda kwargs: [Advance(clock, kwargs["timeout"])])  # no event at all
    waiter = waiter_for(stall_timeout=30)
    with pytest.raises(Stalled, match="made no progress for 30s"):
        waiter.run(watcher, Deadline(timeout=600, clock=clock))
    # watches of 10 s (who is away is looked at meanwhile) up to the end of the stall period,
    # then a short one past it
    assert [c["timeout"] for c in dynamic.watch_calls] == [10, 10, 10, 1]
    assert clock.now - 1000 == 31


def test_a_progressing_pool_through_the_watcher_completes(clock):
    steps = []
    for index, progress in enumerate((0, 25, 50, 75, 100)):
        steps += [Advance(clock, 20), event("MODIFIED", gpupool(11 + index, campaign=NEW, status_hash=NEW,
                                                                progress=progress, synced=progress == 100))]
    dynamic, watcher = pool_watcher(clock, lists=[("10", [gpupool()])], watches=[steps])
    observer = FakeObserver()
    waiter = waiter_for(stall_timeout=30, observer=observer)
    assert waiter.run(watcher, Deadline(timeout=600, clock=clock)) == "hypervisor: campaign h-new at 100%"
    assert observer.diagnosed == 0
    assert [e["progress"] for e in waiter.timeline] == [0, 25, 50, 75, 100]


def test_a_timeout_carries_the_diagnosis_and_timeline(clock):
    steps = [Advance(clock, 20), event("MODIFIED", gpupool(11, campaign=NEW, status_hash=NEW, progress=0,
                                                           synced=False))]
    # progress every 20 s (never a stall) but slower than the deadline
    more = [0]

    def moving(kwargs):
        more[0] += 10
        return [Advance(clock, 20), event("MODIFIED", gpupool(20 + more[0], campaign=NEW, status_hash=NEW,
                                                              progress=more[0], synced=False))]

    dynamic, watcher = pool_watcher(clock, lists=[("10", [gpupool()])], watches=[steps], more_watches=moving)
    observer = FakeObserver()
    waiter = waiter_for(stall_timeout=30, observer=observer)
    with pytest.raises(WaitTimeout) as caught:
        waiter.run(watcher, Deadline(timeout=90, clock=clock))
    assert caught.value.msg.startswith("timed out (timeout of 90s) waiting for gpupools (metadata.name=tf-pool-a): "
                                       "hypervisor: campaign h-new at ")
    assert caught.value.msg.endswith(". GPUNodes not Running: gpu-3, gpu-7. no hypervisor Pod exists on gpu-7. "
                                     "gpu-7: Pod FailedCreate: exceeded quota. hypervisor Pods not Ready: "
                                     "hypervisor-gpu-3: ImagePullBackOff (hv:9 not found)")
    assert caught.value.details["diagnostics"] is observer.diag
    assert caught.value.details["timeline"] is waiter.timeline and len(waiter.timeline) >= 4
    assert observer.diagnosed == 1


def test_describe_diagnosis_of_a_healthy_pool():
    assert cluster.describe_diagnosis({"pending_nodes": [], "total_nodes": 3, "hypervisor_pods_not_ready": [],
                                       "hypervisor_restarts": [], "nodes_without_hypervisor_pod": [],
                                       "warning_events": {}}) == \
        "no GPUNode is Pending and every hypervisor Pod is Ready"


# ---- hypervisor Pods that do not start (a Secret rotation's pool roll) ----------------------------

class PodsObserver(FakeObserver):
    """A FakeObserver whose hypervisor Pods the test sets (``pods``); counts the lists."""

    def __init__(self):
        super().__init__()
        self.pods, self.listed, self.not_ready = [], 0, {}

    def hypervisor_pods(self):
        self.listed += 1
        return self.pods

    def nodes_not_ready(self):
        return dict(self.not_ready)


def hv_pod(name, reason=None):
    state = {"waiting": {"reason": reason, "message": "Back-off pulling image"}} if reason else {"running": {}}
    return {"metadata": {"name": name}, "spec": {"nodeName": name[len("hypervisor-"):]},
            "status": {"containerStatuses": [{"name": "hypervisor", "state": state}],
                       "conditions": [{"type": "Ready", "status": "False" if reason else "True"}]}}


def test_hypervisor_pods_that_do_not_start_end_the_wait_after_the_failure_period(clock):
    observer = PodsObserver()
    waiter = waiter_for(stall_timeout=None, observer=observer)
    waiter.pods_fail_after = 30
    observer.pods = [hv_pod("hypervisor-gpu-0"), hv_pod("hypervisor-gpu-1", "ImagePullBackOff")]
    moving = objects(gpupool(2, campaign=NEW, status_hash=NEW, progress=50, synced=False))
    assert waiter.check(moving)[0] is False and observer.listed == 1
    assert waiter.wakeup() == 10, "the Pods are looked at every POD_CHECK_SECONDS"
    clock.advance(5)
    waiter.check(moving)
    assert observer.listed == 1, "not more often than every POD_CHECK_SECONDS"
    clock.advance(20)
    waiter.check(moving)  # failing for 25 s: not yet
    clock.advance(10)
    with pytest.raises(cluster.RolloutFailed) as caught:
        waiter.check(moving)
    msg = caught.value.msg
    assert msg.startswith("rollout of GPUPool tf-pool-a cannot finish: its hypervisor Pods do not start: "
                          "hypervisor-gpu-1 hypervisor on node gpu-1: ImagePullBackOff (Back-off pulling image) for 35s. ")
    assert "GPUNodes not Running: gpu-3, gpu-7" in msg, "the diagnosis says what else is stuck"
    assert caught.value.details["pods_not_ready"] == [
        "hypervisor-gpu-1 hypervisor on node gpu-1: ImagePullBackOff (Back-off pulling image) for 35s"]


def test_a_batch_node_that_is_not_ready_ends_the_wait_after_the_failure_period(clock):
    """#45 item 4: a node of the batch whose kubelet went away holds the batch forever."""
    observer = PodsObserver()
    waiter = waiter_for(stall_timeout=None, observer=observer)
    waiter.pods_fail_after = 30
    observer.not_ready = {"node gpu-3": "is NotReady (NodeStatusUnknown: Kubelet stopped posting node status.)"}
    moving = objects(gpupool(2, campaign=NEW, status_hash=NEW, progress=50, synced=False))
    waiter.check(moving)
    clock.advance(35)
    with pytest.raises(cluster.RolloutFailed) as caught:
        waiter.check(moving)
    assert "its hypervisor Pods do not start or their nodes are not Ready: node gpu-3 is NotReady " \
           "(NodeStatusUnknown: Kubelet stopped posting node status.) for 35s" in caught.value.msg


def test_not_ready_nodes_are_the_kubernetes_nodes_of_gpunodes_not_running():
    class Kube:
        def __init__(self, nodes, forbidden=False):
            self.nodes, self.forbidden, self.got = nodes, forbidden, []

        def resource(self, kind, **_kw):
            return type("Resource", (), {"kind": kind, "get": None})()

        def call(self, verb, desc, fn, **kw):
            if self.forbidden:
                raise cluster.Forbidden("nodes is forbidden")
            self.got.append(kw["name"])
            return type("R", (), {"to_dict": lambda _s, n=self.nodes[kw["name"]]: n})()

    def node(status, reason="KubeletReady"):
        return {"status": {"conditions": [{"type": "Ready", "status": status, "reason": reason, "message": "m"}]}}

    def gpunode(name, phase):
        return {"metadata": {"name": name}, "status": {"phase": phase}}

    kube = Kube({"a": node("True"), "b": node("Unknown", "NodeStatusUnknown")})
    observer = cluster.PoolObserver(kube, "tf-pool")
    observer.gpunodes = lambda cached=False: [gpunode("a", "Pending"), gpunode("b", "Pending"), gpunode("c", "Running")]
    assert observer.nodes_not_ready() == {"node b": "is NotReady (NodeStatusUnknown: m)"}
    assert kube.got == ["a", "b"], "only the nodes of GPUNodes not Running are read"
    denied = cluster.PoolObserver(Kube({}, forbidden=True), "tf-pool")
    denied.gpunodes = observer.gpunodes
    assert denied.nodes_not_ready() == {} and denied.nodes_not_ready() == {}
    assert len(denied.notes) == 1 and "not watched" in denied.notes[0]


def test_a_pod_that_recovers_is_forgotten_and_without_the_option_pods_are_not_looked_at(clock):
    observer = PodsObserver()
    waiter = waiter_for(stall_timeout=None, observer=observer)
    waiter.pods_fail_after = 30
    moving = objects(gpupool(2, campaign=NEW, status_hash=NEW, progress=50, synced=False))
    observer.pods = [hv_pod("hypervisor-gpu-1", "ImagePullBackOff")]
    waiter.check(moving)
    clock.advance(20)
    observer.pods = [hv_pod("hypervisor-gpu-1")]  # pulled on a retry
    waiter.check(moving)
    clock.advance(20)
    observer.pods = [hv_pod("hypervisor-gpu-1", "CrashLoopBackOff")]
    waiter.check(moving)
    clock.advance(20)
    assert waiter.check(moving)[0] is False, "failing for 20 s since it came back: not yet"
    plain = PodsObserver()
    plain.pods = observer.pods
    untouched = waiter_for(stall_timeout=None, observer=plain)
    untouched.check(moving)
    clock.advance(3600)
    untouched.check(moving)
    assert plain.listed == 0 and untouched.wakeup() == 10
    worker_only = waiter_for(stall_timeout=None, comps=("worker",), observer=plain)
    worker_only.__init__(plain, worker_only.trackers, None, 100, pods_fail_after=30)
    assert worker_only.pods_fail_after is None, "only a hypervisor campaign has hypervisor Pods to judge"


# ---- the marker on the TensorFusionCluster -------------------------------------------------------

def tfc(annotation=None):
    annotations = {rollout.PAUSED_BY_US: annotation} if annotation is not None else {}
    return {"metadata": {"name": "tf", "annotations": annotations}}


def test_marker_text_is_read_per_pool():
    assert paused_marker(tfc("shared:hypervisor,worker;batch:client")) == {
        "shared": ["hypervisor", "worker"], "batch": ["client"]}
    assert paused_marker(tfc()) == {}
    assert paused_marker({"metadata": {"name": "tf"}}) == {}
    assert paused_marker(tfc("")) == {}


def test_marker_is_written_sorted_and_other_pools_kept():
    obj = with_paused_marker(tfc("shared:client"), "batch", ["worker", "hypervisor", "worker"])
    assert obj["metadata"]["annotations"][rollout.PAUSED_BY_US] == "batch:hypervisor,worker;shared:client"


def test_an_empty_marker_removes_the_pool_and_then_the_annotation():
    obj = with_paused_marker(tfc("batch:worker;shared:client"), "batch", [])
    assert obj["metadata"]["annotations"][rollout.PAUSED_BY_US] == "shared:client"
    obj = with_paused_marker(obj, "shared", [])
    assert rollout.PAUSED_BY_US not in obj["metadata"]["annotations"]


def test_marker_round_trips_through_plan_change():
    obj = tfc("shared:hypervisor")
    marker = paused_marker(obj).get("shared", [])
    _new, _changed, after = plan_change(params("paused"), template(hv=False, worker=True), marker)
    obj = with_paused_marker(obj, "shared", after)
    assert paused_marker(obj) == {"shared": ["hypervisor", "worker"]}
