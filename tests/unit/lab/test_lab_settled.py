"""When ``lab up --tensorfusion`` may return: lab.tensorfusion.unsettled, the pure judgement."""
from lab.tensorfusion import unsettled


def pool(phase="Running", status=None, annotations=None, policy=None):
    return {"metadata": {"name": "tensor-fusion-shared", "annotations": annotations or {}},
            "spec": {"nodeManagerConfig": {"nodePoolRollingUpdatePolicy": policy or {}}},
            "status": {"phase": phase, "componentStatus": status or {}}}


def tfc(phase="Running"):
    return {"metadata": {"name": "tensor-fusion"}, "status": {"phase": phase}}


SYNCED = {"hypervisor": "aaaa", "hypervisorUpdateProgress": 100, "hypervisorConfigSynced": True}


def test_running_and_synced_is_settled():
    assert unsettled([tfc()], [pool(status=SYNCED, policy={"autoUpdateHypervisor": True})]) == []


def test_a_pool_or_cluster_not_running_is_named():
    assert unsettled([tfc("Updating")], [pool("Pending")]) == [
        "TensorFusionCluster tensor-fusion is Updating", "GPUPool tensor-fusion-shared is Pending"]
    assert unsettled([tfc()], []) == ["no GPUPool yet"]
    assert unsettled([{"metadata": {"name": "tensor-fusion"}}], [pool()]) == [
        "TensorFusionCluster tensor-fusion is no phase"]


def test_a_campaign_in_progress_is_not_settled_even_when_every_phase_is_running():
    """What the first run of the demo met: the chart's first hypervisor campaign at 80 %."""
    running = pool(status={"hypervisor": "bbbb", "hypervisorUpdateProgress": 80},
                   annotations={"tensor-fusion.ai/hypervisor-update-in-progress": "bbbb"},
                   policy={"autoUpdateHypervisor": True})
    assert unsettled([tfc()], [running]) == [
        "GPUPool tensor-fusion-shared: hypervisor campaign bbbb at 80%"]


def test_an_unsynced_hash_with_auto_update_on_is_a_campaign_about_to_start():
    waiting = pool(status={"hypervisor": "bbbb"}, policy={"autoUpdateHypervisor": True})
    assert unsettled([tfc()], [waiting]) == ["GPUPool tensor-fusion-shared: hypervisor not synced (0%)"]


def test_what_upstream_leaves_unsynced_for_ever_is_settled():
    """autoUpdate off: the hash is recorded and never synced (docs/operator-behaviour.md 3.3);
    a completed campaign leaves its annotation "" and a synced one is not running."""
    frozen = pool(status={**SYNCED, "worker": "cccc", "client": "dddd"},
                  annotations={"tensor-fusion.ai/hypervisor-update-in-progress": "",
                               "tensor-fusion.ai/worker-update-in-progress": ""},
                  policy={"autoUpdateHypervisor": True})
    assert unsettled([tfc()], [frozen]) == []
    abandoned = pool(status=SYNCED, annotations={"tensor-fusion.ai/hypervisor-update-in-progress": "old"})
    assert unsettled([tfc()], [abandoned]) == []
