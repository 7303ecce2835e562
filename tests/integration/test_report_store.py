"""Reports that outlive the machine that ran the runbook (an AWX execution environment): the
precheck runbook, run with the ServiceAccount token of exactly its RBAC, keeps its report as a
ConfigMap in the release namespace (the same report.json as the local copy, no Secret value),
hands its configmap:// reference to set_stats, and prunes that runbook's reports to keep; a
check-mode run stores nothing; a token that may not create ConfigMaps costs a warning, never the
local report nor the run's own failure; two runs started in the same second keep two reports."""
import base64
import json
from datetime import datetime, timezone
from pathlib import Path

from kubernetes import client

from .ansible_runner import run_playbook, start_playbook
from .settle import settle

NS = "tensor-fusion-sys"
REPORT_OF = "tensorfusion.ops/report-of"


def reports_of(core, runbook):
    return {c.metadata.name: c for c in core.list_namespaced_config_map(
        NS, label_selector="app.kubernetes.io/managed-by=tensorfusion.ops,%s=%s" % (REPORT_OF, runbook)).items}


def old_report(core, runbook, name, started):
    core.create_namespaced_config_map(NS, {"metadata": {
        "name": name, "labels": {"app.kubernetes.io/managed-by": "tensorfusion.ops", REPORT_OF: runbook},
        "annotations": {"tensorfusion.ops/run-started": started}}, "data": {"report.json": "{}"}})


def secret_values(core):
    """Every value of every Secret of the release namespace (tokens, Helm's storage, credentials)."""
    values = set()
    for secret in core.list_namespaced_secret(NS).items:
        for key, value in (secret.data or {}).items():
            text = base64.b64decode(value).decode("utf-8", "replace")
            if key != "namespace" and len(text) >= 8:
                values.add(text)
    return values


def precheck(kubeconfig, tmp_path, *args, **extra):
    return run_playbook("tensorfusion.ops.precheck", dict({
        "tfops_kubeconfig": kubeconfig, "tfops_artifacts_dir": str(tmp_path / "artifacts")}, **extra),
        args=list(args))


def test_the_report_is_kept_in_the_cluster_and_pruned(lab, api_client, sa_kubeconfig, tmp_path):
    core = client.CoreV1Api(api_client)
    kubeconfig = sa_kubeconfig("precheck")
    for name in reports_of(core, "precheck"):  # earlier tests' runs
        core.delete_namespaced_config_map(name, NS)
    for i, day in enumerate(("01", "03", "02")):
        old_report(core, "precheck", "tfops-report-precheck-old-%d" % i, "2026-01-%sT00:00:00Z" % day)
    old_report(core, "upgrade", "tfops-report-upgrade-other-runbook", "2026-01-01T00:00:00Z")
    settle(api_client)

    checked = precheck(kubeconfig, tmp_path, "--check", tfops_report_keep=2)
    assert checked.rc == 0, checked.stdout[-3000:]
    assert checked.task_results("Write the report")["configmap"] is None
    assert len(reports_of(core, "precheck")) == 3, "a check-mode run writes nothing to the cluster"

    run = precheck(kubeconfig, tmp_path, tfops_report_keep=2)
    assert run.rc == 0, run.stdout[-3000:]
    written = run.task_results("Write the report")
    stored = written["configmap"]
    assert stored["ref"] == "configmap://%s/%s" % (NS, stored["name"]) == written["report_ref"]
    assert stored["name"].startswith("tfops-report-precheck-localhost-") and stored["content"] == "plain"
    stats = run.task_results("Hand the outcome to AWX workflows")["ansible_stats"]["data"]
    assert stats["tfops_report_ref"] == stored["ref"]
    assert stats["tfops_runs"]["localhost"]["report_ref"] == stored["ref"]

    kept = reports_of(core, "precheck")
    assert sorted(kept) == sorted([stored["name"], "tfops-report-precheck-old-1"]), "pruned to keep, oldest first"
    assert "tfops-report-upgrade-other-runbook" in reports_of(core, "upgrade"), "another runbook's are its own"
    configmap = kept[stored["name"]]
    assert configmap.data["report.json"] == (tmp_path / "artifacts" / written["dir"] / "report.json").read_text()
    assert json.loads(configmap.data["report.json"])["status"] == "unchanged"
    assert sorted(configmap.data) == ["report.html", "report.json", "report.md"]
    text = json.dumps(api_client.sanitize_for_serialization(configmap))
    assert not [v for v in secret_values(core) if v in text], "no Secret value in the report"
    core.delete_namespaced_config_map("tfops-report-upgrade-other-runbook", NS)


def test_a_report_the_token_may_not_store_is_a_warning_not_a_lost_report(lab, api_client, sa_kubeconfig, tmp_path):
    """The run fails for its own reason (a missing list secrets); the report cannot be stored in
    the cluster either: the job still fails with the run's reason, and the local report says it."""
    core = client.CoreV1Api(api_client)
    kubeconfig = sa_kubeconfig("precheck", drop=[("Role", "configmaps", "create"), ("Role", "secrets", "list")])
    before = set(reports_of(core, "precheck"))
    run = precheck(kubeconfig, tmp_path, tfops_rbac_preflight=False)
    assert run.rc != 0
    written = run.task_results("Write the report")
    assert written["configmap"] is None and not written.get("failed")
    assert any(w.startswith("the report was not stored in the cluster (forbidden: create configmaps")
               for w in written["warnings"]), written["warnings"]
    assert run.task_results("The job fails when the run did not succeed")["msg"].endswith(
        run.task_results("Gather the health picture of TensorFusion")["msg"])
    assert "forbidden: list secrets" in run.task_results("The job fails when the run did not succeed")["msg"]
    record = json.loads(next((tmp_path / "artifacts").rglob("report.json")).read_text())
    assert record["status"] == "failed" and record["error"]["msg"].startswith("forbidden: list secrets")
    assert set(reports_of(core, "precheck")) == before


def test_two_runs_started_in_the_same_second_keep_two_reports(lab, api_client, sa_kubeconfig, helm_bins, tmp_path):
    """Two upgrade runs (their precheck only, as `--tags precheck` runs it: lock, window, precheck,
    report) started together in the same UTC second: each keeps its own report, locally and in the
    cluster, even when one of them is refused at the other's lock; neither replaces the other's."""
    core = client.CoreV1Api(api_client)
    settle(api_client)
    before = set(reports_of(core, "upgrade"))
    started = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    common = {"tfops_kubeconfig": sa_kubeconfig(("upgrade", "rollback")), "tfops_chart_repo": lab["tensorfusion"]["chart_repo"],
              "tfops_helm_binary": helm_bins["3"], "tfops_artifacts_dir": str(tmp_path / "artifacts"),
              "tfops_report_keep": 20,
              # The start of both runs, as begin.yml records it: pinned, so that they fall in one second
              # whatever the load of the machine.
              "tfops_started": started}
    jobs = [start_playbook("tensorfusion.ops.upgrade", common, args=["--tags", "precheck"]) for _i in range(2)]
    runs = [job.finish(timeout=600) for job in jobs]
    written = [run.task_results("Write the report") for run in runs]
    assert [w["record"]["started"] for w in written] == [started, started]
    run_ids = [w["record"]["run_id"] for w in written]
    assert run_ids[0] and run_ids[1] and run_ids[0] != run_ids[1]
    folders = [w["dir"] for w in written]
    assert folders[0] != folders[1] and all(f.endswith(r) for f, r in zip(folders, run_ids)), folders
    names = [w["configmap"]["name"] for w in written]
    assert names[0] != names[1], names
    stored = reports_of(core, "upgrade")
    assert set(names) <= set(stored) and len(set(stored) - before) == 2
    for run, w, name in zip(runs, written, names):
        local = json.loads((Path(w["dir"]) / "report.json").read_text())
        kept = json.loads(stored[name].data["report.json"])
        assert local == kept and kept["run_id"] == w["record"]["run_id"], "each report is its own run's"
        assert (run.rc == 0) == (kept["status"] == "unchanged"), (run.rc, kept["status"], kept["error"])
        if run.rc != 0:  # refused at the other run's lock, its report still its own
            assert kept["error"]["step"] == "lock" and "is held by" in kept["error"]["msg"], kept["error"]
    for name in names:
        core.delete_namespaced_config_map(name, NS)
