"""gpupool/stale.py: a TensorFusionCluster whose status the operator left behind (#47 (2))."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import findings
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import stale

from ..cluster.test_findings import codes, healthy


def left_behind(data=None):
    data = data or healthy()
    data["clusters"][0].update(phase="Updating", pools=["shared"], conditions=[
        {"type": "Ready", "status": "False", "reason": "ResourcesUpdated"}])
    return data


def test_an_updating_cluster_whose_pools_are_settled_is_stale_with_the_cure():
    data = left_behind()
    why = stale.stale(data["clusters"][0], data["pools"])
    assert why.startswith("TensorFusionCluster tf is Updating (Ready False, ResourcesUpdated) although its "
                          "GPUPool tf-shared is Running with no rollout in progress")
    assert stale.NUDGE_ANNOTATION in why
    # A warning instead of the blocking CLUSTER_NOT_RUNNING: nothing is rolling.
    assert codes(data) == [("CLUSTER_STATUS_STALE", "warning")]


@pytest.mark.parametrize("mutate", [
    lambda d: d["pools"][0].update(phase="Updating"),
    lambda d: d["pools"][0]["components"]["hypervisor"].update(synced=False),
    lambda d: d["pools"][0]["components"]["hypervisor"].update(in_progress="new-hash"),
    lambda d: d["clusters"][0].update(conditions=[{"type": "Ready", "status": "False", "reason": "NewCreation"}]),
    lambda d: d["clusters"][0].update(phase="Pending"),
    lambda d: d["clusters"][0].update(pools=["shared", "other"]),
])
def test_a_cluster_not_running_for_a_reason_of_its_own_is_not_stale(mutate):
    data = left_behind()
    mutate(data)
    assert stale.stale(data["clusters"][0], data["pools"]) is None
    if data["clusters"][0]["phase"] != "Running":
        assert ("CLUSTER_NOT_RUNNING", "blocking") in [(f["code"], f["severity"]) for f in findings.builtin_findings(data)]


def test_a_running_cluster_is_never_stale():
    data = healthy()
    assert stale.stale(dict(data["clusters"][0], pools=["shared"]), data["pools"]) is None
