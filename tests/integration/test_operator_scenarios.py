"""One scenario suite for every TensorFusion operator the lab can run (issue 38): the lab's test
double (lab/tensorfusion/) and upstream's own operator. Each scenario goes through the collection
as users run it (the upgrade and rollback runbooks, gpupool_rollout, helm_release, secret_rotate)
and asserts what the collection returns and what it wrote; nothing here reads the double's hashes
or log, and no fault is staged with its knobs (faults come from outside the operator: a health
endpoint answering 500, the pool's own batchInterval before a deadline), so what passes on one
operator is asked of the other too.

A small lab of its own per operator (4 GPU nodes, chart 1.8.6, batches of 50 %): a chart upgrade
with pool changes (runbook, with the acceptance Pod of its verify step) and one without (helm_release),
a hypervisor, worker and client image change in batches to synced, a window's deadline that pauses
and a run that resumes, an in-place and a versioned rotation of a hypervisor pull Secret, a health
gate that stops a bad batch, and a rollback to the upgrade's restore point.

The double runs at upstream's batch timing (its lab floor ``batchGapFloorSeconds`` at 0: the next
batch is due once ``batchInterval`` has passed, docs/operator-behaviour.md 11)."""
import base64
import json
import os
import re
import threading
import uuid
from datetime import datetime, timedelta, timezone
from http.server import HTTPServer
from pathlib import Path

import pytest
from kubernetes import client

from lab import cluster, paths
from lab import tensorfusion as tf

from .ansible_runner import run_playbook, start_playbook
from .helpers import GROUP, NS, VERSION, pool_progress_at_least, wait_for, wait_pool
from .test_gates import _Answers500
from .test_runbooks import release_chart, report_of
from .test_secret_rotate import assert_no_value, canary

POOL = "shared"                       # the pool entry of the chart's TensorFusionCluster
GPUPOOL = "tensor-fusion-shared"      # its GPUPool
TFC = "tensor-fusion"
HV = "tensorfusion/tensor-fusion-hypervisor:"
NODES = 4
ACCEPTANCE = "Run a TensorFusion-enabled test Pod and check what was injected"
HELM = str(paths.helm_binary("3"))

# Upstream's operator (NexusGPU/tensor-fusion at 3e0a4901044d78226e14f67e8c5d29c269c943e2, the
# commit the double follows) cannot come from the Go module proxy (it refuses the module): whoever
# runs these tests builds it by hand, outside the repository (CONTRIBUTING.md), and names the
# binary in TFOPS_OPERATOR_BINARY; the lab then runs it instead of the double
# (lab/tensorfusion/upstream.py). docs/operator-behaviour.md 12 records such a run.
OPERATOR_BINARY = os.environ.get("TFOPS_OPERATOR_BINARY")
UPSTREAM_SKIPPED = ("upstream's operator is given as a binary, built by hand outside the repository: set "
                    "TFOPS_OPERATOR_BINARY to it (CONTRIBUTING.md, 'The real operator')")
OPERATORS = [pytest.param("double", id="double"),
             pytest.param("upstream", id="upstream",
                          marks=[] if OPERATOR_BINARY else pytest.mark.skip(reason=UPSTREAM_SKIPPED))]


@pytest.fixture(scope="module", params=OPERATORS)
def op_lab(request, tmp_path_factory):
    """A lab of this module's own (4 GPU nodes, chart 1.8.6) with TensorFusion run by
    ``request.param``, on the session's Kubernetes minor; stopped afterwards."""
    state_dir = Path(tmp_path_factory.mktemp("op-lab-%s" % request.param, numbered=True))
    binary = OPERATOR_BINARY if request.param == "upstream" else None
    # kube-controller-manager elects its leader, as in production: a rollout watches its Lease.
    state = cluster.up(state_dir, nodes=NODES, cpu_nodes=1, addons=[tf.addon(operator_binary=binary)],
                       leader_elect=True, kube_version=os.environ.get("TFOPS_TEST_KUBE_VERSION") or None)
    try:
        yield state
    finally:
        cluster.down(state_dir)


@pytest.fixture(scope="module")
def api(op_lab):
    api_client = tf._clients(op_lab)  # pylint: disable=protected-access
    # The double's lab floor under batch gaps off: upstream's timing (the next batch is due
    # once batchInterval has passed). Upstream's operator reads no such ConfigMap (nor answers it).
    tf.set_knobs(api_client, applied_within=0 if operator_of(op_lab) == "upstream" else 60,
                 batchGapFloorSeconds=0)
    yield api_client
    api_client.close()


@pytest.fixture(scope="module")
def base_vars(op_lab, tmp_path_factory):
    """What every runbook run of this module is given."""
    tmp = tmp_path_factory.mktemp("op-runbooks")
    return {"tfops_kubeconfig": op_lab["kubeconfig"], "tfops_chart_repo": op_lab["tensorfusion"]["chart_repo"],
            "tfops_helm_binary": HELM, "tfops_artifacts_dir": str(tmp / "artifacts"),
            "tfops_snapshot_dir": str(tmp / "snapshots")}


def operator_of(lab_state):
    return (lab_state.get("tensorfusion") or {}).get("operator") or "double"


# ---- reading the lab through the API -----------------------------------------------------------
def cluster_obj(api_client):
    return client.CustomObjectsApi(api_client).get_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", TFC)


def pool_obj(api_client):
    return client.CustomObjectsApi(api_client).get_cluster_custom_object(GROUP, VERSION, "gpupools", GPUPOOL)


def template(api_client):
    return cluster_obj(api_client)["spec"]["gpuPools"][0]["specTemplate"]


def policy(api_client):
    return template(api_client)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]


def hypervisors(api_client):
    """{node: (uid, image, Ready, Pod)} of the live hypervisor Pods."""
    pods = client.CoreV1Api(api_client).list_namespaced_pod(
        NS, label_selector="tensor-fusion.ai/component=hypervisor").items
    return dict((p.spec.node_name, (p.metadata.uid, p.spec.containers[0].image, any(
        c.type == "Ready" and c.status == "True" for c in p.status.conditions or []), p))
        for p in pods if p.metadata.deletion_timestamp is None)


def all_on(api_client, image):
    pods = hypervisors(api_client)
    return len(pods) == NODES and all(img == image and ready for _uid, img, ready, _p in pods.values())


def settled(op_lab):
    """Watch until every cluster and pool is Running and no campaign is in progress."""
    tf.wait_settled(op_lab, timeout=120)


def rollout(op_lab, **opts):
    run = run_playbook("gpupool_rollout.yml", dict(
        {"lab_kubeconfig": op_lab["kubeconfig"], "gr_pool": POOL},
        **dict(("gr_" + k, v) for k, v in opts.items())))
    return run, run.task_results("Rollout")


def hv_change(image, **rolling):
    return {"components": {"hypervisor": {"image": HV + image}},
            "rolling_update": dict({"auto_update_hypervisor": True, "batch_percentage": 50,
                                    "batch_interval": "1s"}, **rolling)}


# ---- the chart upgrade (runbook) and what later scenarios build on ------------------------------
@pytest.fixture(scope="module")
def upgraded(op_lab, api, base_vars):
    """The upgrade runbook, chart 1.8.6 -> 1.8.7 with a new hypervisor image at 50 % a batch, the
    acceptance Pod in its verify step: (run, the pool's componentConfig before it)."""
    settled(op_lab)
    before = template(api)["componentConfig"]
    run = run_playbook("tensorfusion.ops.upgrade", dict(
        base_vars, tfops_chart_version=tf.V2, tfops_hypervisor_image=HV + "2.17.0-s",
        tfops_batch_percentage=50, tfops_batch_interval="1s"), timeout=900)
    return run, before


def test_chart_upgrade_with_pool_changes_rolls_the_pool_in_batches(op_lab, api, upgraded):
    run, before = upgraded
    assert run.rc == 0, run.stdout[-3000:]
    rep = report_of(run)
    rec = rep["record"]
    assert rep["status"] == "succeeded" and rec["changed"] is True
    assert (rec["versions"]["before"]["chart_version"], rec["versions"]["after"]["chart_version"]) == (tf.V1, tf.V2)
    assert rec["versions"]["after"]["pools"][GPUPOOL]["hypervisor"] == HV + "2.17.0-s"
    assert rec["snapshot"]["chart_version"] == tf.V1, "the restore point is the chart before"
    pool, = rec["pools"]
    assert pool["components"]["hypervisor"]["progress"] == 100
    steps = sorted(set(e["progress"] for e in pool["timeline"]
                       if e.get("component") == "hypervisor" and e.get("progress")))
    assert steps[-1] == 100 and 50 in steps, steps
    # What the collection wrote: the chart, the pool's new image (the chart's own pool changes
    # rolled by the pools step), and a pool the operator finished rolling.
    assert release_chart(api) == tf.V2
    assert template(api)["componentConfig"]["hypervisor"]["image"] == HV + "2.17.0-s"
    assert template(api)["componentConfig"] != before
    status = pool_obj(api)["status"]
    assert status["phase"] == "Running" and status["componentStatus"]["hypervisorConfigSynced"] is True
    assert all_on(api, HV + "2.17.0-s")


def test_the_acceptance_pod_is_injected_and_ready(op_lab, api, upgraded):
    run, _before = upgraded
    assert run.rc == 0, run.stdout[-3000:]
    acceptance = run.task_results(ACCEPTANCE)
    assert acceptance["passed"] is True, acceptance["checks"]
    checks = dict((c["check"], c["ok"]) for c in acceptance["checks"])
    assert checks == {"component label": True, "pool label": True, "template hash label": True,
                      "normalised requests": True, "hypervisor env": True, "no native GPU resource": True,
                      "Pod Ready": True}
    assert acceptance["pod"]["labels"]["tensor-fusion.ai/gpupool"] == GPUPOOL
    assert acceptance["pod"]["labels"]["tensor-fusion.ai/pod-template-hash"] == \
        pool_obj(api)["status"]["componentStatus"]["client"], "stamped with the pool's client hash"
    left = [n.metadata.name for n in client.CoreV1Api(api).list_namespace().items
            if n.metadata.name.startswith("tfops-acceptance") and n.metadata.deletion_timestamp is None]
    assert left == [], "the test Pod's namespace is removed"


def test_chart_upgrade_without_pool_changes_starts_no_campaign(op_lab, api, upgraded):
    """A values change that renders nothing new for the pools: a new revision, the pools left as
    they are, no campaign, no hypervisor Pod replaced."""
    assert upgraded[0].rc == 0
    settled(op_lab)
    tfc_before, pool_before, pods_before = cluster_obj(api), pool_obj(api), hypervisors(api)
    run = run_playbook("helm_release.yml", {
        "lab_kubeconfig": op_lab["kubeconfig"], "helm_binary": HELM, "hr_name": NS,
        "hr_namespace": NS, "hr_chart_ref": "tensor-fusion",
        "hr_chart_repo_url": op_lab["tensorfusion"]["chart_repo"], "hr_chart_version": tf.V2,
        "hr_reuse_values": True, "hr_set_values": [{"value": "alert.replicaCount=2"}]})
    res = run.task_results("Release")
    assert run.rc == 0, res.get("msg") or run.stdout[-2000:]
    assert res["changed"] is True
    assert not any(entries for entries in (res.get("chart_pool_changes") or {}).values()), res["chart_pool_changes"]
    assert not res.get("held_for_provider_configs")
    assert cluster_obj(api)["metadata"]["generation"] == tfc_before["metadata"]["generation"]
    assert cluster_obj(api)["spec"] == tfc_before["spec"]
    settled(op_lab)
    pool = pool_obj(api)
    assert pool["status"]["componentStatus"] == pool_before["status"]["componentStatus"]
    assert {n: p[0] for n, p in hypervisors(api).items()} == {n: p[0] for n, p in pods_before.items()}


def test_a_chart_that_switches_the_isolation_policy_says_so_before_the_write(op_lab, api, upgraded):
    """#47 (3): upstream's operator records a switch of its isolation policy but its hypervisor
    Pods kept the old one: the chart step says so before it writes (here in check mode, which
    writes nothing)."""
    assert upgraded[0].rc == 0
    revision = release_revision(api)
    run = run_playbook("helm_release.yml", {
        "lab_kubeconfig": op_lab["kubeconfig"], "helm_binary": HELM, "hr_name": NS,
        "hr_namespace": NS, "hr_chart_ref": "tensor-fusion",
        "hr_chart_repo_url": op_lab["tensorfusion"]["chart_repo"], "hr_chart_version": tf.V2,
        "hr_reuse_values": True, "hr_set_values": [{"value": "controller.isolationModePolicy=static"}]},
        args=("--check",))
    res = run.task_results("Release")
    assert run.rc == 0 and res["changed"] is True, res.get("msg") or run.stdout[-2000:]
    assert any("switches the operator's isolation policy from dynamic to static" in w and "HYPERVISOR_POLICY_STALE" in w
               for w in res.get("warnings") or []), res.get("warnings")
    assert release_revision(api) == revision, "check mode wrote nothing"


def release_revision(api_client):
    secrets = client.CoreV1Api(api_client).list_namespaced_secret(NS, label_selector="owner=helm,name=%s" % NS).items
    return max(int(s.metadata.labels["version"]) for s in secrets)


# ---- component rollouts (gpupool_rollout) -------------------------------------------------------
@pytest.fixture
def tf_app(op_lab, api):
    """Two TensorFusion-enabled Pods of a Deployment in the pool, in a namespace of their own: the
    client campaign's objects, and (through the workload the webhook makes) the worker
    campaign's. Afterwards worker and client auto-update off again, as the chart has them, and the
    namespace gone: later changes of theirs are recorded, with no campaign left unsynced."""
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    ns = "tf-app-" + uuid.uuid4().hex[:5]
    core.create_namespace({"metadata": {"name": ns}})
    wait_for(core.list_namespaced_service_account, lambda sa: sa.metadata.name == "default",
             namespace=ns, what="the default ServiceAccount of %s" % ns)
    labels = {"app": "tf-app", "tensor-fusion.ai/enabled": "true"}
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "tf-app"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "tf-app"}}, "template": {
            "metadata": {"labels": labels, "annotations": {
                "tensor-fusion.ai/tflops-request": "10", "tensor-fusion.ai/vram-request": "1Gi",
                "tensor-fusion.ai/gpupool": GPUPOOL}},
            "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}}})
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "tf-app"
             and (d.status.ready_replicas or 0) == 2, namespace=ns, what="2 Ready injected Pods of tf-app")
    wait_for(client.CustomObjectsApi(api).list_namespaced_custom_object,
             lambda w: w["metadata"]["name"] == "tf-app" and (w.get("status") or {}).get("podTemplateHash"),
             GROUP, VERSION, ns, "tensorfusionworkloads", what="the TensorFusionWorkload of tf-app with its hash")

    def pods():
        return [p for p in core.list_namespaced_pod(ns, label_selector="app=tf-app").items
                if p.metadata.deletion_timestamp is None]
    yield ns, pods
    run, res = rollout(op_lab, rolling_update={"auto_update_worker": False, "auto_update_client": False})
    assert run.rc == 0, res.get("msg")
    core.delete_namespace(ns)


def test_hypervisor_worker_and_client_images_roll_in_batches_to_synced(op_lab, api, upgraded, tf_app):
    assert upgraded[0].rc == 0
    ns, pods = tf_app
    settled(op_lab)
    client_uids = {p.metadata.uid for p in pods()}
    wl_before = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, "tensorfusionworkloads", "tf-app")["status"]["podTemplateHash"]
    run, res = rollout(op_lab, components={
        "hypervisor": {"image": HV + "2.17.1-s"},
        "worker": {"image": "tensorfusion/tensor-fusion-worker:v2.17.1-s"},
        "client": {"image": "tensorfusion/tensor-fusion-client:v2.17.1-s"}},
        rolling_update={"auto_update_hypervisor": True, "auto_update_worker": True, "auto_update_client": True,
                        "batch_percentage": 50, "batch_interval": "1s"})
    assert run.rc == 0, res.get("msg")
    assert res["changed"] is True
    assert sorted(res["changed_components"]) == sorted(res["waited_for"]) == ["client", "hypervisor", "worker"]
    for comp, item in res["components"].items():
        assert item["synced"] is True and item["progress"] == 100, (comp, item)
        assert item["after_hash"] and item["after_hash"] != item["before_hash"], (comp, item)
    assert res["components"]["hypervisor"]["batches"] == 2, res["timeline"]
    assert all_on(api, HV + "2.17.1-s")
    # The client's Pods were replaced, the new ones injected with the new client hash.
    now = wait_for(client.CoreV1Api(api).list_namespaced_pod, lambda p: p.metadata.labels.get("app") == "tf-app"
                   and p.metadata.deletion_timestamp is None, namespace=ns)
    assert now is not None and len(pods()) == 2
    assert not client_uids & {p.metadata.uid for p in pods()}
    assert {p.metadata.labels["tensor-fusion.ai/pod-template-hash"] for p in pods()} == \
        {res["components"]["client"]["after_hash"]}
    wl_after = client.CustomObjectsApi(api).get_namespaced_custom_object(
        GROUP, VERSION, ns, "tensorfusionworkloads", "tf-app")["status"]["podTemplateHash"]
    assert wl_after and wl_after != wl_before
    run, again = rollout(op_lab, components={
        "hypervisor": {"image": HV + "2.17.1-s"},
        "worker": {"image": "tensorfusion/tensor-fusion-worker:v2.17.1-s"},
        "client": {"image": "tensorfusion/tensor-fusion-client:v2.17.1-s"}})
    assert run.rc == 0 and again["changed"] is False and again["waited_for"] == [], again


# ---- what the operator hashes -------------------------------------------------------------------
def test_a_quantity_written_another_way_is_written_and_starts_no_rollout(op_lab, api, upgraded):
    """The operator hashes a pod template as Go reads it (#47 (1)): cpu "1000m" and "1" are one
    hash. The task writes the change, says so, waits for no rollout and warns why; upstream's
    operator had left gpupool_rollout waiting until its stall_timeout."""
    assert upgraded[0].rc == 0
    settled(op_lab)
    hv_template = template(api)["componentConfig"]["hypervisor"]["podTemplate"]

    def with_cpu(cpu):
        changed = json.loads(json.dumps(hv_template))
        changed["template"]["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})["cpu"] = cpu
        return {"components": {"hypervisor": {"pod_template": changed}},
                "rolling_update": {"auto_update_hypervisor": True, "batch_percentage": 50, "batch_interval": "1s"}}
    run, res = rollout(op_lab, **with_cpu("1000m"))  # a real change (or none, on a rerun)
    assert run.rc == 0, res.get("msg")
    settled(op_lab)
    before = dict((n, p[0]) for n, p in hypervisors(api).items())
    status = pool_obj(api)["status"]["componentStatus"]
    run, res = rollout(op_lab, **with_cpu("1"))
    assert run.rc == 0 and res["changed"] is True, res.get("msg")
    assert res["changed_components"] == [] and res["waited_for"] == [], res
    assert any("writes a quantity another way (1000m for 1)" in w for w in res.get("warnings") or []), res.get("warnings")
    assert template(api)["componentConfig"]["hypervisor"]["podTemplate"]["template"]["spec"]["containers"][0][
        "resources"]["requests"]["cpu"] == "1"
    settled(op_lab)
    assert pool_obj(api)["status"]["componentStatus"].get("hypervisor") == status.get("hypervisor")
    assert dict((n, p[0]) for n, p in hypervisors(api).items()) == before, "no hypervisor Pod replaced"


def test_a_policy_only_change_ends_with_the_cluster_running(op_lab, api, upgraded):
    """A write that starts no rollout (#47 (2)): upstream's operator left the cluster Updating
    after 3 of 6 such writes, until something made it look again. The task's own write never
    ends so: it gives the operator its requeue and, when the status is still behind, annotates
    the pools (``reconcile_requested``). The double looks again at its requeue, so there it
    annotates nothing; upstream's may need it."""
    assert upgraded[0].rc == 0
    settled(op_lab)
    pct = 25 if policy(api).get("batchPercentage") != 25 else 50
    run, res = rollout(op_lab, rolling_update={"batch_percentage": pct})
    assert run.rc == 0 and res["changed"] is True and res["changed_components"] == [], res.get("msg")
    assert cluster_obj(api)["status"]["phase"] == "Running", cluster_obj(api)["status"]
    if operator_of(op_lab) == "double":
        assert res["reconcile_requested"] == [], res
    run, res = rollout(op_lab, rolling_update={"batch_percentage": 50})
    assert run.rc == 0 and cluster_obj(api)["status"]["phase"] == "Running"


# ---- who a rollout needs, away while it waits ---------------------------------------------------
def test_a_controller_manager_away_while_a_batch_waits_is_said_with_how_long(op_lab, api, upgraded):
    """kube-controller-manager (leader-elected, as in production) stopped for 45 s while the
    rollout waits out the pool's batchInterval of 75 s: the rollout finishes, and its warnings say
    kube-controller-manager was away, for how long, and why: its leader Lease was not renewed
    (#45 item 4)."""
    assert upgraded[0].rc == 0
    settled(op_lab)
    change = hv_change("2.17.3-s", batch_interval="75s")
    job = start_playbook("gpupool_rollout.yml", dict(
        {"lab_kubeconfig": op_lab["kubeconfig"], "gr_pool": POOL},
        **dict(("gr_" + k, v) for k, v in change.items())))
    try:
        wait_pool(api, pool_progress_at_least(50), timeout=120, name=GPUPOOL)
        cluster.outage(op_lab["state_dir"], 45, component="kube-controller-manager")
    finally:
        run = job.finish(timeout=300)
    res = run.task_results("Rollout")
    assert run.rc == 0 and res["components"]["hypervisor"]["synced"] is True, res.get("msg")
    said = [re.search(r"^kube-controller-manager was away for (\d+)s while this task waited \(from [^)]+\): "
                      r"its leader Lease was last renewed \d+s before", w) for w in res.get("warnings") or []]
    said = [m for m in said if m]
    # Away from when the Lease is past its 15 s and 10 s of slack, seen every 10 s, until the
    # restarted kube-controller-manager renews it.
    assert len(said) == 1 and 1 <= int(said[0].group(1)) <= 45, res.get("warnings")
    assert all_on(api, HV + "2.17.3-s")


def test_a_deadline_pauses_mid_rollout_and_the_next_run_resumes(op_lab, api, upgraded):
    """The pool's own batchInterval (60 s) holds the second batch; the deadline comes first."""
    assert upgraded[0].rc == 0
    settled(op_lab)
    deadline = (datetime.now(timezone.utc) + timedelta(seconds=20)).isoformat()
    run, res = rollout(op_lab, deadline=deadline, on_deadline="pause",
                       **hv_change("2.17.2-s", batch_interval="60s"))
    assert run.rc != 0
    assert res["paused"] == ["hypervisor"] and "paused hypervisor" in res["msg"], res.get("msg")
    assert policy(api)["autoUpdateHypervisor"] is False
    assert cluster_obj(api)["metadata"]["annotations"]["ops.tensor-fusion.ai/paused"] == "%s:hypervisor" % POOL
    status = pool_obj(api)["status"]["componentStatus"]
    assert int(status.get("hypervisorUpdateProgress") or 0) == 50 and not status.get("hypervisorConfigSynced")
    rolled = [n for n, p in hypervisors(api).items() if p[1] == HV + "2.17.2-s"]
    assert len(rolled) == NODES // 2, "the first batch rolled, the second was held"
    # The same change again, without the deadline and with a short interval: resumed and finished.
    change = hv_change("2.17.2-s")
    change["rolling_update"].pop("auto_update_hypervisor")
    run, res = rollout(op_lab, **change)
    assert run.rc == 0, res.get("msg")
    assert res["changed"] is True and res["components"]["hypervisor"]["synced"] is True
    assert policy(api)["autoUpdateHypervisor"] is True
    assert "ops.tensor-fusion.ai/paused" not in (cluster_obj(api)["metadata"].get("annotations") or {})
    assert all_on(api, HV + "2.17.2-s")


# ---- Secret rotation for a pool component -------------------------------------------------------
def rotate(op_lab, **opts):
    run = run_playbook("secret_rotate.yml", dict(
        {"lab_kubeconfig": op_lab["kubeconfig"]}, **dict(("sr_" + k, v) for k, v in opts.items())))
    return run, run.task_results("Rotate")


def test_in_place_and_versioned_rotation_of_a_hypervisor_pull_secret(op_lab, api, upgraded):
    assert upgraded[0].rc == 0
    settled(op_lab)
    core = client.CoreV1Api(api)
    base = "regcred-" + uuid.uuid4().hex[:5]
    values = [canary("old"), canary("in-place"), canary("versioned")]
    core.create_namespaced_secret(NS, {"metadata": {"name": base}, "stringData": {"token": values[0]}})
    consumer = [{"kind": "TensorFusionCluster", "pool": POOL, "component": "hypervisor"}]
    hv_template = template(api)["componentConfig"]["hypervisor"]["podTemplate"]
    hv_template["template"]["spec"]["imagePullSecrets"] = [{"name": base}]
    run, res = rollout(op_lab, components={"hypervisor": {"pod_template": hv_template}},
                       rolling_update={"auto_update_hypervisor": True, "batch_percentage": 50})
    assert run.rc == 0, res.get("msg")
    uids = {n: p[0] for n, p in hypervisors(api).items()}

    run, res = rotate(op_lab, name=base, strategy="in_place", string_data={"token": values[1]},
                      consumers=consumer)
    assert run.rc == 0, res.get("msg")
    assert res["changed"] is True
    assert [s["step"] for s in res["steps"]] == ["backup", "update", "restart", "roll", "verify"]
    assert_no_value(run.stdout + run.stderr, values)
    secret = core.read_namespaced_secret(base, NS)
    assert base64.b64decode(secret.data["token"]).decode() == values[1]
    env = {"name": "TFOPS_SECRET_VERSION_" + base.upper().replace("-", "_"),
           "value": "%s:%s" % (secret.metadata.uid, secret.metadata.resource_version)}
    pods = hypervisors(api)
    assert len(pods) == NODES and not set(uids.values()) & {p[0] for p in pods.values()}, "every Pod replaced"
    assert all(env in [{"name": e.name, "value": e.value} for e in p[3].spec.containers[0].env or []]
               for p in pods.values())

    run, res = rotate(op_lab, name=base, strategy="versioned", string_data={"token": values[2]},
                      consumers=consumer, delete_old=True)
    assert run.rc == 0, res.get("msg")
    steps = [s["step"] for s in res["steps"]]
    # Every previous version goes once verified: the base Secret and the in-place run's backup.
    assert steps[:4] == ["create", "repoint", "roll", "verify"] and set(steps[4:]) == {"delete_old"}
    assert_no_value(run.stdout + run.stderr, values)
    new = res["secret"]["name"]
    assert base in res["deleted"] and len(res["deleted"]) == len(steps) - 4
    names = {s.metadata.name for s in core.list_namespaced_secret(NS).items}
    assert new in names and base not in names
    pods = hypervisors(api)
    assert len(pods) == NODES and all([s.name for s in p[3].spec.image_pull_secrets] == [new] for p in pods.values())
    run, again = rotate(op_lab, name=base, strategy="versioned", string_data={"token": values[2]},
                        consumers=consumer, delete_old=True)
    assert run.rc == 0 and again["changed"] is False, again


def test_a_rotation_the_operator_would_never_roll_out_is_refused_before_any_write(op_lab, api, upgraded):
    """#47 (4): with enableVector on over the chart's one-container hypervisor template, the
    operator replaces the containers with bare ones of its own, dropping the environment where an
    in_place rotation records the Secret's version: the rotation could never reach the Pods
    (upstream's operator showed it: the module waited, put the old content back and said the
    consumers were restarted). It is refused before anything is written, saying why."""
    assert upgraded[0].rc == 0
    settled(op_lab)
    core = client.CoreV1Api(api)
    base = "vecred-" + uuid.uuid4().hex[:5]
    core.create_namespaced_secret(NS, {"metadata": {"name": base}, "stringData": {"token": canary("old")}})
    consumer = [{"kind": "TensorFusionCluster", "pool": POOL, "component": "hypervisor"}]
    hv_template = template(api)["componentConfig"]["hypervisor"]["podTemplate"]
    assert len(hv_template["template"]["spec"]["containers"]) == 1, "the chart renders one container"
    hv_template["template"]["spec"]["imagePullSecrets"] = [{"name": base}]
    rolling = {"auto_update_hypervisor": True, "batch_percentage": 50, "batch_interval": "1s"}
    run, res = rollout(op_lab, components={"hypervisor": {"pod_template": hv_template, "enable_vector": True}},
                       rolling_update=rolling)
    assert run.rc == 0, res.get("msg")
    try:
        secrets_before = dict((s.metadata.name, s.metadata.resource_version) for s in core.list_namespaced_secret(NS).items)
        tfc_before = cluster_obj(api)["metadata"]["generation"]
        never = canary("never")
        run, res = rotate(op_lab, name=base, strategy="in_place", string_data={"token": never}, consumers=consumer)
        assert run.rc != 0 and res["changed"] is False, res
        assert ("the operator would never roll this rotation out (its hypervisor template has 1 container "
                "while enableVector is on") in res["msg"] and "nothing was written" in res["msg"], res["msg"]
        assert_no_value(run.stdout + run.stderr, [never])
        assert dict((s.metadata.name, s.metadata.resource_version)
                    for s in core.list_namespaced_secret(NS).items) == secrets_before
        assert cluster_obj(api)["metadata"]["generation"] == tfc_before, "the TensorFusionCluster was not written"
    finally:
        run, res = rollout(op_lab, components={"hypervisor": {"enable_vector": False}}, rolling_update=rolling)
        assert run.rc == 0, res.get("msg")


# ---- a health gate -------------------------------------------------------------------------------
def test_a_health_gate_stops_a_bad_batch(op_lab, api, upgraded):
    """The service's health check fails once the first batch runs the new hypervisor: the gate
    after that batch pauses the pool, and no other node rolls."""
    assert upgraded[0].rc == 0
    settled(op_lab)
    server = HTTPServer(("127.0.0.1", 0), _Answers500)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = "http://127.0.0.1:%d/healthz" % server.server_port
    before = hypervisors(api)
    interval = policy(api).get("batchInterval")
    try:
        run, res = rollout(op_lab, gates={"bake_seconds": 2, "http": [{"url": url}]}, **hv_change("6.6.6-bad"))
    finally:
        server.shutdown()
    assert run.rc != 0 and res["error"] == "GateFailed", res.get("msg")
    assert "batch 1" in res["msg"] and url in res["msg"]
    gate, = res["gates"]
    assert not gate["passed"] and [f["check"] for f in gate["failures"]] == ["http"]
    assert res["gate_paused"] == ["hypervisor"] and policy(api)["autoUpdateHypervisor"] is False
    assert policy(api).get("batchInterval") == interval, "the gate's hold is given back"
    now = hypervisors(api)
    rolled = sorted(n for n, p in now.items() if p[1] == HV + "6.6.6-bad")
    untouched = sorted(n for n, p in now.items() if before[n][0] == p[0])
    assert rolled == sorted(gate["nodes"]) and len(rolled) == NODES // 2
    assert len(untouched) == NODES - len(rolled)


# ---- the rollback (runbook) ------------------------------------------------------------------------
def test_rollback_to_the_restore_point(op_lab, api, base_vars, upgraded):
    """The upgrade's snapshot back: chart 1.8.6 and the pool's componentConfig as before the
    upgrade, rolled out (also from a pool the gate left paused)."""
    run, before = upgraded
    assert run.rc == 0
    snapshot = report_of(run)["record"]["snapshot"]
    back = run_playbook("tensorfusion.ops.rollback", dict(base_vars, tfops_snapshot=snapshot["path"]),
                        timeout=900)
    assert back.rc == 0, back.stdout[-3000:]
    rep = report_of(back)
    assert rep["status"] == "succeeded" and rep["record"]["rollback"]["ok"]
    assert rep["record"]["snapshot"]["path"] == snapshot["path"]
    assert release_chart(api) == tf.V1
    assert template(api)["componentConfig"]["hypervisor"] == before["hypervisor"]
    assert "ops.tensor-fusion.ai/paused" not in (cluster_obj(api)["metadata"].get("annotations") or {})
    settled(op_lab)
    assert all_on(api, before["hypervisor"]["image"])
