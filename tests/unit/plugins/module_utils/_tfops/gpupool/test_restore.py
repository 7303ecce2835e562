"""A rollback restores the whole pool spec its restore point captured: componentConfig and the
rolling policy (batchPercentage, batchInterval, the autoUpdate flags), and says what it restored
field by field (Pod templates named, never shown); pure functions of gpupool/restore.py, and the
restore plan that takes masked secrets back from the cluster."""
import copy
import json

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import restore
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.restore import plan_cluster
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import paused_marker
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.rollout import PAUSED_BY_US

from ..helm.test_snapshots import KEY  # helpers shared with that file


def template(image="hv:1", pct=17, interval="1s", auto=True, license_value="LIC"):
    return {"componentConfig": {"hypervisor": {"image": image},
                                "worker": {"podTemplate": {"template": {"spec": {"containers": [
                                    {"name": "w", "env": [{"name": "TF_LICENSE", "value": license_value}]}]}}}}},
            "nodeManagerConfig": {"defaultVendor": "NVIDIA",
                                  "nodePoolRollingUpdatePolicy": {"autoUpdateHypervisor": auto, "batchPercentage": pct,
                                                                  "batchInterval": interval, "maxDuration": "10m"}},
            "capacityConfig": {"oversubscription": {"tflopsOversellRatio": 500}}}


def tfc(spec_template, paused=None):
    obj = {"metadata": {"name": "tensor-fusion", "annotations": {}},
           "spec": {"gpuPools": [{"name": "shared", "specTemplate": spec_template}]}}
    if paused:
        obj["metadata"]["annotations"][PAUSED_BY_US] = paused
    return obj


def test_a_policy_only_difference_is_restored_without_a_campaign():
    saved, live = tfc(template(pct=17)), tfc(template(pct=34, interval="9s"))
    [(pool, before, after, changed, gpupool)] = restore.plan_cluster(saved, live)
    assert (pool, changed, gpupool) == ("shared", [], "tensor-fusion-shared"), "no hash moves: no campaign"
    assert after["policy"]["batchPercentage"] == 17 and before["policy"]["batchPercentage"] == 34
    assert rollout.field_changes(before, after) == [
        {"field": "batchInterval", "from": "9s", "to": "1s"}, {"field": "batchPercentage", "from": 34, "to": 17}]
    assert restore.plan_cluster(saved, copy.deepcopy(saved)) == []


def test_the_restored_template_keeps_every_other_field_of_the_live_pool():
    live = template(image="hv:2", pct=50, auto=False)
    live["capacityConfig"] = {"oversubscription": {"tflopsOversellRatio": 700}}  # changed since
    restored = rollout.pool_view(template(image="hv:1", pct=17))
    new = restore.restored_template(live, restored)
    assert new["componentConfig"]["hypervisor"]["image"] == "hv:1"
    assert new["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"] == {
        "autoUpdateHypervisor": True, "batchPercentage": 17, "batchInterval": "1s", "maxDuration": "10m"}
    assert new["capacityConfig"]["oversubscription"]["tflopsOversellRatio"] == 700
    assert new["nodeManagerConfig"]["defaultVendor"] == "NVIDIA"
    assert live["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"] == 50, "not changed in place"


def test_the_write_resumes_a_paused_pool_and_clears_only_what_runs_again():
    restored = rollout.pool_view(template(image="hv:1", auto=False))
    live = tfc(template(image="hv:2", auto=False), paused="shared:hypervisor,worker")
    written = restore._restore_pool("shared", restored, resume=True)(copy.deepcopy(live))
    policy = written["spec"]["gpuPools"][0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
    assert policy["autoUpdateHypervisor"] is True
    assert paused_marker(written) == {"shared": ["worker"]}, "worker's flag stays off: still paused"
    kept = restore._restore_pool("shared", restored)(copy.deepcopy(live))
    assert paused_marker(kept) == {"shared": ["hypervisor", "worker"]}


def test_a_snapshot_without_a_policy_restores_none():
    bare = template()
    del bare["nodeManagerConfig"]
    view = rollout.pool_view(bare)
    assert view["policy"] is None
    new = restore.with_restored(template(pct=34), view)
    assert "nodePoolRollingUpdatePolicy" not in new["nodeManagerConfig"]


def pool_tfc(env_value, image="hv:1"):
    return {"metadata": {"name": "tensor-fusion"}, "spec": {"gpuPools": [{"name": "shared", "specTemplate": {
        "componentConfig": {"hypervisor": {"image": image},
                            "worker": {"podTemplate": {"template": {"spec": {"containers": [
                                {"name": "w", "env": [{"name": "TF_LICENSE", "value": env_value}]}]}}}}},
        "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"autoUpdateHypervisor": True}}}}]}}


def test_restore_plan_takes_masked_secrets_from_the_cluster_or_refuses():
    saved = snapshots.mask_cluster(pool_tfc("LIC-1", "hv:old"), KEY)
    assert "LIC-1" not in json.dumps(saved)
    assert redact.value_hash("LIC-1") not in json.dumps(saved), "keyed, not a bare hash"
    [(pool, _before, after, changed, gpupool)] = plan_cluster(saved, pool_tfc("LIC-1", "hv:new"), KEY)
    assert (pool, changed, gpupool) == ("shared", ["hypervisor"], "tensor-fusion-shared")
    assert after["componentConfig"]["hypervisor"]["image"] == "hv:old"
    assert after["componentConfig"]["worker"]["podTemplate"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "LIC-1"
    assert plan_cluster(saved, pool_tfc("LIC-1", "hv:old"), KEY) == []
    with pytest.raises(InvalidInput):
        plan_cluster(saved, pool_tfc("LIC-2", "hv:new"), KEY)
    with pytest.raises(InvalidInput):  # another key's fingerprint matches nothing
        plan_cluster(saved, pool_tfc("LIC-1", "hv:new"), signing.BundleKey(b"o" * 32))
    # A bundle taken before keyed fingerprints (bare sha256, allow_unsigned) still restores.
    legacy = redact.mask_object(snapshots.clean_object(pool_tfc("LIC-1", "hv:old")))
    [(_pool, _before, after, _changed, _gp)] = plan_cluster(legacy, pool_tfc("LIC-1", "hv:new"))
    assert after["componentConfig"]["worker"]["podTemplate"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "LIC-1"
