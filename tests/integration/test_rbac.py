"""The collection's RBAC (roles/rbac/files) on the lab, whose API server enforces RBAC: the rbac role
grants, is idempotent, writes a private kubeconfig and removes; the precheck runbook runs with a
ServiceAccount token bound to exactly its roles (rotate_secret and upgrade run so in
test_secrecy_audit.py); and for each runbook, one rule less stops it with
"forbidden: <verb> <resource>" before it changes anything (the resourceVersions of what it would
touch are unchanged)."""
import json
import uuid

import pytest
from kubernetes import client

from lab import tensorfusion as tf

from .ansible_runner import run_playbook
from .helpers import NS, gpupool, tfc
from .settle import settle

LEASE = "tensorfusion-ops-maintenance"


def touched(api_client):
    """resourceVersions of everything a runbook changes: the lock Lease, the TensorFusionCluster,
    the GPUPool, the controller Deployment, every Secret of the namespace (Helm's storage
    included), ConfigMaps and the Namespace's Pods."""
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    found = {}
    try:
        found["lease"] = client.CoordinationV1Api(api_client).read_namespaced_lease(
            LEASE, NS).metadata.resource_version
    except client.ApiException as exc:
        assert exc.status == 404
        found["lease"] = None
    found["tfc"] = tfc(api_client)["metadata"]["resourceVersion"]
    found["pool"] = gpupool(api_client)["metadata"]["resourceVersion"]
    found["deployments"] = {d.metadata.name: d.metadata.resource_version
                            for d in apps.list_namespaced_deployment(NS).items}
    found["secrets"] = {s.metadata.name: s.metadata.resource_version
                        for s in core.list_namespaced_secret(NS).items}
    # The runs' own report ConfigMaps are their record, not a change of TensorFusion
    # (test_report_store.py follows them).
    found["configmaps"] = {c.metadata.name: c.metadata.resource_version
                           for c in core.list_namespaced_config_map(NS).items
                           if "tensorfusion.ops/report-of" not in (c.metadata.labels or {})}
    return found


def report_configmaps(api_client, runbook):
    return {c.metadata.name for c in client.CoreV1Api(api_client).list_namespaced_config_map(
        NS, label_selector="tensorfusion.ops/report-of=" + runbook).items}


def guarded(kubeconfig, runbook, rbac, tmp_path, **extra):
    """A collection runbook behind the rbac preflight (playbooks/rbac_guarded.yml)."""
    variables = {"tfops_kubeconfig": kubeconfig, "guarded_runbook": runbook, "guarded_rbac": rbac,
                 "tfops_artifacts_dir": str(tmp_path / "artifacts"),
                 "tfops_snapshot_dir": str(tmp_path / "snapshots"), "tfops_timeout": 900}
    variables.update(extra)
    return run_playbook("rbac_guarded.yml", variables, timeout=1200)


def assert_forbidden_before_any_change(run, api_client, before, text):
    assert run.rc != 0, run.stdout[-2000:]
    preflight = run.task_results("Bring the ServiceAccount, the roles (from the role's files) "
                                 "and the bindings to rbac_state")
    assert preflight["msg"].startswith("forbidden: " + text), preflight["msg"]
    assert preflight["error"] == "Forbidden"
    assert run.stdout.count("PLAY [") == 1, "the runbook's play never started"
    assert touched(api_client) == before


def test_role_grants_idempotently_with_a_private_kubeconfig_and_removes(lab, api_client, tmp_path):
    name = "tfops-role-" + uuid.uuid4().hex[:6]
    path = tmp_path / "sa.kubeconfig"
    run = run_playbook("rbac_role.yml", {"lab_kubeconfig": lab["kubeconfig"], "sa_name": name,
                                         "sa_kubeconfig_path": str(path)}, args=["--diff"])
    assert run.rc == 0, run.stdout[-3000:]
    facts = {}
    for entry in run.results:
        facts.update(entry["result"].get("ansible_facts") or {})
    first, again, removed = facts["granted"], facts["granted_again"], facts["removed"]
    assert first["changed"] is True
    assert {"action": "create", "kind": "ServiceAccount", "name": name, "namespace": NS} in first["changes"]
    assert sorted(first["roles"]) == sorted(
        ["ClusterRole/tensorfusion-ops-%s" % r for r in ("precheck", "verify", "rotate")]
        + ["Role/%s/tensorfusion-ops-%s" % (NS, r) for r in ("precheck", "rotate", "report")])
    assert again["changed"] is False and again["changes"] == []
    stat_result = run.task_results("Kubeconfig file")["stat"]
    assert stat_result["exists"] and stat_result["mode"] == "0600"
    gathered = run.task_results("Gather with the ServiceAccount's token")
    assert gathered["data"]["pools"], "the token works"
    assert facts["verified"]["missing"] == []
    assert removed["changed"] is True and not path.exists()
    assert not [s for s in client.CoreV1Api(api_client).list_namespaced_service_account(NS).items
                if s.metadata.name == name]
    bindings = client.RbacAuthorizationV1Api(api_client).list_cluster_role_binding().items
    assert not [b for b in bindings for s in b.subjects or [] if s.name == name]


def test_precheck_runbook_runs_read_only_under_its_service_account(lab, api_client, sa_kubeconfig, tmp_path):
    kubeconfig = sa_kubeconfig("precheck")  # before the snapshot: it creates a token Secret
    settle(api_client)
    before, reports_before = touched(api_client), report_configmaps(api_client, "precheck")
    run = guarded(kubeconfig, "precheck", "precheck", tmp_path)
    assert run.rc == 0, run.stdout[-3000:]
    assert touched(api_client) == before
    reports = list((tmp_path / "artifacts").rglob("report.json"))
    assert len(reports) == 1
    # ... and its one write: its report, also kept in the cluster with the token's own rights.
    stored = run.task_results("Write the report")["configmap"]
    assert stored and stored["name"] in report_configmaps(api_client, "precheck") - reports_before


def test_precheck_without_one_rule_fails_clearly_and_reads_only(lab, api_client, sa_kubeconfig, tmp_path):
    """Without the preflight, the module itself names the missing permission."""
    kubeconfig = sa_kubeconfig("precheck", drop=("Role", "secrets", "list"))
    before = touched(api_client)
    run = run_playbook("tensorfusion.ops.precheck", {
        "tfops_kubeconfig": kubeconfig, "tfops_artifacts_dir": str(tmp_path / "artifacts"),
        "tfops_rbac_preflight": False})
    assert run.rc != 0
    gathered = run.task_results("Gather the health picture of TensorFusion")
    assert gathered["msg"].startswith("forbidden: list secrets"), gathered["msg"]
    assert touched(api_client) == before
    # ... and the runbook's own preflight says the same before anything else runs.
    run = run_playbook("tensorfusion.ops.precheck", {
        "tfops_kubeconfig": kubeconfig, "tfops_artifacts_dir": str(tmp_path / "artifacts2")})
    assert_forbidden_before_any_change(run, api_client, before, "list secrets in %s" % NS)
    assert "Gather the health picture" not in run.stdout, "the precheck never started"
    # The preflight is the run's first step: its failure is reported like any other.
    report, = (tmp_path / "artifacts2").rglob("report.json")
    record = json.loads(report.read_text())
    assert record["status"] == "failed" and record["error"]["step"] == "preflight"
    assert record["error"]["msg"].startswith("forbidden: list secrets")


@pytest.mark.parametrize("runbook, rbac, drop, text", [
    ("upgrade", "upgrade", ("ClusterRole", "tensorfusionclusters", "update"),
     "update tensorfusionclusters.tensor-fusion.ai (cluster-wide)"),
    ("rollback", "rollback", ("Role", "secrets", "get"), "get secrets in %s" % NS),
    ("rotate_secret", "rotate", ("Role", "secrets", "delete"), "delete secrets in %s" % NS),
], ids=["upgrade", "rollback", "rotate"])
def test_runbook_without_one_rule_stops_before_any_change(
        lab, api_client, sa_kubeconfig, tmp_path, runbook, rbac, drop, text):
    kubeconfig = sa_kubeconfig(rbac, drop=drop)
    settle(api_client)
    before = touched(api_client)
    run = guarded(kubeconfig, runbook, rbac, tmp_path, tfops_chart_version=tf.V2,
                  tfops_secret_name="tf-cloud-vendor-credentials",
                  tfops_secret_string_data={"ak": "never-written", "sk": "never-written"})
    assert_forbidden_before_any_change(run, api_client, before, text)


def tf_release_chart(api_client):
    import base64
    import gzip
    secrets = client.CoreV1Api(api_client).list_namespaced_secret(
        NS, label_selector="owner=helm,name=tensor-fusion-sys,status=deployed").items
    newest = max(secrets, key=lambda s: int(s.metadata.labels["version"]))
    data = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(newest.data["release"]))))
    return data["chart"]["metadata"]["version"]
