"""secret/consumers.py's PoolComponentConsumer without a cluster: its pool roll runs as a child
of the rotation's Context (what the roll warns reaches the rotation's result; #37 item 8), fails
as fast as a Deployment's (hypervisor Pods that do not start), and says whether it wrote before
its wait failed (#37 item 1). The roll itself (gpupool/task.py's RolloutTask) is a recording fake."""
import copy

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import RolloutFailed
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.module import Context
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import task as gpupool_task
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret.consumers import PoolComponentConsumer
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.decisions import FATAL_FOR_SECONDS

from ansible_collections.tensorfusion.ops.tests.unit.plugins.kube_fakes import FakeDynamic, FakeKube

TFC = {"metadata": {"name": "tf"}, "spec": {"gpuPools": [{"name": "shared", "specTemplate": {
    "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"autoUpdateHypervisor": True}},
    "componentConfig": {"hypervisor": {"image": "hv:1", "podTemplate": {"template": {"spec": {
        "containers": [{"name": "hv"}], "imagePullSecrets": [{"name": "reg"}]}}}}}}}]}}


class Editor:
    name = "tf"

    def read(self):
        return copy.deepcopy(TFC)


class Roll:
    """RolloutTask's stand-in: records its Context and options, warns, writes, and fails when told."""

    seen = []
    fail = None

    def __init__(self, ctx, params, template_change=None, pods_fail_after=None):
        self.ctx, self.params = ctx, params
        self.template_change, self.pods_fail_after = template_change, pods_fail_after
        Roll.seen.append(self)

    def run(self):
        self.ctx.warn("pool shared: from the roll")
        self.ctx.kube.writes += 1  # the TensorFusionCluster written
        if Roll.fail is not None:
            raise Roll.fail
        return {"changed": True}


@pytest.fixture
def rotation(monkeypatch):
    monkeypatch.setattr(gpupool_task, "RolloutTask", Roll)
    Roll.seen, Roll.fail = [], None
    kube = FakeKube(FakeDynamic())
    ctx = Context(kube=kube, deadline=Deadline(timeout=600))
    consumer = PoolComponentConsumer(ctx, "tf", "shared", "hypervisor", {"namespace": "tensor-fusion-sys"})
    consumer.editor = Editor()
    return ctx, consumer


def test_the_pool_roll_is_a_child_of_the_rotation_and_its_warnings_reach_the_result(rotation):
    ctx, consumer = rotation
    deadline = Deadline(timeout=120)
    assert consumer.repoint("reg", "reg-1a2b", deadline) is True
    [roll] = Roll.seen
    assert roll.ctx is not ctx and roll.ctx.kube is ctx.kube and roll.ctx.deadline is deadline
    assert ctx.warnings == ["pool shared: from the roll"], "the roll's warning is the rotation's"
    assert roll.pods_fail_after == FATAL_FOR_SECONDS, "as fast as a Deployment's new Pods"
    changed = roll.template_change(TFC["spec"]["gpuPools"][0]["specTemplate"])
    assert changed["componentConfig"]["hypervisor"]["podTemplate"]["template"]["spec"]["imagePullSecrets"] == [
        {"name": "reg-1a2b"}]
    assert consumer.wrote is True


def test_a_roll_that_wrote_and_then_failed_says_so(rotation):
    ctx, consumer = rotation
    Roll.fail = RolloutFailed("rollout of GPUPool tf-shared cannot finish: its hypervisor Pods do not start: ...")
    with pytest.raises(RolloutFailed):
        consumer.repoint("reg", "reg-1a2b", Deadline(timeout=120))
    assert consumer.wrote is True, "the rotation must put it back and list it as modified"
    assert ctx.warnings == ["pool shared: from the roll"], "also when it fails"


def test_nothing_to_change_runs_no_roll_and_writes_nothing(rotation):
    _ctx, consumer = rotation
    assert consumer.repoint("absent", "reg-1a2b", Deadline(timeout=120)) is False
    assert Roll.seen == [] and consumer.wrote is False
