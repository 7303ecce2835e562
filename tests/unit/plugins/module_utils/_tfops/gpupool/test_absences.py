"""gpupool/absences.py: who was away while a rollout waited, and for how long (pure parts)."""
import datetime

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import absences

T0 = datetime.datetime(2026, 12, 7, 2, tzinfo=datetime.timezone.utc)


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_an_absence_is_said_with_its_length_and_one_still_going_on_too():
    clock = Clock()
    tracker = absences.Absences(clock=clock, wall=lambda: T0 + datetime.timedelta(seconds=clock.now))
    tracker.saw(absences.OPERATOR, True)
    tracker.saw(absences.OPERATOR, False, "its controller Deployment tf has no Ready Pod")
    clock.now += 10
    tracker.saw(absences.OPERATOR, False, "ignored: the first why stays")
    clock.now += 52
    tracker.saw(absences.OPERATOR, True)
    tracker.saw(absences.CONTROLLER_MANAGER, False, "its leader Lease was last renewed 40s before")
    clock.now += 20
    first, second = tracker.notes()
    assert first == ("the TensorFusion operator (its controller and the webhook its Pods serve) was away for 62s while this task waited (from "
                     "2026-12-07T02:01:40.000000Z): its controller Deployment tf has no Ready Pod")
    assert second.startswith("kube-controller-manager was away for 20s and still is while this task waited")
    assert absences.Absences().notes() == []


def test_the_operator_is_up_with_a_ready_replica():
    ready = {"metadata": {"name": "tf-controller"}, "status": {"readyReplicas": 1}}
    assert absences.operator_present([ready]) == (True, "its controller Deployment tf-controller has no Ready Pod")
    assert absences.operator_present([dict(ready, status={})])[0] is False
    assert absences.operator_present([]) == (False, "no controller Deployment (label tensor-fusion.ai/component=operator)")


def test_the_controller_manager_is_up_while_its_leader_renews():
    lease = {"spec": {"renewTime": "2026-12-07T02:00:00.000000Z", "leaseDurationSeconds": 15}}
    assert absences.controller_manager_present(lease, T0 + datetime.timedelta(seconds=20))[0] is True
    away = absences.controller_manager_present(lease, T0 + datetime.timedelta(seconds=45))
    assert away == (False, "its leader Lease was last renewed 45s before (at 2026-12-07T02:00:00.000000Z)")
    assert absences.controller_manager_present({"spec": {}}, T0)[0] is False
