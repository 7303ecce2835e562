"""gpupool/interrupted.py: what an interrupted run's warden pauses (the pause itself, against the
lab's API server, is in test_runbooks.py's stopped-mid-pools tests)."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import cluster, interrupted


def pool(**status):
    return {"metadata": {"name": "tf-shared"}, "status": {"componentStatus": status}}


def test_only_campaigns_still_under_way_are_paused():
    rolling = pool(hypervisor="h2", hypervisorUpdateProgress=40, hypervisorConfigSynced=False,
                   worker="w1", workerUpdateProgress=100, workerConfigSynced=True)
    assert interrupted.under_way(rolling, ["hypervisor", "worker"]) == [("hypervisor", 40)]
    assert interrupted.under_way(pool(hypervisorConfigSynced=True, hypervisorUpdateProgress=100), ["hypervisor"]) == []


def test_the_pause_is_a_deadlines_recorded_as_the_collections():
    tfc = {"metadata": {"name": "tf", "annotations": {}},
           "spec": {"gpuPools": [{"name": "shared", "specTemplate": {"nodeManagerConfig": {
               "nodePoolRollingUpdatePolicy": {"autoUpdateHypervisor": True}}}}]}}
    paused = cluster.pause_transform("shared", ["hypervisor"])(tfc)
    policy = paused["spec"]["gpuPools"][0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
    assert policy["autoUpdateHypervisor"] is False
    assert cluster.paused_marker(paused) == {"shared": ["hypervisor"]}
    assert interrupted.HOOK.endswith("gpupool.interrupted:stop_rollouts")
