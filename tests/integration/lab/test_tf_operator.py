"""The operator double against a real API server: install state, hypervisor rollouts in batches,
the rough edges (Pending blocks forever, autoUpdate false freezes, maintenance fields ignored),
pausing with the controller Deployment, stopping the double mid-rollout, and the fault knobs."""
import time
from pathlib import Path

import pytest

from lab import tensorfusion as tf

from .conftest import NS, POOL, TFC

HV = "tensorfusion/tensor-fusion-hypervisor"


@pytest.fixture(autouse=True)
def restores_the_pool(tfx):
    """Each test leaves the pool as it found it: the same rollout policy (an autoUpdate false left
    behind froze every later test), and a synced hypervisor, reverting the image if a rollout
    the test started never finishes. Tests stay independent of each other's failures."""
    template = tfx.template()
    policy = template["nodeManagerConfig"].get("nodePoolRollingUpdatePolicy") or {}
    image = template["componentConfig"]["hypervisor"]["image"]
    yield
    current = tfx.template()["nodeManagerConfig"].get("nodePoolRollingUpdatePolicy") or {}
    if current != policy:
        tfx.policy(**{k: policy.get(k) for k in set(policy) | set(current)})
    try:
        tfx.wait_synced(timeout=45)
    except AssertionError:
        tfx.hv_image(image)
        tfx.wait_synced(timeout=60)


def hv_state(tfx):
    return {n: (p.metadata.uid, p.spec.containers[0].image) for n, p in tfx.hv_pods().items()}


def test_install_shapes_pool_nodes_pods_and_status(tfx):
    pool = tfx.wait_synced()
    meta = pool["metadata"]
    assert meta["labels"]["tensor-fusion.ai/managed-by"] == TFC
    assert meta["annotations"]["tensor-fusion.ai/is-default-pool"] == "true"
    assert "tensor-fusion.ai/finalizer" in meta["finalizers"]
    ref = meta["ownerReferences"][0]
    assert (ref["kind"], ref["name"], ref["controller"], ref["blockOwnerDeletion"]) == \
        ("TensorFusionCluster", TFC, True, True)
    assert "observedGeneration" not in pool["status"]
    cs = pool["status"]["componentStatus"]
    # autoUpdateWorker/Client are not set by the chart: hash recorded, progress/synced omitted.
    assert set(cs) == {"hypervisor", "hypervisorConfigSynced", "hypervisorUpdateProgress",
                       "worker", "client"}
    assert all(len(cs[c]) == 16 for c in ("hypervisor", "worker", "client"))
    nodes = tfx.gpunodes()
    assert sorted(nodes) == ["tfops-gpu-0", "tfops-gpu-1", "tfops-gpu-2"]  # not the CPU node
    for name, node in nodes.items():
        assert node["metadata"]["labels"] == {"tensor-fusion.ai/managed-by": POOL,
                                              f"tensor-fusion.ai/pool-{POOL}": "true"}
        assert node["status"]["phase"] == "Running"
    pods = tfx.hv_pods()
    assert sorted(pods) == [f"hypervisor-{n}" for n in sorted(nodes)]
    image = tfx.template()["componentConfig"]["hypervisor"]["image"]
    for name, pod in pods.items():
        assert pod.spec.containers[0].name == "tensor-fusion-hypervisor"
        assert pod.spec.containers[0].image == image
        assert pod.metadata.labels["tensor-fusion.ai/component"] == "hypervisor"
        assert pod.metadata.labels[f"tensor-fusion.ai/pool-{POOL}"] == "true"
        assert pod.metadata.labels["tensor-fusion.ai/pod-template-hash"] != cs["hypervisor"]
    # A pool spec update (earlier tests) sets the cluster Updating for 3 s, as upstream.
    tfc = tfx.until(lambda: (lambda c: c if c["status"]["phase"] == "Running" else None)(
        tfx.tfc()), what="cluster Running")
    conds = {c["type"]: (c["status"], c["reason"]) for c in tfc["status"]["conditions"]}
    assert conds["Ready"] == ("True", "CheckPassed") and conds["GPUPoolReady"][0] == "True"
    gpus = tfx.co.list_cluster_custom_object("tensor-fusion.ai", "v1", "gpus")["items"]
    assert {g["metadata"]["labels"]["tensor-fusion.ai/managed-by"] for g in gpus} == set(nodes)


def test_direct_pool_edit_is_reverted(tfx):
    before = tfx.pool()["spec"]["componentConfig"]["hypervisor"]["image"]
    tfx.co.patch_cluster_custom_object("tensor-fusion.ai", "v1", "gpupools", POOL, {
        "spec": {"componentConfig": {"hypervisor": {"image": f"{HV}:edited-directly"}}}})
    tfx.wait_pool(lambda p: p["spec"]["componentConfig"]["hypervisor"]["image"] == before, 15)


def test_rollout_moves_in_batches_oldest_first_and_replaces_pods(tfx, fast_gaps):
    old_hash = tfx.wait_synced()["status"]["componentStatus"]["hypervisor"]
    before = hv_state(tfx)
    tfx.policy(batchPercentage=50, batchInterval="1s")
    seen = []
    tfx.hv_image(f"{HV}:rollout-1")
    pool = tfx.wait_synced(record=seen, differs_from=old_hash)
    progress = [((p.get("status") or {}).get("componentStatus") or {}).get(
        "hypervisorUpdateProgress") for p in seen]
    steps = [x for i, x in enumerate(progress) if x and (i == 0 or x != progress[i - 1])]
    assert steps[-2:] == [50, 100], progress           # 3 nodes at 50 %: batches of 2, then 1
    in_progress = {(p["metadata"].get("annotations") or {}).get(
        "tensor-fusion.ai/hypervisor-update-in-progress") for p in seen}
    assert pool["status"]["componentStatus"]["hypervisor"] in in_progress
    ann = pool["metadata"]["annotations"]
    assert ann["tensor-fusion.ai/hypervisor-update-in-progress"] == ""       # "" not deleted
    assert ann["tensor-fusion.ai/hypervisor-batch-update-last-time"] == ""
    after = hv_state(tfx)
    assert set(after) == set(before)
    for name in before:
        assert after[name][0] != before[name][0] and after[name][1] == f"{HV}:rollout-1"


def test_policy_only_change_moves_no_hash(tfx):
    cs = tfx.wait_synced()["status"]["componentStatus"]
    tfx.policy(batchPercentage=30, maxDuration="1s", maintenanceWindow={"includes": ["0 0 1 1 *"]})
    time.sleep(4)
    assert tfx.cs() == cs


def test_pending_node_blocks_forever_then_revert_recovers(tfx, fast_gaps):
    good = tfx.wait_synced()["status"]["componentStatus"]["hypervisor"]
    good_image = tfx.template()["componentConfig"]["hypervisor"]["image"]
    tfx.kubelet_knobs(neverReadyImages=":broken$")
    try:
        tfx.policy(batchPercentage=30, maxDuration="1s")   # maxDuration is ignored
        tfx.hv_image(f"{HV}:broken")
        tfx.until(lambda: any(n["status"]["phase"] == "Pending" for n in tfx.gpunodes().values()),
                  what="a node set Pending")
        time.sleep(8)  # several 3 s rechecks
        pool = tfx.pool()
        cs = pool["status"]["componentStatus"]
        assert pool["status"]["phase"] == "Updating"
        assert "hypervisorConfigSynced" not in cs and "hypervisorUpdateProgress" not in cs
        assert pool["metadata"]["annotations"]["tensor-fusion.ai/hypervisor-update-in-progress"] \
            == cs["hypervisor"] != good
        pending = [n for n, g in tfx.gpunodes().items() if g["status"]["phase"] == "Pending"]
        assert len(pending) == 1                               # the first batch, never finishing
        assert tfx.tfc()["status"]["phase"] == "Updating"
        # Rollback = revert the TFC field; the same config gives the same hash again.
        tfx.hv_image(good_image)
        pool = tfx.wait_synced(timeout=60)
        assert pool["status"]["componentStatus"]["hypervisor"] == good
        assert all(p.spec.containers[0].image == good_image for p in tfx.hv_pods().values())
    finally:
        tfx.kubelet_knobs(neverReadyImages=None)


def test_autoupdate_false_freezes_and_manual_delete_recreates_from_current_spec(tfx, fast_gaps):
    tfx.wait_synced()
    tfx.policy(autoUpdateHypervisor=False, batchPercentage=100)
    before = hv_state(tfx)
    tfx.hv_image(f"{HV}:frozen")
    pool = tfx.wait_pool(lambda p: "hypervisorConfigSynced" not in p["status"]["componentStatus"])
    time.sleep(4)
    cs = tfx.cs()
    assert set(cs) >= {"hypervisor"} and "hypervisorUpdateProgress" not in cs
    assert hv_state(tfx) == before                                  # nothing restarted
    victim = "hypervisor-tfops-gpu-1"
    tfx.core.delete_namespaced_pod(victim, NS)
    new = tfx.until(lambda: (lambda p: p if p and p.metadata.uid != before[victim][0] else None)(
        tfx.hv_pods().get(victim)), what="recreated pod")
    assert new.spec.containers[0].image == f"{HV}:frozen"
    time.sleep(2)
    assert "hypervisorConfigSynced" not in tfx.cs()                 # still frozen
    tfx.policy(autoUpdateHypervisor=True)                             # false -> true resumes
    tfx.wait_synced(differs_from=None, timeout=60)
    assert all(img == f"{HV}:frozen" for _, img in hv_state(tfx).values())
    assert pool["status"]["componentStatus"]["hypervisor"] == tfx.cs()["hypervisor"]


def test_scaled_to_zero_pauses_and_operator_version_rolls(tfx, fast_gaps):
    deploy = tfx.apps.list_namespaced_deployment(
        NS, label_selector="tensor-fusion.ai/component=operator").items[0]
    cs = tfx.wait_synced()["status"]["componentStatus"]
    tfx.apps.patch_namespaced_deployment_scale(deploy.metadata.name, NS, {"spec": {"replicas": 0}})
    tfx.until(lambda: not [p for p in tfx.core.list_namespaced_pod(
        NS, label_selector="tensor-fusion.ai/component=operator").items], what="operator gone")
    before = hv_state(tfx)
    tfx.hv_image(f"{HV}:while-paused")
    time.sleep(4)
    assert tfx.cs() == cs and hv_state(tfx) == before
    tfx.apps.patch_namespaced_deployment_scale(deploy.metadata.name, NS, {"spec": {"replicas": 1}})
    tfx.wait_synced(differs_from=cs["hypervisor"])
    # The operator's own version (its image tag) is part of the hypervisor hash.
    synced = tfx.cs()["hypervisor"]
    before = hv_state(tfx)
    image = deploy.spec.template.spec.containers[0].image
    tfx.apps.patch_namespaced_deployment(deploy.metadata.name, NS, {"spec": {"template": {"spec": {
        "containers": [{"name": "controller", "image": image.rsplit(":", 1)[0] + ":9.9.9"}]}}}})
    bumped = synced
    try:
        bumped = tfx.wait_synced(differs_from=synced)["status"]["componentStatus"]["hypervisor"]
        assert all(uid != before[n][0] for n, (uid, _) in hv_state(tfx).items())
    finally:
        tfx.apps.patch_namespaced_deployment(deploy.metadata.name, NS, {"spec": {"template": {
            "spec": {"containers": [{"name": "controller", "image": image}]}}}})
        tfx.wait_synced(differs_from=bumped)
    assert tfx.cs()["hypervisor"] == synced          # same operator version, same hash


def test_double_stopped_mid_rollout_resumes_after_restart(tfx, tf_lab):
    tfx.knobs(batchGapFloorSeconds="4")
    try:
        old = tfx.wait_synced()["status"]["componentStatus"]["hypervisor"]
        tfx.policy(batchPercentage=34)
        tfx.hv_image(f"{HV}:restart-test")
        tfx.wait_pool(lambda p: p["status"]["componentStatus"].get("hypervisorUpdateProgress") == 34)
        tf.stop_operator(tf_lab)
        frozen = tfx.cs()
        time.sleep(6)
        assert tfx.cs() == frozen
        log = Path(tf_lab["state_dir"]) / "logs" / "tf-operator.log"
        before = log.stat().st_size
        tf.start_operator(tf_lab)
        tfx.wait_synced(differs_from=old, timeout=60)
        # Synced means every node runs the new image: a restarted double reconciles nothing
        # before every kind is listed (a pool seen with part of its GPUNodes was called done).
        assert {p.spec.containers[0].image for p in tfx.hv_pods().values()} == {f"{HV}:restart-test"}
        with open(log, encoding="utf-8") as handle:
            handle.seek(before)
            lines = [line for line in handle if " INFO tf-operator " in line]
        first_reconcile = next(i for i, line in enumerate(lines) if line.split(" tf-operator ", 1)[1].startswith(
            ("pool ", "gpunode ")))
        assert any("caches synced" in line for line in lines[:first_reconcile]), lines[:first_reconcile + 1]
    finally:
        tfx.knobs(batchGapFloorSeconds=None)


def test_hypervisor_pods_deleted_while_the_double_was_down_come_back_after_its_restart(tfx, tf_lab):
    """A restarted double sees its listings arrive kind by kind: every GPUNode whose Pod went
    missing while it was down gets one again, whichever kind came first."""
    tfx.wait_synced()
    tf.stop_operator(tf_lab)
    try:
        for name in tfx.hv_pods():
            tfx.core.delete_namespaced_pod(name, NS)
        tfx.until(lambda: not tfx.hv_pods(), what="hypervisor Pods gone (the kubelet confirms)")
    finally:
        tf.start_operator(tf_lab)
    nodes = sorted(tfx.gpunodes())
    tfx.until(lambda: sorted(tfx.hv_pods()) == [f"hypervisor-{n}" for n in nodes] and all(
        n["status"]["phase"] == "Running" for n in tfx.gpunodes().values()), timeout=30,
        what="every hypervisor Pod back and every GPUNode Running")


def test_stale_status_knob_keeps_old_synced_status(tfx, fast_gaps):
    old = tfx.wait_synced()["status"]["componentStatus"]
    tfx.knobs(staleStatusSeconds="5")
    try:
        t0 = time.monotonic()
        tfx.hv_image(f"{HV}:stale-test")
        time.sleep(3)
        assert tfx.cs() == old                       # still the old hash, still "synced"
        tfx.wait_synced(differs_from=old["hypervisor"])
        assert time.monotonic() - t0 >= 5
    finally:
        tfx.knobs(staleStatusSeconds=None)


def test_slow_node_knob_delays_its_hypervisor(tfx, fast_gaps):
    tfx.wait_synced()
    tfx.policy(batchPercentage=100)
    tfx.knobs(slowNodes="tfops-gpu-2=6")
    try:
        t0 = time.monotonic()
        tfx.hv_image(f"{HV}:slow-test")
        tfx.until(lambda: all(p.spec.containers[0].image == f"{HV}:slow-test"
                              for n, p in tfx.hv_pods().items() if n != "hypervisor-tfops-gpu-2")
                  and len(tfx.hv_pods()) >= 2, what="fast nodes")
        fast = time.monotonic() - t0
        tfx.wait_synced(timeout=60)
        assert time.monotonic() - t0 >= 6 > fast
    finally:
        tfx.knobs(slowNodes=None)


def test_empty_pool_never_syncs(tfx):
    tfc = tfx.tfc()
    pools = tfc["spec"]["gpuPools"]
    empty = {"name": "empty", "specTemplate": {
        "capacityConfig": {"minResources": {"tflops": "0", "vram": "0"}},
        "nodeManagerConfig": {"nodeSelector": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "no-such-label", "operator": "Exists"}]}]},
            "nodePoolRollingUpdatePolicy": {"autoUpdateHypervisor": True}},
        "componentConfig": {"hypervisor": {"image": f"{HV}:empty"}}}}
    tfx.patch_tfc({"spec": {"gpuPools": pools + [empty]}})
    try:
        pool = tfx.wait_pool(lambda p: (p["metadata"].get("annotations") or {}).get(
            "tensor-fusion.ai/hypervisor-update-in-progress"), name=f"{TFC}-empty")
        time.sleep(4)
        pool = tfx.pool(f"{TFC}-empty")
        cs = pool["status"]["componentStatus"]
        assert pool["status"]["phase"] == "Running"  # 0 nodes and minResources 0
        assert "hypervisorConfigSynced" not in cs and "hypervisorUpdateProgress" not in cs
        assert pool["metadata"]["annotations"]["tensor-fusion.ai/hypervisor-update-in-progress"] \
            == cs["hypervisor"]
        assert pool["metadata"]["annotations"]["tensor-fusion.ai/is-default-pool"] == "false"
    finally:
        tfx.patch_tfc({"spec": {"gpuPools": pools}})
    tfx.until(lambda: f"{TFC}-empty" not in {p["metadata"]["name"] for p in
                                             tfx.co.list_cluster_custom_object(
                                                 "tensor-fusion.ai", "v1", "gpupools")["items"]},
              what="removed pool deleted")


def test_client_and_worker_rollouts(tfx, fast_gaps):
    ns = "tf-rollout-test"
    tfx.core.create_namespace({"metadata": {"name": ns}})
    tmpl_labels = {"app": "tf-app", "tensor-fusion.ai/enabled": "true"}
    tfx.apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "tf-app"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "tf-app"}}, "template": {
            "metadata": {"labels": tmpl_labels,
                         "annotations": {"tensor-fusion.ai/tflops-request": "10"}},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]}}}})

    def app_pods():
        return [p for p in tfx.core.list_namespaced_pod(ns, label_selector="app=tf-app").items
                if p.metadata.deletion_timestamp is None]

    def settled(hash_):
        pods = app_pods()
        return len(pods) == 2 and all(
            p.metadata.labels["tensor-fusion.ai/pod-template-hash"] == hash_ and
            p.status.phase == "Running" for p in pods) and pods
    old = tfx.cs()
    first = tfx.until(lambda: settled(old["client"]), what="two injected Pods")
    wl = tfx.until(lambda: (tfx.get("tensorfusionworkloads", "tf-app", ns).get("status") or {})
                   .get("podTemplateHash"), what="workload hash")
    # Turning the flags on with nothing changed: the backlog check fast-forwards to synced.
    tfx.policy(autoUpdateClient=True, autoUpdateWorker=True, batchPercentage=50)
    tfx.wait_synced("client")
    tfx.wait_synced("worker")
    seen = []
    # The client first, alone: a worker campaign at the same time makes the workload controller
    # replace outdated Pods itself (upstream does, whatever autoUpdateWorker says), and the client
    # campaign then rightly fast-forwards past its 50 % step.
    tfx.pool_patch({"componentConfig": {"client": {"image": "tensorfusion/tensor-fusion-client:v9"}}})
    tfx.wait_synced("client", differs_from=old["client"], record=seen, timeout=90)
    progress = [((p.get("status") or {}).get("componentStatus") or {}).get("clientUpdateProgress")
                for p in seen]
    assert 50 in progress, progress                               # two Pods, one per batch
    tfx.pool_patch({"componentConfig": {"worker": {"image": "tensorfusion/tensor-fusion-worker:v9"}}})
    cs = tfx.wait_synced("worker", differs_from=old["worker"], timeout=60)["status"][
        "componentStatus"]
    pods = tfx.until(lambda: settled(cs["client"]), what="Pods recreated with the new hash")
    assert not {p.metadata.uid for p in pods} & {p.metadata.uid for p in first}
    new_wl = tfx.get("tensorfusionworkloads", "tf-app", ns)["status"]["podTemplateHash"]
    assert new_wl and new_wl != wl
    tfx.policy(autoUpdateClient=None, autoUpdateWorker=None)
    tfx.core.delete_namespace(ns)


def test_deleted_cluster_and_its_pools_go_away(tfx):
    """The finalizer write follows a status write: a stale resourceVersion once left the cluster
    Destroying for ever (the conflict was swallowed and nothing requeued it)."""
    name = "tfc-gone"
    names = [f"{name}-a", f"{name}-b"]
    tfx.co.create_cluster_custom_object("tensor-fusion.ai", "v1", "tensorfusionclusters", {
        "apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionCluster",
        "metadata": {"name": name},
        "spec": {"gpuPools": [{"name": pool, "specTemplate": {"nodeManagerConfig": {
            "nodePoolRollingUpdatePolicy": {"autoUpdateHypervisor": True}}}} for pool in "ab"]}})

    def plurals(plural):
        return {o["metadata"]["name"]: o for o in
                tfx.co.list_cluster_custom_object("tensor-fusion.ai", "v1", plural)["items"]}

    tfx.until(lambda: set(names) <= set(plurals("gpupools")) and tfx.get(
        "tensorfusionclusters", name).get("status"), what="cluster and pools created")
    tfx.co.delete_cluster_custom_object("tensor-fusion.ai", "v1", "tensorfusionclusters", name)
    tfx.until(lambda: name not in plurals("tensorfusionclusters"), timeout=30,
              what="deleted TensorFusionCluster gone (not stuck Destroying)")
    assert not set(names) & set(plurals("gpupools"))
