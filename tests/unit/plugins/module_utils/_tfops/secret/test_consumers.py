"""secret/consumers.py's PoolComponentConsumer without a cluster: its pool roll runs as a child
of the rotation's Context (what the roll warns reaches the rotation's result; #37 item 8), fails
as fast as a Deployment's (hypervisor Pods that do not start), and says whether it wrote before
its wait failed (#37 item 1). The roll itself (gpupool/rollout_task.py's RolloutTask) is a recording fake.
Which Pods are off target and the census of a stuck put-back."""
import copy

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import RolloutFailed
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.module import Context
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout_task
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret.consumers import PoolComponentConsumer, census, pods_off_target
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
    monkeypatch.setattr(rollout_task, "RolloutTask", Roll)
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


def _pod(name, secret=None, annotations=None, ready=True, deleting=False):
    spec = {"containers": [{"name": "c"}]}
    if secret:
        spec["imagePullSecrets"] = [{"name": secret}]
    meta = {"name": name, "annotations": annotations or {}}
    if deleting:
        meta["deletionTimestamp"] = "now"
    return {"metadata": meta, "spec": spec, "status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def test_pods_off_target():
    pods = [_pod("a", "new"), _pod("b", "old"), _pod("c", "new", ready=False), _pod("d", "old", deleting=True)]
    assert pods_off_target(pods, ("name", "new")) == [
        ("b", "does not reference Secret new (it references old)"), ("c", "not Ready")]
    pods = [_pod("a", "s", annotations={"k": "v1"}), _pod("b", "s", annotations={"k": "v0"})]
    assert pods_off_target(pods, ("annotation", "k", "v1", "s")) == [("b", "started before the Secret was updated")]


def test_in_place_verification_checks_what_each_pod_references_not_only_its_mark():
    """#37 item 5: a Pod restarted for the Secret's version (the mark) that reads a versioned copy
    of it, or no Secret at all, is not on the rotated Secret."""
    target = ("annotation", "k", "v1", "s")
    pods = [_pod("reads-s", "s", annotations={"k": "v1"}), _pod("reads-copy", "s-1a2b3c", annotations={"k": "v1"}),
            _pod("reads-nothing", annotations={"k": "v1"})]
    assert pods_off_target(pods, target) == [
        ("reads-copy", "does not reference Secret s (it references s-1a2b3c)"),
        ("reads-nothing", "does not reference Secret s (it references no Secret)")]
    env_target = ("env", "TFOPS_SECRET_VERSION_S", "v1", "s")
    hv = _pod("hv", "s-1a2b3c")
    hv["spec"]["containers"][0]["env"] = [{"name": "TFOPS_SECRET_VERSION_S", "value": "v1"}]
    assert pods_off_target([hv], env_target) == [("hv", "does not reference Secret s (it references s-1a2b3c)")]
    hv["spec"]["imagePullSecrets"] = [{"name": "s"}]
    assert pods_off_target([hv], env_target) == []


@pytest.mark.parametrize("where", ["env", "envFrom", "volume", "projected", "imagePullSecrets"])
def test_each_kind_of_reference_counts_and_names_what_is_read(where):
    spec = {"containers": [{"name": "c"}]}
    if where == "env":
        spec["containers"][0]["env"] = [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]
    elif where == "envFrom":
        spec["containers"][0]["envFrom"] = [{"secretRef": {"name": "s"}}]
    elif where == "volume":
        spec["volumes"] = [{"name": "v", "secret": {"secretName": "s"}}]
    elif where == "projected":
        spec["volumes"] = [{"name": "v", "projected": {"sources": [{"secret": {"name": "s"}}]}}]
    else:
        spec["imagePullSecrets"] = [{"name": "s"}]
    pod = {"metadata": {"name": "p", "annotations": {"k": "v1"}}, "spec": spec,
           "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    assert pods_off_target([pod], ("annotation", "k", "v1", "s")) == []
    assert pods_off_target([pod], ("annotation", "k", "v1", "t")) == [
        ("p", "does not reference Secret t (it references s)")]


def test_census_of_a_stuck_put_back():
    pods = [_pod("old-1", "old"), _pod("new-1", "new"), _pod("new-2", "new", ready=False),
            _pod("gone", "new", deleting=True)]
    assert census(pods, ("name", "new")) == (["new-2"], ["new-1"])
    marked = [_pod("a", "s", annotations={"k": "rotated"}), _pod("b", "s", annotations={"k": "restored"}),
              _pod("c", "s", annotations={"k": "restored"}, ready=False)]
    assert census(marked, ("annotation", "k", "rotated", "s")) == (["c"], ["a"])
