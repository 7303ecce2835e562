"""Change plans on the lab, as a change board uses them: a check-mode upgrade of chart 1.8.6 ->
1.8.7 with a new hypervisor image is a plan (it writes nothing: no Lease, Secret, ConfigMap or
local snapshot), saved to a file; a plan whose cluster or inputs drifted, or that was altered or
expired, is refused before any write; a fresh plan applied does what it said, in about the time
it said; then a plan of the rollback, applied, puts the session lab back to chart 1.8.6; a plan
says "would", names the images and policy from and to, and its --diff goes the change's way."""
import base64
import gzip
import json
import stat
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from .ansible_runner import run_playbook
from .helpers import GROUP, NS, POOL, VERSION, tfc, wait_for
from .settle import settle
from .test_runbooks import HV, V1, V2, pool_template, release_chart, report_of

IMAGE = HV + "2.17.5"


@pytest.fixture(scope="module")
def base(lab, api_client, helm_bins, tmp_path_factory, sa_kubeconfig):
    tmp = tmp_path_factory.mktemp("plans")
    settle(api_client)
    assert release_chart(api_client) == V1, "the session lab starts every module at chart 1.8.6"
    original = pool_template(tfc(api_client))["componentConfig"]["hypervisor"]["image"]
    values = {"tfops_kubeconfig": sa_kubeconfig(("upgrade", "rollback")),
              "tfops_chart_repo": lab["tensorfusion"]["chart_repo"], "tfops_helm_binary": helm_bins["3"],
              "tfops_artifacts_dir": str(tmp / "artifacts"),
              "tfops_snapshot_dir": str(tmp / "snapshots"), "tfops_snapshot_store": "both",
              "tfops_verify_acceptance_pod": False, "tfops_report_store": "local"}
    yield {"vars": values, "tmp": tmp, "original_image": original}
    if release_chart(api_client) != V1:  # a test failed half-way: the next module needs 1.8.6 back
        snapshots = sorted((tmp / "snapshots").glob("*"))
        assert snapshots, "nothing to roll back to"
        run = run_playbook("tensorfusion.ops.rollback", dict(values, tfops_snapshot=str(snapshots[0])), timeout=900)
        assert run.rc == 0, run.stdout[-3000:]
    settle(api_client)


def upgrade(base, **extra):
    return dict(dict(base["vars"], tfops_chart_version=V2, tfops_hypervisor_image=IMAGE, tfops_batch_percentage=20),
                **extra)


def cluster_state(api_client):
    """resourceVersion of every object a runbook could write: the pools, the release namespace's
    Secrets (restore points, Helm's revisions), ConfigMaps (reports) and Leases (the lock)."""
    custom, core = client.CustomObjectsApi(api_client), client.CoreV1Api(api_client)
    state = {}
    for plural in ("tensorfusionclusters", "gpupools"):
        for obj in custom.list_cluster_custom_object(GROUP, VERSION, plural)["items"]:
            state[(plural, obj["metadata"]["name"])] = obj["metadata"]["resourceVersion"]
    for kind, items in (("secret", core.list_namespaced_secret(NS).items),
                        ("configmap", core.list_namespaced_config_map(NS).items),
                        ("lease", client.CoordinationV1Api(api_client).list_namespaced_lease(NS).items)):
        for obj in items:
            state[(kind, obj.metadata.name)] = obj.metadata.resource_version
    return state


def quiet(api_client, seconds=4, limit=90):
    """Until the operator has stopped writing the pools (its status writes follow an edit for a
    while): no write of a TensorFusionCluster or GPUPool for ``seconds``, watched, within ``limit``."""
    custom = client.CustomObjectsApi(api_client)
    last = {"versions": None, "since": time.monotonic()}

    def still(_pool):
        versions = sorted((plural, obj["metadata"]["name"], obj["metadata"]["resourceVersion"])
                          for plural in ("tensorfusionclusters", "gpupools")
                          for obj in custom.list_cluster_custom_object(GROUP, VERSION, plural)["items"])
        if versions != last["versions"]:
            last.update(versions=versions, since=time.monotonic())
        return time.monotonic() - last["since"] >= seconds
    still.what = "the operator to stop writing the pools: no write of them for %ss" % seconds
    wait_for(custom.list_cluster_custom_object, still, GROUP, VERSION, "gpupools", timeout=limit, every=1)


def gpunodes(api_client):
    return [n for n in client.CustomObjectsApi(api_client).list_cluster_custom_object(GROUP, VERSION, "gpunodes")["items"]
            if (n["metadata"].get("labels") or {}).get("tensor-fusion.ai/pool-%s" % POOL) == "true"]


def make_plan(base, api_client, name, **extra):
    # A check-mode run writes nothing; the operator double may still be writing pool status
    # after an earlier test's edit, so the comparison starts from a still cluster.
    quiet(api_client)
    before = cluster_state(api_client)
    path = base["tmp"] / name
    run = run_playbook("tensorfusion.ops.upgrade", upgrade(base, tfops_plan_out=str(path), **extra), args=["--check"],
                       timeout=600)
    assert run.rc == 0, run.stdout[-3000:]
    assert cluster_state(api_client) == before, "a check-mode run wrote to the cluster"
    return run, path


@pytest.fixture(scope="module")
def first_plan(base, api_client):
    return make_plan(base, api_client, "plan-1.json")


def test_a_check_mode_run_is_a_plan_that_writes_nothing(base, api_client, first_plan):
    run, path = first_plan
    assert not list((base["tmp"] / "snapshots").glob("*")), "no local restore point in check mode"
    rep = report_of(run)
    rec, plan = rep["record"], rep["record"]["plan"]
    assert rep["status"] == "planned" and not rep["failed_run"] and not rec["changed"]
    assert "verified" not in rep["summary"] and "succeeded" not in rep["summary"] and rec["snapshot"] is None
    assert plan["chart"]["from"]["chart_version"] == V1 and plan["chart"]["to"]["chart_version"] == V2
    assert plan["chart"]["changes"] and sum(plan["chart"]["counts"].values()) > 0
    assert plan["lock"]["free"] and plan["lock"]["holder"] is None and plan["rbac"] == {"checked": True, "missing": []}
    assert plan["snapshot"]["would_write"].startswith("secret://%s/tfops-snapshot." % NS)
    nodes = len(gpunodes(api_client))
    pool, = [p for p in plan["pools"] if p["gpupool"] == POOL]
    assert pool["components"] == ["hypervisor"] and "user" in pool["origin"]["hypervisor"]
    assert pool["nodes"] == nodes and pool["batch_percentage"] == 20 and pool["batch_count"] == 5
    assert sum(pool["batch_sizes"]) == nodes and pool["estimated_seconds"] > 0
    assert plan["estimate"]["fits"] is True and plan["estimate"]["deadline"]
    html = Path(rep["dir"], "report.html").read_text()
    assert "planned batches" in html and "<h2>Plan</h2>" in html and html.count("<svg") == len(rec["pools"])
    # The saved plan: one per host, sealed, with what it was made from (digests, never values).
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    saved = json.loads(path.read_text())["hosts"]["localhost"]
    assert saved["status"] == "planned" and saved["checksum"].startswith("sha256:")
    assert set(saved["identity"]) == {"cluster", "release", "objects", "inputs", "helm"}
    assert saved["identity"]["objects"]["GPUPool/%s" % POOL]["generation"] >= 1
    assert "token-from-cloud" not in path.read_text() and "dummy" not in path.read_text()
    # The AWX hand-over: the plan and its summary for an approval node, then the apply job.
    stats = run.task_results("Hand the plan to AWX workflows")["ansible_stats"]["data"]
    assert stats["tfops_plan"]["hosts"]["localhost"]["checksum"] == saved["checksum"]
    assert stats["tfops_plan_summary"]["localhost"].startswith("check mode, nothing written - plan of upgrade")


def refused(base, api_client, plan, message, **extra):
    before = cluster_state(api_client)
    run = run_playbook("tensorfusion.ops.upgrade", upgrade(base, tfops_plan=plan, **extra), timeout=600)
    assert run.rc != 0, run.stdout[-3000:]
    rec = report_of(run)["record"]
    assert rec["error"]["step"] == "plan" and message in rec["error"]["msg"], rec["error"]
    assert cluster_state(api_client) == before, "a refused plan wrote to the cluster"
    assert release_chart(api_client) == V1
    return rec


def test_an_altered_expired_or_foreign_plan_is_refused_before_any_write(base, api_client, first_plan):
    _run, path = first_plan
    doc = json.loads(path.read_text())
    doc["hosts"]["localhost"]["plan"]["pools"][0]["batch_count"] = 1
    altered = base["tmp"] / "altered.json"
    altered.write_text(json.dumps(doc))
    refused(base, api_client, str(altered), "altered after it was made")
    time.sleep(2)
    refused(base, api_client, str(path), "the plan expired", tfops_plan_max_age=1)
    refused(base, api_client, str(path), "inputs: changed", tfops_hypervisor_image=HV + "2.17.6")


def test_a_pool_edited_by_hand_after_the_plan_makes_the_apply_refuse(base, api_client, first_plan):
    _run, path = first_plan
    custom = client.CustomObjectsApi(api_client)
    edited = tfc(api_client)
    policy = pool_template(edited)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
    interval = policy.get("batchInterval")
    policy["batchInterval"] = "7s"  # not hashed by the operator: no campaign, only the edit
    custom.replace_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", edited["metadata"]["name"], edited)
    settle(api_client)  # the operator has copied the edit to the GPUPool
    quiet(api_client)  # and written its status: the cluster is still again
    try:
        rec = refused(base, api_client, str(path), "changed since the plan was made")
        assert "objects.TensorFusionCluster/tensor-fusion.generation" in rec["error"]["msg"], rec["error"]
    finally:
        edited = tfc(api_client)
        pool_template(edited)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchInterval"] = interval
        custom.replace_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", edited["metadata"]["name"], edited)
        settle(api_client)


def test_a_fresh_plan_applied_does_what_it_said_then_the_rollback_plan_undoes_it(base, api_client):
    plan_run, path = make_plan(base, api_client, "plan-2.json")
    plan = report_of(plan_run)["record"]["plan"]
    pool, = [p for p in plan["pools"] if p["gpupool"] == POOL]
    run = run_playbook("tensorfusion.ops.upgrade", upgrade(base, tfops_plan=str(path)), timeout=900)
    assert run.rc == 0, run.stdout[-3000:]
    rec = report_of(run)["record"]
    assert rec["status"] == "succeeded" and [s["name"] for s in rec["steps"]][:3] == ["preflight", "plan", "lock"]
    assert release_chart(api_client) == V2
    assert pool_template(tfc(api_client))["componentConfig"]["hypervisor"]["image"] == IMAGE
    done, = [p for p in rec["pools"] if p["gpupool"] == POOL]
    assert done["components"]["hypervisor"]["progress"] == 100
    # Each batch moves the progress one step (the last one perhaps seen only by the final read).
    batches = set(e["progress"] for e in done["timeline"] if e["component"] == "hypervisor" and e["progress"]) | {100}
    assert len(batches) == pool["batch_count"], (batches, pool)
    measured = next(s["seconds"] for s in rec["steps"] if s["name"] == "pools")
    assert abs(measured - pool["estimated_seconds"]) <= 0.25 * measured, (measured, json.dumps(pool), json.dumps(done["timeline"]))
    snapshot = rec["snapshot"]

    # The rollback as a plan too: it names the restore point, and its apply uses exactly it.
    before = cluster_state(api_client)
    rb_path = base["tmp"] / "rollback-plan.json"
    back_plan = run_playbook("tensorfusion.ops.rollback", dict(base["vars"], tfops_plan_out=str(rb_path)),
                             args=["--check"], timeout=600)
    assert back_plan.rc == 0, back_plan.stdout[-3000:]
    assert cluster_state(api_client) == before
    rb = report_of(back_plan)["record"]["plan"]["rollback"]
    assert rb["target_revision"] == snapshot["revision"] and rb["chart_version"] == V1 == snapshot["chart_version"]
    # Applied as an AWX apply job gets it: the plan job's set_stats document, not the file.
    handed = back_plan.task_results("Hand the plan to AWX workflows")["ansible_stats"]["data"]["tfops_plan"]
    assert handed["hosts"]["localhost"] == json.loads(rb_path.read_text())["hosts"]["localhost"]
    back = run_playbook("tensorfusion.ops.rollback", dict(base["vars"], tfops_plan=handed), timeout=900)
    assert back.rc == 0, back.stdout[-3000:]
    assert report_of(back)["record"]["status"] == "succeeded"
    assert release_chart(api_client) == V1
    assert pool_template(tfc(api_client))["componentConfig"]["hypervisor"]["image"] == base["original_image"]


def stored_pool_image(api_client):
    """The hypervisor image the deployed revision's manifest carries in the TensorFusionCluster's pool."""
    secrets = client.CoreV1Api(api_client).list_namespaced_secret(
        NS, label_selector="owner=helm,name=%s,status=deployed" % NS).items
    newest = max(secrets, key=lambda s: int(s.metadata.labels["version"]))
    data = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(newest.data["release"]))))
    cluster, = [d for d in yaml.safe_load_all(data["manifest"]) if d and d.get("kind") == "TensorFusionCluster"]
    return pool_template(cluster)["componentConfig"]["hypervisor"]["image"]


@pytest.fixture
def stored_pools_differ(base, api_client):
    """The deployed revision carries other pools than the live ones, as a rollback that keeps the
    pools leaves it (its re-rendered revision carries the pools of the upgrade; the restore then
    puts the live ones back): the previous test leaves the lab so; alone, this makes it so."""
    if release_chart(api_client) != V1 or stored_pool_image(api_client) == pool_template(tfc(api_client))[
            "componentConfig"]["hypervisor"]["image"]:
        up = run_playbook("tensorfusion.ops.upgrade", upgrade(base), timeout=900)
        assert up.rc == 0, up.stdout[-3000:]
        snapshot = report_of(up)["record"]["snapshot"]["path"]
        back = run_playbook("tensorfusion.ops.rollback", dict(base["vars"], tfops_snapshot=snapshot), timeout=900)
        assert back.rc == 0, back.stdout[-3000:]
    live = pool_template(tfc(api_client))["componentConfig"]["hypervisor"]["image"]
    assert release_chart(api_client) == V1 and stored_pool_image(api_client) != live
    return live


def test_a_plan_says_would_names_images_from_and_to_and_its_diff_goes_the_right_way(base, api_client, stored_pools_differ):
    live = stored_pools_differ
    quiet(api_client)
    before = cluster_state(api_client)
    run = run_playbook("tensorfusion.ops.upgrade", upgrade(base), args=["--check", "--diff"], timeout=600)
    assert run.rc == 0, run.stdout[-3000:]
    assert cluster_state(api_client) == before, "a check-mode run wrote to the cluster"
    # --diff: the chart step keeps the pools, so its diff shows the live pools on both sides, not
    # the revision's stored (newer) image as "before" and the live one as "after".
    chart = run.task_results("Upgrade the Helm release")
    manifest_diff = chart["diff"][1]
    clusters = [[d for d in yaml.safe_load_all(manifest_diff[side]) if d and d.get("kind") == "TensorFusionCluster"]
                for side in ("before", "after")]
    assert [pool_template(c)["componentConfig"]["hypervisor"]["image"] for c, in clusters] == [live, live]
    # changed in check mode only with a change, and then the change is named.
    assert chart["changed"] and chart["reasons"]
    assert any(chart["manifest_changes"].values()) or any(r.startswith("chart ") or r == "values differ"
                                                          for r in chart["reasons"]), chart["reasons"]
    # The chart's images from and to (the controller's tag is the chart's appVersion).
    controller = [i for i in chart["image_changes"] if i["object"].startswith("Deployment ")]
    assert controller and all(i["from"].endswith(":2.16.0") and i["to"].endswith(":2.17.0") for i in controller), \
        chart["image_changes"]
    # The pools step's plan (gpupool_rollout's spec_changes): images and policy from and to.
    rep = report_of(run)
    plan = rep["record"]["plan"]
    pool, = [p for p in plan["pools"] if p["gpupool"] == POOL]
    assert {"field": "hypervisor.image", "from": live, "to": IMAGE} in pool["spec_changes"]
    assert "would upgrade chart %s -> %s" % (V1, V2) in rep["summary"] and "would roll hypervisor" in rep["summary"]
    assert "hypervisor.image %s -> %s" % (live, IMAGE) in rep["summary"], rep["summary"]
    md = Path(rep["dir"], "report.md").read_text()
    assert "| chart | would upgrade chart %s -> %s" % (V1, V2) in md and "would roll hypervisor" in md, md
    assert "| chart | would set %s container %s image %s -> %s |" % (
        controller[0]["object"], controller[0]["container"], controller[0]["from"], controller[0]["to"]) in md, md
    steps = dict((s["name"], s) for s in rep["record"]["steps"])
    assert steps["upgrade"]["status"] == "would change" and steps["upgrade"]["changed"] is False
    assert "changed" not in [s["status"] for s in rep["record"]["steps"]], "a plan changed nothing"
    html = Path(rep["dir"], "report.html").read_text()
    assert "<th>would change</th>" in html


def test_a_rotation_plan_says_what_it_would_do(lab, api_client, ns, tmp_path):
    """rotate_secret.yml in check mode with new content: the plan and the role's line say what the
    rotation would do (back up, update, restart the consumer, verify), never "already rotated"; and
    nothing is written."""
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    core.create_namespaced_secret(ns, {"metadata": {"name": "app-token"}, "stringData": {"token": "old-value-1"}})
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "app"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "app"}},
                 "template": {"metadata": {"labels": {"app": "app"}}, "spec": {"containers": [{
                     "name": "app", "image": "busybox:1.36",
                     "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "app-token", "key": "token"}}}]}]}}}})
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "app" and (d.status.ready_replicas or 0) >= 1,
             namespace=ns, timeout=120)
    settle(api_client)
    versions = ({s.metadata.name: s.metadata.resource_version for s in core.list_namespaced_secret(ns).items},
                apps.read_namespaced_deployment("app", ns).metadata.resource_version)
    run = run_playbook("tensorfusion.ops.rotate_secret", {
        "tfops_kubeconfig": lab["kubeconfig"], "tfops_artifacts_dir": str(tmp_path / "artifacts"),
        "tfops_report_store": "local", "tfops_verify_acceptance_pod": False, "tfops_secret_name": "app-token",
        "tfops_secret_namespace": ns, "tfops_secret_string_data": {"token": "new-value-2"},
        "tfops_secret_consumers": [{"kind": "Deployment", "name": "app"}]}, args=["--check"], timeout=600)
    assert run.rc == 0, run.stdout[-3000:]
    line = run.task_results("Rotation")["msg"]
    assert "already rotated" not in line and "would rotate the Secret" in line and "would restart" in line, line
    rep = report_of(run)
    rotation = rep["record"]["plan"]["rotation"]
    assert rotation["would_change"] and [s["step"] for s in rotation["steps"]] == ["backup", "update", "restart", "verify"]
    assert "would rotate Secret app-token" in rep["summary"], rep["summary"]
    md = Path(rep["dir"], "report.md").read_text()
    assert "| rotate | would rotate Secret app-token" in md and "new-value-2" not in md and "old-value-1" not in md
    assert ({s.metadata.name: s.metadata.resource_version for s in core.list_namespaced_secret(ns).items},
            apps.read_namespaced_deployment("app", ns).metadata.resource_version) == versions, "a plan wrote"
