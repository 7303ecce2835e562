"""A pool that tensorfusion.ops paused at a deadline is a resumable warning, not a blocking rollout."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import findings
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster.info import slim_cluster


def picture(paused_annotation=None):
    annotations = {"ops.tensor-fusion.ai/paused": paused_annotation} if paused_annotation else {}
    tfc = {"metadata": {"name": "tf", "annotations": annotations},
           "spec": {"gpuPools": [{"name": "shared"}]}, "status": {"phase": "Updating"}}
    mid = {"hash": "old", "progress": 40, "synced": False, "in_progress": "new", "auto_update": False}
    done = {"hash": "h", "progress": 100, "synced": True, "in_progress": "", "auto_update": True}
    return {"namespace": "tensor-fusion-sys", "clusters": [slim_cluster(tfc)],
            "pools": [{"name": "tf-shared", "phase": "Updating", "ready_nodes": 4,
                       "components": {"hypervisor": mid, "worker": dict(done), "client": dict(done)}}],
            "gpunodes": [], "hypervisors": [], "controller": [{"name": "ctl", "namespace": "x", "replicas": 1,
                                                               "available": 1}],
            "alert_manager": [], "release": {"name": "r", "revision": 1, "status": "deployed"},
            "warning_events": [], "workloads": []}


def codes(data):
    return sorted((f["code"], f["severity"]) for f in findings.builtin_findings(data))


def test_slim_cluster_reads_the_marker():
    assert picture("shared:hypervisor")["clusters"][0]["paused"] == {"shared": ["hypervisor"]}


def test_a_rollout_paused_by_us_is_a_warning():
    assert codes(picture("shared:hypervisor")) == [("ROLLOUT_PAUSED", "warning")]


def test_a_marker_whose_flag_is_back_on_is_stale_and_ignored():
    data = picture("shared:hypervisor")
    data["pools"][0]["components"]["hypervisor"]["auto_update"] = True
    assert ("ROLLOUT_IN_PROGRESS", "blocking") in codes(data) and ("ROLLOUT_PAUSED", "warning") not in codes(data)


def test_a_rollout_in_progress_without_our_marker_blocks():
    assert ("ROLLOUT_IN_PROGRESS", "blocking") in codes(picture())
    assert ("POOL_NOT_RUNNING", "blocking") in codes(picture())
    assert ("CLUSTER_NOT_RUNNING", "blocking") in codes(picture())
