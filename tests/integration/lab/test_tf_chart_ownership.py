"""The chart owns the TensorFusionCluster, the pools step owns its pools: the upgrade runbook from
the older to the newer chart (whose rendering of the pool differs: new default images, a new
ProviderConfig) keeps what was set on the live pool, rolls each pool exactly once and only in the
pools step, and a later chart upgrade of an unrelated value reverts nothing. On this package's lab,
whose release is not in tensor-fusion-sys, with helm 3 and with helm 4."""
import re
import time
from datetime import datetime

import pytest

from lab import paths
from lab import tensorfusion as tf

from ..ansible_runner import run_playbook
from .conftest import NS, POOL

HV = "tensorfusion/tensor-fusion-hypervisor:"
STATUS_WRITE = re.compile(r"status-write pool=(\S+) component=(\S+) hash=(\S+) progress=(\d+) "
                          r"synced=\S+ sent=([0-9.]+)")


@pytest.fixture
def runbook(tf_lab, tfx, tmp_path):
    """Variables of a run against this lab, which starts from chart 1.8.6 installed by plain helm
    (as before this collection: the pool then is the chart's rendering) and settled."""
    tf.helm_install(tf_lab, tf.V1)
    tfx.knobs(batchGapFloorSeconds="1")
    tfx.wait_pool(lambda p: p["status"].get("phase") == "Running" and
                  p["status"]["componentStatus"].get("hypervisorConfigSynced") is True, timeout=180)
    yield {"tfops_kubeconfig": tf_lab["kubeconfig"], "tfops_namespace": NS,
           "tfops_chart_repo": tf_lab["tensorfusion"]["chart_repo"], "tfops_chart_version": tf.V2,
           "tfops_helm_binary": str(paths.helm_binary("3")),
           "tfops_snapshot_dir": str(tmp_path / "snapshots"), "tfops_artifacts_dir": str(tmp_path / "artifacts"),
           "tfops_verify_acceptance_pod": False}
    tfx.knobs(batchGapFloorSeconds=None)


def campaigns_since(tf_lab, since, pool=POOL, component="hypervisor"):
    """{hash: epoch of its first status write with progress} from the double's log: the
    campaigns that moved nodes after ``since``."""
    seen = {}
    log = paths.Path(tf_lab["state_dir"]) / "logs" / "tf-operator.log"
    for line in log.read_text().splitlines():
        match = STATUS_WRITE.search(line)
        if not match or match.group(1) != pool or match.group(2) != component:
            continue
        sent, progress = float(match.group(5)), int(match.group(4))
        if sent >= since and progress > 0:
            seen.setdefault(match.group(3), sent)
    return seen


def report(run):
    rep = run.task_results("Write the report")
    assert not rep.get("failed"), rep
    return rep["record"]


def step_started(record, name):
    step = [s for s in record["steps"] if s["name"] == name][0]
    return datetime.fromisoformat(step["started"].replace("Z", "+00:00")).timestamp()


def chart_step(run):
    return run.task_results("Upgrade the Helm release")


@pytest.mark.parametrize("helm_major", ["3", "4"])
def test_the_new_charts_images_roll_once_in_the_pools_step(tf_lab, tfx, runbook, helm_major):
    """(a) No image given: the chart's own new images are rolled by the pools step, at the live
    policy, as one campaign; the ProviderConfig the new chart changes rolls nothing before it."""
    started = time.time()
    run = run_playbook("tensorfusion.ops.upgrade", dict(runbook, tfops_helm_binary=str(paths.helm_binary(helm_major))),
                       timeout=900)
    assert run.rc == 0, run.stdout[-3000:]
    record = report(run)
    chart = chart_step(run)
    assert chart["chart_version"] == tf.V2
    assert chart["chart_pool_changes"]["tensor-fusion"]["shared"]["hypervisor"]["image"] == HV + "2.15.0"
    assert chart["held_for_provider_configs"] == ["tensor-fusion/shared"]
    template = tfx.template()
    assert template["componentConfig"]["hypervisor"]["image"] == HV + "2.15.0"
    assert template["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"] == 20
    assert not (tfx.tfc()["metadata"].get("annotations") or {}).get("ops.tensor-fusion.ai/paused")
    campaigns = campaigns_since(tf_lab, started)
    assert len(campaigns) == 1, campaigns
    assert min(campaigns.values()) >= step_started(record, "pools"), "a node rolled before the pools step"
    assert {p.spec.containers[0].image for p in tfx.hv_pods().values()} == {HV + "2.15.0"}

    # The rollback runbook: the older chart re-rendered with the live pools kept, the snapshot's
    # componentConfig restored (the older ProviderConfig holds the hypervisors first): one campaign.
    back = time.time()
    run = run_playbook("tensorfusion.ops.rollback", dict(runbook, tfops_snapshot=record["snapshot"]["path"],
                                                        tfops_helm_binary=str(paths.helm_binary(helm_major))),
                       timeout=900)
    assert run.rc == 0, run.stdout[-3000:]
    restored = run.task_results("Roll the chart and the pools back to the snapshot")
    assert restored["chart_version"] == tf.V1 and restored["method"] == "upgrade-to-stored-chart"
    assert restored["held_for_provider_configs"] == ["tensor-fusion/shared"]
    template = tfx.template()
    assert template["componentConfig"]["hypervisor"]["image"] == HV + "2.14.0"
    assert template["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"] == 20
    assert template["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["autoUpdateHypervisor"] is True
    assert not (tfx.tfc()["metadata"].get("annotations") or {}).get("ops.tensor-fusion.ai/paused")
    campaigns = campaigns_since(tf_lab, back)
    assert len(campaigns) == 1, campaigns
    assert {p.spec.containers[0].image for p in tfx.hv_pods().values()} == {HV + "2.14.0"}


def test_a_hand_set_policy_and_the_runs_image_survive_this_and_the_next_chart_upgrade(tf_lab, tfx, runbook):
    """(b, c) A pool set by hand to 50 % and its own image, then the upgrade with an image: the
    pool has the run's image and keeps 50 %, rolled once in the pools step; a following chart
    upgrade with an unrelated value keeps both and rolls nothing."""
    tfx.pool_patch({"componentConfig": {"hypervisor": {"image": HV + "hand-1"}},
                    "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": 50}}})
    tfx.wait_pool(lambda p: p["status"]["componentStatus"].get("hypervisorConfigSynced") is True and
                  {pod.spec.containers[0].image for pod in tfx.hv_pods().values()} == {HV + "hand-1"},
                  timeout=180)
    started = time.time()
    run = run_playbook("tensorfusion.ops.upgrade", dict(runbook, tfops_hypervisor_image=HV + "run-1"), timeout=900)
    assert run.rc == 0, run.stdout[-3000:]
    record = report(run)
    template = tfx.template()
    assert template["componentConfig"]["hypervisor"]["image"] == HV + "run-1"
    assert template["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"] == 50
    campaigns = campaigns_since(tf_lab, started)
    assert len(campaigns) == 1, campaigns
    assert min(campaigns.values()) >= step_started(record, "pools")

    again = time.time()
    run = run_playbook("tensorfusion.ops.upgrade", dict(runbook, tfops_hypervisor_image=HV + "run-1",
                                                       tfops_values={"dynamicConfig": {"metricsTTL": "31d"}}),
                       timeout=900)
    assert run.rc == 0, run.stdout[-3000:]
    assert chart_step(run)["revision_after"] > chart_step(run)["revision_before"], "the chart was upgraded"
    template = tfx.template()
    assert template["componentConfig"]["hypervisor"]["image"] == HV + "run-1"
    assert template["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"] == 50
    assert campaigns_since(tf_lab, again) == {}

    quiet = run_playbook("tensorfusion.ops.upgrade", dict(runbook, tfops_hypervisor_image=HV + "run-1",
                                                         tfops_values={"dynamicConfig": {"metricsTTL": "31d"}}),
                         timeout=900)
    assert quiet.rc == 0 and "changed=0" in quiet.stdout.split("PLAY RECAP")[-1], quiet.stdout[-3000:]
