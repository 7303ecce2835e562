"""Restore points stored in the cluster (helm_snapshot store=cluster, the runbooks' default), as
AWX runs the runbooks: the upgrade runbook in one execution environment (one HOME), the rollback
runbook later in a new one (another, empty HOME) restores from the bundle the upgrade left as
Secrets in the release namespace; a cluster bundle someone changed is refused before any write.
Both under the runbooks' least-privilege ServiceAccount, on the session lab's own release."""
import base64
import gzip
import hashlib
import json
import threading
import time
import uuid

import pytest
from kubernetes import client

from lab import cluster

from .ansible_runner import run_playbook, start_playbook
from .test_helm_release import history, resource_versions, snapshot, user_values

NS = RELEASE = "tensor-fusion-sys"
SNAPSHOTS = "app.kubernetes.io/managed-by=tensorfusion.ops,tensorfusion.ops/snapshot-of=" + RELEASE


def snapshot_secrets(api_client):
    return {s.metadata.name: s for s in client.CoreV1Api(api_client).list_namespaced_secret(
        NS, label_selector=SNAPSHOTS).items}


@pytest.fixture
def runbook(lab, api_client, helm_bins, sa_kubeconfig, tmp_path):
    """Base variables of a runbook run; the snapshot Secrets the test adds are removed afterwards."""
    before = set(snapshot_secrets(api_client))
    yield {"tfops_kubeconfig": sa_kubeconfig(("upgrade", "rollback")),
           "tfops_chart_repo": lab["tensorfusion"]["chart_repo"], "tfops_helm_binary": helm_bins["3"],
           "tfops_verify_acceptance_pod": False,
           "tfops_artifacts_dir": str(tmp_path / "artifacts")}
    for name in set(snapshot_secrets(api_client)) - before:
        client.CoreV1Api(api_client).delete_namespaced_secret(name, NS)


def report_of(run):
    rep = run.task_results("Write the report")
    assert not rep.get("failed"), rep
    return rep


def handed_on(run):
    """What set_stats hands to the next job of an AWX workflow."""
    return run.task_results("Hand the outcome to AWX workflows")["ansible_stats"]["data"]["tfops_runs"]["localhost"]


def latest_revision(helm, lab):
    """The number of the release's newest revision (Helm prunes old ones, so the history's length stops growing)."""
    return max(r["revision"] for r in history(helm, lab))


def test_a_rollback_in_a_new_environment_restores_the_upgrades_cluster_snapshot(
        lab, api_client, helm_bins, runbook, tmp_path):
    helm = helm_bins["3"]
    values, chart = user_values(helm, lab), max(history(helm, lab), key=lambda r: r["revision"])["chart"]
    first, second = tmp_path / "home-upgrade", tmp_path / "home-rollback"
    first.mkdir()
    second.mkdir()
    marker = uuid.uuid4().hex[:8]
    # The same chart version with one more value: a new revision, no pool rollout (quick).
    run = run_playbook("tensorfusion.ops.upgrade", dict(runbook, tfops_chart_version=chart.rsplit("-", 1)[1],
                                                        tfops_values=dict(values, tfopsStoreTest=marker)),
                       env={"HOME": str(first)}, timeout=600)
    assert run.rc == 0, run.stdout[-3000:]
    rep = report_of(run)
    assert rep["status"] == "succeeded" and rep["record"]["changed"], rep["summary"]
    ref = rep["record"]["snapshot"]["path"]
    assert ref.startswith("secret://%s/tfops-snapshot.%s." % (NS, RELEASE)) and handed_on(run)["snapshot"] == ref
    assert user_values(helm, lab)["tfopsStoreTest"] == marker
    assert not (first / "tfops-snapshots").exists()  # nothing of the restore point stays in the container
    name = ref.rsplit("/", 1)[1]
    secret = snapshot_secrets(api_client)[name]
    assert secret.type == "tensorfusion.ops/snapshot"
    assert secret.metadata.labels["tensorfusion.ops/cluster-uid"] == \
        client.CoreV1Api(api_client).read_namespace("kube-system").metadata.uid

    # A later job, in a new execution environment: nothing but the cluster holds the snapshot.
    # Helm keeps at most 10 revisions (--history-max): count by the newest revision's number.
    revision = latest_revision(helm, lab)
    run = run_playbook("tensorfusion.ops.rollback", runbook, env={"HOME": str(second)}, timeout=600)
    assert run.rc == 0, run.stdout[-3000:]
    rep = report_of(run)
    assert rep["status"] == "succeeded" and rep["record"]["rollback"]["ok"], rep["summary"]
    assert rep["record"]["snapshot"]["path"] == ref and handed_on(run)["snapshot"] == ref
    assert user_values(helm, lab) == values and latest_revision(helm, lab) == revision + 1
    assert not (second / "tfops-snapshots").exists()


def _forge(api_client, name):
    """What someone who may edit Secrets does to a cluster bundle: change the saved hypervisor
    image and recompute its checksum in the index (he has no key to sign it again)."""
    core = client.CoreV1Api(api_client)
    secret = core.read_namespaced_secret(name, NS)
    assert secret.metadata.annotations["tensorfusion.ops/snapshot-parts"] == "1"
    document = json.loads(gzip.decompress(base64.b64decode(secret.data["bundle.gz"])))
    clusters = json.loads(document["tensorfusionclusters.json"])
    clusters[0]["spec"]["gpuPools"][0]["specTemplate"]["componentConfig"]["hypervisor"]["image"] = "evil:1"
    document["tensorfusionclusters.json"] = json.dumps(clusters)
    index = json.loads(document["index.json"])
    index["files"]["tensorfusionclusters.json"] = hashlib.sha256(
        document["tensorfusionclusters.json"].encode()).hexdigest()
    document["index.json"] = json.dumps(index)
    secret.data["bundle.gz"] = base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()
    core.replace_namespaced_secret(name, NS, secret)


def test_a_changed_cluster_bundle_is_refused_before_any_write(lab, api_client, helm_bins, runbook, tmp_path):
    helm = helm_bins["3"]
    run = snapshot(lab, helm, tmp_path / "unused", store="cluster", info_store="cluster", info_name=RELEASE)
    assert run.rc == 0, run.stdout[-3000:]
    snap = run.task_results("Snapshot")
    ref = snap["bundle"]
    assert snap["locations"] == [ref] and not (tmp_path / "unused").exists()
    listed = [b for b in run.task_results("Info")["bundles"] if b["location"] == ref]
    assert [(b["store"], b["usable"], b["signature"]) for b in listed] == [("cluster", True, "verified")]

    _forge(api_client, ref.rsplit("/", 1)[1])
    run = snapshot(lab, helm, tmp_path / "unused", skip=True, info_store="cluster", info_name=RELEASE)
    [item] = [b for b in run.task_results("Info")["bundles"] if b["location"] == ref]
    assert (item["usable"], item["signature"]) == (False, "invalid"), item
    assert ref not in run.task_results("Info")["usable"]

    before, versions = history(helm, lab), resource_versions(api_client)
    run = run_playbook("tensorfusion.ops.rollback", dict(runbook, tfops_snapshot=ref),
                       env={"HOME": str(tmp_path)}, timeout=600)
    assert run.rc != 0
    rep = report_of(run)
    assert rep["status"] == "failed" and rep["record"]["rollback"]["refused"], rep["summary"]
    assert "the index's signature does not verify" in rep["record"]["rollback"]["msg"]
    assert history(helm, lab) == before and resource_versions(api_client) == versions


def test_the_restore_point_search_and_the_inputs_check_ride_out_an_outage(lab):
    """kube-apiserver stopped for 8 s as the rollback role's search for a restore point
    (helm_snapshot_info) and the runbooks' inputs check (runbook_inputs) begin, side by side: with
    retry_timeout, as the runbooks give it, each waits for the API server, succeeds and warns
    (#37 item 2)."""
    outage = threading.Thread(target=cluster.outage, args=(lab["state_dir"], 8))
    outage.start()
    try:
        time.sleep(1)  # the API server is down now
        jobs = [(task, start_playbook("read_only_steps.yml", {"lab_kubeconfig": lab["kubeconfig"],
                                                              "ro_retry_timeout": 60}, args=("--tags", tag)))
                for tag, task in (("snapshot_info", "Snapshot info"), ("inputs", "Inputs"))]
        runs = [(task, job.finish(timeout=120)) for task, job in jobs]
    finally:
        outage.join()
    for task, run in runs:
        res = run.task_results(task)
        assert run.rc == 0, (task, res.get("msg"))
        assert "the API server could not be used for" in run.stdout + run.stderr, task
