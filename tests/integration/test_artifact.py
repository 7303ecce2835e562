"""The collection as users get it: the built artifact, installed by ansible-galaxy, runs a runbook
from its own files only. Its docs/ is removed after the install (a repackaged artifact may leave
documentation out), so nothing a role reads at run time may live there: the precheck runbook's
permission preflight reads the RBAC manifests of the rbac role (roles/rbac/files)."""
import json
import os
import shutil
import subprocess
from pathlib import Path

from .ansible_runner import run_playbook
from .settle import settle

REPO = Path(__file__).resolve().parents[2]


def installed_artifact(tmp_path):
    """The built artifact installed into a collections path of its own, without docs/."""
    subprocess.run(["ansible-galaxy", "collection", "build", "--output-path", str(tmp_path), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    [tarball] = tmp_path.glob("tensorfusion-ops-*.tar.gz")
    collections = tmp_path / "collections"
    # with the target as the only collections path: else ansible-galaxy finds the source tree's
    # collection (the other tests' path) already installed and installs nothing
    subprocess.run(["ansible-galaxy", "collection", "install", "--offline", "-p", str(collections), str(tarball)],
                   check=True, capture_output=True, timeout=300,
                   env=dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections)))
    root = collections / "ansible_collections" / "tensorfusion" / "ops"
    shutil.rmtree(root / "docs")
    return collections, root


def test_the_installed_artifact_without_docs_runs_the_precheck_runbook(lab, api_client, sa_kubeconfig, tmp_path):
    kubeconfig = sa_kubeconfig("precheck")
    collections, root = installed_artifact(tmp_path)
    env = {"ANSIBLE_COLLECTIONS_PATH": str(collections)}
    # ansible finds the collection only in that copy (not in the source tree the other tests use)
    listed = subprocess.run(["ansible-galaxy", "collection", "list", "tensorfusion.ops", "--format", "json"],
                            check=True, capture_output=True, text=True, env=dict(os.environ, **env), timeout=120)
    assert list(json.loads(listed.stdout)) == [str(collections / "ansible_collections")]
    assert not (root / "docs").exists() and (root / "roles" / "rbac" / "files" / "precheck.yml").is_file()
    settle(api_client)
    run = run_playbook("tensorfusion.ops.precheck", {
        "tfops_kubeconfig": kubeconfig, "tfops_artifacts_dir": str(tmp_path / "artifacts")}, env=env)
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    preflight = run.task_results("Bring the ServiceAccount, the roles (from the role's files) "
                                 "and the bindings to rbac_state")
    assert not preflight.get("failed") and preflight["missing"] == []
    [report] = (tmp_path / "artifacts").rglob("report.json")
    record = json.loads(report.read_text())
    assert record["status"] in ("unchanged", "succeeded"), record  # succeeded: a report kept in the cluster
    assert [s["name"] for s in record["steps"]][:2] == ["preflight", "precheck"]
