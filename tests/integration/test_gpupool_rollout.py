"""gpupool_rollout against the lab's operator double: batches, honest changed, the stale-status
guard, a change mid-rollout, a stuck node, a deadline that pauses, an API server restart,
concurrent edits, business workloads changed while the pool rolls (recorded, warned, the gate's
pause), and bad input that leaves the cluster untouched."""
import datetime
import json
import re
import subprocess
import sys
import time
import uuid

import pytest
from kubernetes import client

from lab import cluster
from lab import tensorfusion as tf

from .ansible_runner import run_playbook, start_playbook
from .helpers import GROUP, TFC, VERSION, gpupool, pool_progress_at_least, tfc, wait_for, wait_pool
from .settle import controller_stopped

HV = "tensorfusion/tensor-fusion-hypervisor"


def rollout(lab, check=False, diff=False, **opts):
    extra = {"lab_kubeconfig": lab["kubeconfig"]}
    extra.update({"gr_" + k: v for k, v in opts.items()})
    run = run_playbook("gpupool_rollout.yml", extra,
                       args=(["--check"] if check else []) + (["--diff"] if diff else []))
    return run, run.task_results("Rollout")


def hv(tag, pct=20, **policy):
    rolling = {"auto_update_hypervisor": True, "batch_percentage": pct}
    rolling.update(policy)
    return {"components": {"hypervisor": {"image": f"{HV}:{tag}"}}, "rolling_update": rolling}


def written_by_users(obj):
    """What a client write changes (the operator's own status writes also move resourceVersion):
    generation counts spec writes; labels and annotations are metadata writes."""
    meta = obj["metadata"]
    return meta["generation"], meta.get("labels"), meta.get("annotations"), obj["spec"]


def hypervisor_images(api_client):
    pods = client.CoreV1Api(api_client).list_namespaced_pod(
        "tensor-fusion-sys", label_selector="tensor-fusion.ai/component=hypervisor").items
    return sorted({p.spec.containers[0].image for p in pods if p.metadata.deletion_timestamp is None})


@pytest.fixture(autouse=True)
def knobs_reset(api_client):
    yield
    tf.set_knobs(api_client, staleStatusSeconds=None, slowNodes=None, batchGapFloorSeconds=None)
    try:
        client.CoreV1Api(api_client).delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    except client.exceptions.ApiException:
        pass


def test_batches_of_20_percent_then_idempotent(lab, api_client):
    run, res = rollout(lab, **hv("3.0.0"))
    assert run.rc == 0, res.get("msg")
    assert res["changed"] is True and res["changed_components"] == ["hypervisor"]
    progress = [e["progress"] for e in res["timeline"] if e["component"] == "hypervisor"]
    assert [p for p in progress if p] == [20, 40, 60, 80, 100]
    assert res["timeline"][-1]["synced"] is True
    comp = res["components"]["hypervisor"]
    assert comp["synced"] and comp["progress"] == 100 and comp["batches"] == 5
    assert comp["after_hash"] == comp["campaign"] != comp["before_hash"]
    assert res["nodes"] == {"total": lab["nodes"], "updated": lab["nodes"], "stuck": 0}
    assert hypervisor_images(api_client) == [f"{HV}:3.0.0"]
    assert gpupool(api_client)["status"]["phase"] == "Running"
    before = written_by_users(tfc(api_client))
    started = time.monotonic()
    run, res = rollout(lab, **hv("3.0.0"))
    assert run.rc == 0 and res["changed"] is False and res["waited_for"] == []
    assert time.monotonic() - started < 30
    assert written_by_users(tfc(api_client)) == before


def test_wait_until_progress_returns_per_batch_then_a_rerun_finishes(lab, api_client):
    # Gaps of 6 s between batches (a knob of the double) keep the rest of the campaign running
    # while the second task starts, even on a loaded machine.
    tf.set_knobs(api_client, batchGapFloorSeconds=6)
    run, res = rollout(lab, wait_until_progress=40, **hv("3.0.5"))
    assert run.rc == 0, res.get("msg")
    comp = res["components"]["hypervisor"]
    assert res["changed"] is True and 40 <= comp["progress"] < 100 and comp["synced"] is False
    run, res = rollout(lab, **hv("3.0.5"))
    assert run.rc == 0, res.get("msg")
    assert res["changed"] is False and res["waited_for"] == ["hypervisor"]
    assert res["components"]["hypervisor"]["synced"] is True
    assert hypervisor_images(api_client) == [f"{HV}:3.0.5"]


def test_check_mode_and_diff_write_nothing(lab, api_client):
    before = written_by_users(tfc(api_client))
    run, res = rollout(lab, check=True, diff=True, **hv("3.1.0", pct=25))
    assert run.rc == 0
    assert res["changed"] is True and res["batches"] == 4 and res["estimated_seconds"] > 0
    assert res["diff"]["after"]["componentConfig"]["hypervisor"]["image"] == f"{HV}:3.1.0"
    assert res["diff"]["before"]["componentConfig"]["hypervisor"]["image"] != f"{HV}:3.1.0"
    assert written_by_users(tfc(api_client)) == before


def test_stale_synced_status_does_not_end_the_wait(lab, api_client):
    tf.set_knobs(api_client, staleStatusSeconds=6)
    run, res = rollout(lab, **hv("3.2.0", pct=50))
    assert run.rc == 0, res.get("msg")
    assert hypervisor_images(api_client) == [f"{HV}:3.2.0"], "returned only once really rolled"
    assert res["components"]["hypervisor"]["duration"] >= 6


def test_policy_only_change_writes_but_does_not_wait(lab, api_client):
    run, res = rollout(lab, rolling_update={"batch_interval": "2s"})
    assert run.rc == 0
    assert res["changed"] is True and res["changed_components"] == [] and res["waited_for"] == []
    policy = tfc(api_client)["spec"]["gpuPools"][0]["specTemplate"]["nodeManagerConfig"][
        "nodePoolRollingUpdatePolicy"]
    assert policy["batchInterval"] == "2s"
    rollout(lab, rolling_update={"batch_interval": "1s"})


def _background_rollout(lab, tag, **policy):
    cmd_vars = {"lab_kubeconfig": lab["kubeconfig"], **{"gr_" + k: v for k, v in hv(tag, **policy).items()}}
    import os
    from .ansible_runner import PLAYBOOKS
    env = dict(os.environ, ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_NOCOLOR="1")
    return subprocess.Popen(["ansible-playbook", "-i", "localhost,", "-c", "local",
                             str(PLAYBOOKS / "gpupool_rollout.yml"), "-e", json.dumps(cmd_vars)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)


def test_second_change_mid_rollout_wins_and_the_first_says_superseded(lab, api_client):
    first = _background_rollout(lab, "3.3.0")
    try:
        wait_pool(api_client, pool_progress_at_least(20))
        run, res = rollout(lab, **hv("3.4.0"))
        assert run.rc == 0, res.get("msg")
        assert hypervisor_images(api_client) == [f"{HV}:3.4.0"]
        out, _err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode != 0, "the first task must not claim its image rolled"
    assert "superseded" in out


def test_stuck_node_fails_at_stall_timeout_naming_it(lab, api_client):
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                      "data": {"neverReadyImages": "3.5.0-broken"}})
    run, res = rollout(lab, stall_timeout=12, **hv("3.5.0-broken"))
    assert run.rc != 0
    assert res["error"] == "Stalled"
    assert "made no progress for 12s" in res["msg"] and "last moved to" in res["msg"]
    # Whichever nodes the operator took first (oldest GPUNode first, by the second it was
    # created; under load not always tfops-gpu-0): the stuck ones are named, and only they.
    stuck = {p.spec.node_name for p in core.list_namespaced_pod(
        "tensor-fusion-sys", label_selector="tensor-fusion.ai/component=hypervisor").items
        if p.spec.containers[0].image.endswith(":3.5.0-broken")}
    assert stuck and set(res["diagnostics"]["pending_nodes"]) <= stuck, (stuck, res["diagnostics"])
    assert any(node in res["msg"] for node in stuck) and "ImagePullBackOff" in res["msg"]
    core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    # Roll back to a good image: the same module, and the pool is whole again.
    run, res = rollout(lab, **hv("3.5.1"))
    assert run.rc == 0, res.get("msg")
    assert hypervisor_images(api_client) == [f"{HV}:3.5.1"]


def test_a_batch_whose_pods_cannot_start_fails_after_pods_fail_after_naming_image_node_and_reason(lab, api_client):
    """#45: a new hypervisor image whose Pods sit in ImagePullBackOff from their first second
    fails the batch after pods_fail_after (15 s here; 60 by default), not at the stall timeout
    (600 s by default): the message names the Pod, its image, its node and the reason."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                      "data": {"neverReadyImages": "3.6.0-broken"}})
    try:
        started = time.monotonic()
        run, res = rollout(lab, pods_fail_after=15, **hv("3.6.0-broken"))
        took = time.monotonic() - started
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    assert run.rc != 0 and res["error"] == "RolloutFailed", res
    assert "hypervisor Pods do not start" in res["msg"] and "ImagePullBackOff" in res["msg"], res["msg"]
    stuck = {p.spec.node_name for p in core.list_namespaced_pod(
        "tensor-fusion-sys", label_selector="tensor-fusion.ai/component=hypervisor").items
        if p.spec.containers[0].image.endswith(":3.6.0-broken")}
    assert stuck and any("(image %s:3.6.0-broken) on node %s" % (HV, node) in res["msg"] for node in stuck), res["msg"]
    assert took < 120, "failed after %.0f s, not at the stall timeout" % took
    run, res = rollout(lab, **hv("3.6.1"))
    assert run.rc == 0, res.get("msg")
    assert hypervisor_images(api_client) == [f"{HV}:3.6.1"]


def test_a_batch_whose_node_goes_not_ready_fails_after_pods_fail_after_naming_it(lab, api_client):
    """#45 item 4: every GPU node stops answering as the pool starts to roll (its kubelet gone);
    kube-controller-manager marks them NotReady after its 40 s grace; the batch's nodes then fail
    the rollout after pods_fail_after (15 s here), naming the node and the condition, instead of
    waiting for the stall timeout (600 s)."""
    core = client.CoreV1Api(api_client)
    gpu_nodes = sorted(n.metadata.name for n in core.list_node().items if n.metadata.name.startswith("tfops-gpu-"))
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                      "data": {"deadNodes": ",".join(gpu_nodes)}})
    try:
        started = time.monotonic()
        run, res = rollout(lab, pods_fail_after=15, stall_timeout=600, **hv("3.6.2", pct=50))
        took = time.monotonic() - started
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    assert run.rc != 0 and res["error"] == "RolloutFailed", res
    assert "their nodes are not Ready" in res["msg"] and "is NotReady (NodeStatusUnknown" in res["msg"], res["msg"]
    assert any("node %s is NotReady" % name in res["msg"] for name in gpu_nodes), res["msg"]
    assert took < 300, "failed after %.0f s, not at the stall timeout" % took
    for name in gpu_nodes:
        wait_for(core.list_node, lambda n, name=name: n.metadata.name == name and any(
            c.type == "Ready" and c.status == "True" for c in n.status.conditions), timeout=120)
    run, res = rollout(lab, **hv("3.6.3"))
    assert run.rc == 0, res.get("msg")
    assert hypervisor_images(api_client) == [f"{HV}:3.6.3"]


def test_deadline_pauses_and_a_rerun_resumes(lab, api_client):
    # 8 s between batches (a knob of the double): five batches cannot finish in 25 s, and 25 s
    # leave ansible-playbook time to start even on a loaded machine.
    tf.set_knobs(api_client, batchGapFloorSeconds=8)
    deadline = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=25)).isoformat()
    run, res = rollout(lab, deadline=deadline, on_deadline="pause", **hv("3.6.0"))
    assert run.rc != 0
    assert "paused hypervisor" in res["msg"] and res["paused"] == ["hypervisor"]
    spec = tfc(api_client)
    policy = spec["spec"]["gpuPools"][0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
    assert policy["autoUpdateHypervisor"] is False
    assert spec["metadata"]["annotations"]["ops.tensor-fusion.ai/paused"] == "shared:hypervisor"
    progress = int(gpupool(api_client)["status"]["componentStatus"].get("hypervisorUpdateProgress") or 0)
    assert progress < 100
    # The same task again, with no deadline: resumes and finishes.
    tf.set_knobs(api_client, batchGapFloorSeconds=None)
    task = hv("3.6.0")
    task["rolling_update"].pop("auto_update_hypervisor")
    run, res = rollout(lab, **task)
    assert run.rc == 0, res.get("msg")
    assert res["changed"] is True
    assert hypervisor_images(api_client) == [f"{HV}:3.6.0"]
    spec = tfc(api_client)
    assert "ops.tensor-fusion.ai/paused" not in (spec["metadata"].get("annotations") or {})


def test_a_batch_call_that_starts_after_the_deadline_pauses_the_rollout_it_finds(lab, api_client):
    """The runbooks roll a batch per call: a call that starts just after the window's end (the
    previous batch ended just before it) pauses the campaign in progress, as a deadline during
    the wait does (resumable), instead of refusing the task as bad input."""
    tf.set_knobs(api_client, batchGapFloorSeconds=8)
    try:
        run, res = rollout(lab, wait_until_progress=20, **hv("3.6.5"))
        assert run.rc == 0, res.get("msg")
        past = (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=1)).isoformat()
        generation = tfc(api_client)["metadata"]["generation"]
        run, res = rollout(lab, deadline=past, on_deadline="pause", wait_until_progress=40, **hv("3.6.5"))
        assert run.rc != 0
        assert "passed before this batch" in res["msg"] and res["paused"] == ["hypervisor"], res["msg"]
        spec = tfc(api_client)
        assert spec["metadata"]["generation"] == generation + 1, "one write: the pause"
        assert spec["metadata"]["annotations"]["ops.tensor-fusion.ai/paused"] == "shared:hypervisor"
    finally:
        tf.set_knobs(api_client, batchGapFloorSeconds=None)
    task = hv("3.6.5")
    task["rolling_update"].pop("auto_update_hypervisor")
    run, res = rollout(lab, **task)
    assert run.rc == 0, res.get("msg")
    assert hypervisor_images(api_client) == [f"{HV}:3.6.5"]


def test_pause_and_resume_states(lab, api_client):
    run, res = rollout(lab, state="paused", components={"hypervisor": {}})
    assert run.rc == 0 and res["changed"] is True
    run, res = rollout(lab, state="paused", components={"hypervisor": {}})
    assert run.rc == 0 and res["changed"] is False
    run, res = rollout(lab, state="resumed", components={"hypervisor": {}})
    assert run.rc == 0 and res["changed"] is True
    policy = tfc(api_client)["spec"]["gpuPools"][0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
    assert policy["autoUpdateHypervisor"] is True


def test_api_server_restart_during_the_wait(lab, api_client):
    tf.set_knobs(api_client, batchGapFloorSeconds=4)
    job = _background_rollout(lab, "3.7.0")
    try:
        wait_pool(api_client, pool_progress_at_least(20))
        cluster.restart_api_server(lab["state_dir"])
        out, _err = job.communicate(timeout=480)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, out[-3000:]
    assert hypervisor_images(api_client) == [f"{HV}:3.7.0"]


def _tfc_phase(api_client):
    return (tfc(api_client).get("status") or {}).get("phase")


def test_a_cluster_the_operator_leaves_updating_is_named_and_the_task_s_own_write_never_leaves_it_so(lab, api_client):
    """Upstream's operator may leave the TensorFusionCluster Updating after a write that starts no
    rollout (#47 (2); the double does with knob staleClusterStatus): tf_cluster_info names it
    CLUSTER_STATUS_STALE (a warning, with the cure) instead of blocking; gpupool_rollout's own
    policy-only write ends with the cluster Running, the pool annotated, and says so."""
    objects = client.CustomObjectsApi(api_client)
    tf.set_knobs(api_client, staleClusterStatus="true")
    try:
        # Someone else's policy-only write (no campaign): the cluster stays Updating.
        current = tfc(api_client)
        pools = current["spec"]["gpuPools"]
        policy = pools[0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
        policy["batchPercentage"] = 30 if policy.get("batchPercentage") != 30 else 40
        objects.patch_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", TFC,
                                            {"spec": {"gpuPools": pools}})
        wait_for(objects.list_cluster_custom_object, lambda o: o["metadata"]["name"] == TFC and
                 (o.get("status") or {}).get("phase") == "Updating", GROUP, VERSION, "tensorfusionclusters")
        time.sleep(8)  # past the operator's 3 s requeue: the cluster stays so
        assert _tfc_phase(api_client) == "Updating"
        info = run_playbook("tf_cluster_info.yml", {"lab_kubeconfig": lab["kubeconfig"]}).task_results("Info")
        found = dict((f["code"], f) for f in info["findings"])
        assert "CLUSTER_NOT_RUNNING" not in found, info["findings"]
        stale = found["CLUSTER_STATUS_STALE"]
        assert stale["severity"] == "warning" and "tensorfusion.ops/reconcile-requested" in stale["message"], stale
        # The task's own policy-only write: it waits for the operator's requeue, then annotates.
        run, res = rollout(lab, rolling_update={"batch_percentage": policy["batchPercentage"] + 10})
        assert run.rc == 0 and res["changed"] is True and res["changed_components"] == [], res.get("msg")
        assert res["reconcile_requested"] == [gpupool(api_client)["metadata"]["name"]], res
        assert _tfc_phase(api_client) == "Running"
        assert "tensorfusion.ops/reconcile-requested" in gpupool(api_client)["metadata"]["annotations"]
    finally:
        tf.set_knobs(api_client, staleClusterStatus=None)
    # Without the knob (the operator looks again at its requeue) nothing is annotated.
    run, res = rollout(lab, rolling_update={"batch_percentage": 20})
    assert run.rc == 0 and res["reconcile_requested"] == [] and _tfc_phase(api_client) == "Running", res


def _disturbed_rollout(lab, api_client, disturb):
    """A hypervisor rollout (a new tag every time: the lab may be reused) disturbed by ``disturb()``
    once its campaign is at 20 %: (its output, the tag); it must finish."""
    tf.set_knobs(api_client, batchGapFloorSeconds=4)
    tag = "3.9.%d" % (uuid.uuid4().int % 900)
    job = _background_rollout(lab, tag)
    try:
        wait_pool(api_client, pool_progress_at_least(20))
        disturb()
        out, _err = job.communicate(timeout=600)
    finally:
        tf.set_knobs(api_client, batchGapFloorSeconds=None)
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, out[-3000:]
    assert hypervisor_images(api_client) == [f"{HV}:{tag}"]
    return out


def _operator_away(api_client, seconds):
    with controller_stopped(api_client):
        time.sleep(seconds)


# Before the API server outages below: kube-controller-manager may be in its back-off after one.
def test_an_operator_away_while_the_rollout_waits_is_said_with_how_long(lab, api_client):
    """The controller Deployment scaled to 0 for about 25 s mid-rollout (the double stops acting,
    as the real operator's Pod would be gone): the rollout waits, finishes once it is back, and
    its warnings say the operator was away and for how long (#45 item 4)."""
    out = _disturbed_rollout(lab, api_client, lambda: _operator_away(api_client, 25))
    said = re.search(r"the TensorFusion operator \(its controller and the webhook its Pods serve\) was away "
                     r"for (\d+)s while this task waited \(from [^)]+\): its controller Deployment \S+ has no Ready Pod", out)
    assert said and 10 <= int(said.group(1)) <= 60, out[-3000:]


def test_an_etcd_outage_while_the_rollout_waits_is_said_with_how_long(lab, api_client):
    """etcd stopped for 25 s mid-rollout (kube-apiserver answers, but a read waits for etcd): the
    pool's watch goes quiet, the rollout waits, finishes once etcd is back, and its warnings say
    the API server kept reads waiting, and for how long (#45 item 4)."""
    out = _disturbed_rollout(lab, api_client, lambda: cluster.outage(lab["state_dir"], 25, component="etcd"))
    said = re.search(r"the API server kept \d+ reads? waiting for (\d+)s in all, the longest \d+s \([^)]+\): "
                     r"its storage, etcd, was away", out)
    assert said and 5 <= int(said.group(1)) <= 90, out[-3000:]


@pytest.mark.parametrize("seconds", [5, 30])
def test_an_api_server_outage_during_the_wait_is_ridden_out(lab, api_client, seconds):
    """kube-apiserver stopped for 5 s and for 30 s (connections refused meanwhile) while the
    module waits: it retries until the API server is back, finishes the rollout with its one
    spec write, says changed, and warns about the outage."""
    tf.set_knobs(api_client, batchGapFloorSeconds=4)
    generation = tfc(api_client)["metadata"]["generation"]
    job = _background_rollout(lab, "3.8.%d" % seconds)
    try:
        wait_pool(api_client, pool_progress_at_least(20))
        cluster.outage(lab["state_dir"], seconds)
        out, _err = job.communicate(timeout=600)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 0, out[-3000:]
    assert hypervisor_images(api_client) == [f"{HV}:3.8.%d" % seconds]
    assert tfc(api_client)["metadata"]["generation"] == generation + 1, "one spec write"
    assert "changed=1" in out.rsplit("PLAY RECAP", maxsplit=1)[-1], out[-3000:]
    assert "the API server could not be used for" in out, out[-3000:]


def test_concurrent_edit_of_another_pool_survives(lab, api_client):
    """A write that conflicts is re-read and re-applied: the other writer's change stays."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import auth
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout as rl
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import (
        ClusterEditor, pool_entry_transform)
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import Kube
    co = client.CustomObjectsApi(api_client)
    kube = Kube(auth.resolve_auth({"kubeconfig": lab["kubeconfig"]}, {}))
    editor = ClusterEditor(kube, TFC)
    attempts = []

    def change(template):
        if not attempts:  # someone else writes between our read and our write
            other = tfc(api_client)
            other["metadata"].setdefault("labels", {})["edited-by"] = "someone-else"
            co.replace_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", TFC, other)
        attempts.append(1)
        return rl.desired_spec_template(template, {}, {"batch_interval": "3s"})

    written = editor.update(pool_entry_transform("shared", change))
    assert len(attempts) == 2, "the first write conflicted and was retried"
    assert written["metadata"]["labels"]["edited-by"] == "someone-else"
    assert rl.policy_of(written["spec"]["gpuPools"][0]["specTemplate"])["batchInterval"] == "3s"
    editor.update(pool_entry_transform("shared", lambda t: rl.desired_spec_template(t, {}, {"batch_interval": "1s"})))
    kube.close()


def _business_deployment(apps, ns, name, tf_enabled=True, cpu="100m", token=None):
    labels = {"app": name, **({"tensor-fusion.ai/enabled": "true"} if tf_enabled else {})}
    container = {"name": "app", "image": "registry.lab/biz:1", "resources": {"requests": {"cpu": cpu}},
                 "env": [{"name": "API_TOKEN", "value": token or "none"}]}
    # No replicas: a Pod template change is what is watched, no Pod needs to run for it.
    apps.create_namespaced_deployment(ns, {"metadata": {"name": name}, "spec": {
        "replicas": 0, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}})


def _written(deployment):
    """What a client's write changes (the deployment controller's writes - status, its revision
    annotation - move resourceVersion too)."""
    annotations = dict((k, v) for k, v in (deployment.metadata.annotations or {}).items()
                       if k != "deployment.kubernetes.io/revision")
    return deployment.metadata.generation, deployment.metadata.labels, annotations, deployment.spec.to_dict()


def _change_template(apps, ns, name, cpu, token):
    """A user's write of the Pod template (requests and a Secret-like env value); what it wrote."""
    return _written(apps.patch_namespaced_deployment(name, ns, {"spec": {"template": {"spec": {"containers": [
        {"name": "app", "resources": {"requests": {"cpu": cpu}},
         "env": [{"name": "API_TOKEN", "value": token}]}]}}}}))


def _rollout_in_background(lab, api_client, tag, business_changes, args=()):
    """gpupool_rollout of ``tag`` in two batches 8 s apart, started and at its first batch (the
    module has written the pool, so its watch of the business workloads, begun before, is on)."""
    tf.set_knobs(api_client, batchGapFloorSeconds=8)
    generation = tfc(api_client)["metadata"]["generation"]
    extra = {"lab_kubeconfig": lab["kubeconfig"], "gr_business_changes": business_changes,
             **{"gr_" + k: v for k, v in hv(tag, pct=50).items()}}
    run = start_playbook("gpupool_rollout.yml", extra, args=args)
    try:
        wait_for(client.CustomObjectsApi(api_client).list_cluster_custom_object,
                 lambda obj: obj["metadata"]["name"] == TFC and obj["metadata"]["generation"] > generation,
                 GROUP, VERSION, "tensorfusionclusters", timeout=120, what="the rollout's write of the pool")
        wait_pool(api_client, pool_progress_at_least(50))
    except AssertionError:
        run.finish(timeout=5)
        raise
    return run


def _delete_business(apps, ns, *names):
    """Deleted now, not later with the namespace: a deletion is a business change too, which
    would count in the rollouts of the tests after this one."""
    for name in names:
        apps.delete_namespaced_deployment(name, ns)
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name in names, ns, gone=True,
             what=f"Deployments {names} of {ns} deleted")


def _entries(res, ns):
    return dict((e["name"], e) for e in (res.get("business_changes") or {}).get("changes") or []
                if e["namespace"] == ns)


def test_business_changes_during_the_rollout_are_recorded_and_the_warn_gate_warns(lab, api_client, ns):
    """#37 item 9: a business Deployment whose container requests (and a Secret-like env value)
    change while the pool rolls is in business_changes, requests from and to, the env named only;
    a workload without TensorFusion's label is not; gate warn warns and the rollout finishes. The
    env values appear nowhere in the result or the -vvv output, and no workload is written."""
    apps = client.AppsV1Api(api_client)
    token = "tok-" + uuid.uuid4().hex
    _business_deployment(apps, ns, "biz", token=token + "-old")
    _business_deployment(apps, ns, "plain", tf_enabled=False)
    generation = tfc(api_client)["metadata"]["generation"]
    tag = "3.7.0-" + uuid.uuid4().hex[:6]  # a rollout also where the lab ran this test before
    run = _rollout_in_background(lab, api_client, tag, {"gate": "warn"}, args=("-vvv",))
    biz_version = _change_template(apps, ns, "biz", "250m", token + "-new")
    plain_version = _change_template(apps, ns, "plain", "300m", "x")
    run = run.finish(timeout=300)
    res = run.task_results("Rollout")
    assert run.rc == 0, res.get("msg")
    changed = _entries(res, ns)
    assert list(changed) == ["biz"], res["business_changes"]
    assert changed["biz"]["change"] == "changed" and changed["biz"]["kind"] == "Deployment"
    assert {"field": "spec.containers[app].resources.requests.cpu", "from": "100m", "to": "250m"} in changed["biz"]["fields"]
    assert {"field": "spec.containers[app].env", "hidden": True} in changed["biz"]["fields"]
    assert res["business_changes"]["gate"] == "warn" and res["business_changes"]["reached"] is True
    assert any(f"Deployment {ns}/biz: " in w and "spec.containers[app].resources.requests.cpu 100m -> 250m" in w
               for w in res.get("warnings") or []), res.get("warnings")
    assert res["started"] and res["business_changes"]["resource_versions"]["Deployment"]
    # No Secret value in the result, the warnings or the -vvv output.
    for text in (json.dumps(res), run.stdout, run.stderr):
        assert token not in text
    # Watched, never written: the workloads are as the user's writes left them.
    assert _written(apps.read_namespaced_deployment("biz", ns)) == biz_version
    assert _written(apps.read_namespaced_deployment("plain", ns)) == plain_version
    assert hypervisor_images(api_client) == [f"{HV}:{tag}"]
    assert tfc(api_client)["metadata"]["generation"] == generation + 1, "one write of the pool, the rollout's"
    _delete_business(apps, ns, "biz", "plain")


def test_the_business_changes_gate_pauses_the_pool_and_a_rerun_resumes(lab, api_client, ns):
    apps = client.AppsV1Api(api_client)
    _business_deployment(apps, ns, "biz")
    generation = tfc(api_client)["metadata"]["generation"]
    tag = "3.8.0-" + uuid.uuid4().hex[:6]
    run = _rollout_in_background(lab, api_client, tag, {"gate": "pause"})
    biz_version = _change_template(apps, ns, "biz", "500m", "x")
    run = run.finish(timeout=300)
    res = run.task_results("Rollout")
    assert run.rc != 0, (res.get("msg"), res.get("business_changes"), res.get("timeline"))
    assert res["error"] == "BusinessChangesPaused" and res["paused"] == ["hypervisor"], res["msg"]
    assert "stopped by the business changes gate" in res["msg"] and "run the same task again" in res["msg"]
    assert f"Deployment {ns}/biz: " in res["msg"] and "spec.containers[app].resources.requests.cpu 100m -> 500m" in res["msg"]
    assert list(_entries(res, ns)) == ["biz"]
    spec = tfc(api_client)
    policy = spec["spec"]["gpuPools"][0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
    assert policy["autoUpdateHypervisor"] is False
    assert spec["metadata"]["annotations"]["ops.tensor-fusion.ai/paused"] == "shared:hypervisor"
    assert spec["metadata"]["generation"] == generation + 2, "two spec writes: the rollout's and the pause"
    progress = int(gpupool(api_client)["status"]["componentStatus"].get("hypervisorUpdateProgress") or 0)
    assert progress < 100
    assert _written(apps.read_namespaced_deployment("biz", ns)) == biz_version
    # The same task again once the changes have settled (gate warn: a workload another test
    # deletes meanwhile is no reason to stop here): resumes from where it paused and finishes.
    _delete_business(apps, ns, "biz")
    tf.set_knobs(api_client, batchGapFloorSeconds=None)
    task = hv(tag, pct=50)
    task["rolling_update"].pop("auto_update_hypervisor")
    run, res = rollout(lab, business_changes={"gate": "warn"}, **task)
    assert run.rc == 0, res.get("msg")
    assert not _entries(res, ns), "the deletion was before this call: not its change"
    assert hypervisor_images(api_client) == [f"{HV}:{tag}"]
    assert "ops.tensor-fusion.ai/paused" not in (tfc(api_client)["metadata"].get("annotations") or {})


@pytest.mark.parametrize("opts,fragment", [
    ({"cluster": "nope", **hv("4.0.0")}, "TensorFusionCluster nope does not exist; existing: tensor-fusion"),
    ({"pool": "nope", **hv("4.0.0")}, "has no pool 'nope'; its pools are: shared"),
    (hv("Not A Valid:Image"), "not a valid image reference"),
    (hv("4.0.0", pct=0), "every node at once"),
    (hv("4.0.0", pct=101), "must be 1-100"),
    (hv("4.0.0", batch_interval="soon"), "not a Go duration"),
    ({"deadline": "2020-01-01T00:00:00Z", **hv("4.0.0")}, "has already passed"),
    ({"components": {"hypervisor": {"image": f"{HV}:4.0.0"}},
      "rolling_update": {"auto_update_hypervisor": False}}, "never roll"),
    # What got through before: a survey answer's trailing newline, an instant timeout, a boolean
    # as a number, a container the merge by name cannot place, a negative interval.
    # (every module's text options are one line: core/option_text.py refuses it first)
    (hv("4.0.0\n"), "components.hypervisor.image holds a line break or another control character"),
    ({"wait_timeout": 0, **hv("4.0.0")}, "wait_timeout must be a positive number of seconds"),
    (hv("4.0.0", pct=True), "batch_percentage: True is not a whole number 1-100"),
    (hv("4.0.0", batch_interval="-5s"), "'-5s' is negative"),
    ({"components": {"hypervisor": {"image": f"{HV}:4.0.0", "pod_template": {"template": {"spec": {
        "containers": [{"image": "x"}]}}}}}, "rolling_update": {"auto_update_hypervisor": True}},
     "template.spec.containers[0]: a container needs a name"),
    ({"business_changes": {"gate": "pause", "percent": 150}, **hv("4.0.0")},
     "business_changes.percent: 150 is not a whole number 1-100"),
    ({"business_changes": {"gate": "stop"}, **hv("4.0.0")}, "got: stop found in business_changes"),
])
def test_bad_input_changes_nothing(lab, api_client, opts, fragment):
    before = written_by_users(tfc(api_client))
    run, res = rollout(lab, **opts)
    assert run.rc != 0
    assert fragment in res["msg"]
    assert written_by_users(tfc(api_client)) == before
