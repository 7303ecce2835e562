"""One connection per module run (#37 item 8): the helm modules' bodies use the module's own
connection (core/module.py's Context), so that after a write and a failure the result says
``changed: true`` and names the API server, and the outages a wait rode out are warned about -
as for every other module."""
import uuid

from kubernetes import client

from lab import cluster
from lab import tensorfusion as tf

from .ansible_runner import run_playbook, start_playbook
from .helpers import NS, pool_progress_at_least, wait_pool
from .settle import settle
from .test_helm_release import HV, component_config, set_hypervisor_image, snapshot

SNAPSHOT_OF = "tensorfusion.ops/snapshot-of"


def _bundles(api_client):
    return {s.metadata.name for s in client.CoreV1Api(api_client).list_namespaced_secret(
        NS, label_selector="%s=%s" % (SNAPSHOT_OF, NS)).items}


def test_helm_snapshot_after_a_write_and_a_failure_says_changed_and_names_the_api_server(
        lab, api_client, helm_bins, sa_kubeconfig, tmp_path):
    """A snapshot stored in the cluster by credentials that may create Secrets but not delete
    them: the bundle is written, then pruning the older one (keep: 1) is forbidden. The failed
    result says changed (a bundle was written) and names the API server."""
    helm = helm_bins["3"]
    before = _bundles(api_client)
    try:
        run = snapshot(lab, helm, tmp_path / "snaps", store="cluster", keep=50)
        assert run.rc == 0, run.stdout[-3000:]
        older = _bundles(api_client) - before
        assert older, "an older bundle to prune"
        kubeconfig = sa_kubeconfig("upgrade", drop=("Role", "secrets", "delete"))
        run = run_playbook("helm_snapshot.yml", {"lab_kubeconfig": kubeconfig, "helm_binary": helm,
                                                 "hs_dest": str(tmp_path / "snaps"), "hs_store": "cluster",
                                                 "hs_keep": 1})
        res = run.task_results("Snapshot")
        assert run.rc != 0, res
        written = _bundles(api_client) - before - older
        assert written, "the new bundle was written before the failure"
        assert "forbidden" in res["msg"] and "delete" in res["msg"], res["msg"]
        assert res["changed"] is True, res
        assert res["api_server"] == lab["server"], res
    finally:
        for name in _bundles(api_client) - before:
            client.CoreV1Api(api_client).delete_namespaced_secret(name, NS)


def test_an_outage_helm_release_rides_out_is_in_its_result(lab, api_client, helm_bins, tmp_path):
    """helm_release rolling back to a snapshot waits for the pool campaign that restores its
    componentConfig; kube-apiserver stopped for 10 s in that wait: the rollback finishes and its
    result warns of the outage (its own connection dropped the warning before)."""
    settle(api_client)
    helm = helm_bins["4"]
    found = component_config(api_client)["hypervisor"]["image"]
    hand, other = ("%s:2.15.%s" % (HV, uuid.uuid4().int % 1000 + n) for n in (100, 1200))
    try:
        set_hypervisor_image(lab, hand)
        run = snapshot(lab, helm, tmp_path / "snaps")
        assert run.rc == 0, run.stdout[-3000:]
        bundle = run.task_results("Snapshot")["bundle"]
        set_hypervisor_image(lab, other)
        tf.set_knobs(api_client, batchGapFloorSeconds=4)
        job = start_playbook("helm_release.yml", {
            "lab_kubeconfig": lab["kubeconfig"], "helm_binary": helm, "hr_state": "rolled_back",
            "hr_snapshot": bundle, "hr_wait_timeout": 600})
        try:
            wait_pool(api_client, pool_progress_at_least(20), timeout=300)
            cluster.outage(lab["state_dir"], 10)
        finally:
            run = job.finish(timeout=900)
        res = run.task_results("Release")
        assert run.rc == 0, res.get("msg") or run.stdout[-3000:]
        assert res["changed"] is True and res["component_config"], res
        assert component_config(api_client)["hypervisor"]["image"] == hand
        assert res["api_server"] == lab["server"]
        warnings = " ".join(res.get("warnings") or []) + run.stdout + run.stderr
        assert "the API server could not be used for" in warnings, run.stdout[-3000:]
    finally:
        tf.set_knobs(api_client, batchGapFloorSeconds=None)
        settle(api_client)
        set_hypervisor_image(lab, found)
    settle(api_client)
