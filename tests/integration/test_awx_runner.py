"""The runbooks through AWX's own engine: ansible-runner, from a private data dir laid out as AWX
lays it out (awx_job.py), with the survey's defaults and answers as env/extravars, the Kubernetes
bearer-token credential's K8S_AUTH_* as env/envvars (a ServiceAccount bound to exactly the
runbooks' RBAC, no kubeconfig anywhere), an empty HOME, the project checked out under project/ and
the collection installed under requirements_collections/ - what an execution environment sees.

The jobs of one workflow: precheck; upgrade (the chart at its version with one more value, so
that the chart step writes a revision and nothing rolls); rollback to the restore point the
upgrade handed over through set_stats, from a fresh HOME, as a workflow's next job would run (and
before it, the failure node after an upgrade that stopped before its restore point: nothing). The
job events, the artifact data AWX stores from set_stats, and every file under artifacts/ are
checked: no credential and no value of the lab's Secrets in any of them."""
import base64
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes import client

from lab import tensorfusion as tf

from .awx_job import artifact_data, bearer_token_env, job_events, job_extra_vars, lay_out, load_survey

REPO = Path(__file__).resolve().parents[2]
NS = RELEASE = "tensor-fusion-sys"
# The Demo Inventory's localhost: AWX's own default inventory host sets the interpreter so.
LOCALHOST = {"localhost": {"ansible_connection": "local", "ansible_python_interpreter": "{{ ansible_playbook_python }}"}}


@pytest.fixture(scope="module")
def collection(tmp_path_factory):
    """The collection as AWX installs it from the project's requirements (a staged copy)."""
    root = tmp_path_factory.mktemp("awx-collection")
    subprocess.run([str(REPO / "tests" / "stage-collection.sh"), str(root)], cwd=str(REPO), check=True,
                   capture_output=True, text=True, timeout=120)
    return root / "ansible_collections" / "tensorfusion" / "ops"


@pytest.fixture(scope="module")
def credential(sa_kubeconfig):
    """(host, token, CA PEM) of the ServiceAccount the upgrade and rollback job templates use."""
    config = json.loads(Path(sa_kubeconfig(("upgrade", "rollback"))).read_text())
    cluster = config["clusters"][0]["cluster"]
    return (cluster["server"], config["users"][0]["user"]["token"],
            base64.b64decode(cluster["certificate-authority-data"]).decode())


class Job:
    """One AWX job: its private data dir, HOME, ident; run() is ansible-runner as the EE runs it."""
    counter = 4200

    def __init__(self, base, collection, credential, helm_bin):
        Job.counter += 1
        self.id = str(Job.counter)
        self.ident = "job-%s" % self.id
        self.pdd = base / self.ident
        self.home = base / (self.ident + "-home")
        self.home.mkdir()
        self.collection, self.credential, self.helm_bin = collection, credential, helm_bin

    def run(self, runbook, answers, template_extra_vars=None, artifacts=None):
        extravars = job_extra_vars(load_survey(runbook), answers, template_extra_vars, artifacts)
        extravars.update(awx_job_id=int(self.id), awx_job_template_name="TensorFusion " + runbook,
                         awx_user_name="admin", awx_job_launch_type="workflow")
        self.pdd.mkdir()
        envvars = dict(bearer_token_env(self.pdd, *self.credential), HOME=str(self.home), JOB_ID=self.id,
                       ANSIBLE_COLLECTIONS_PATH=str(self.pdd / "requirements_collections"),
                       ANSIBLE_FORCE_COLOR="0", ANSIBLE_RETRY_FILES_ENABLED="False")
        lay_out(self.pdd, LOCALHOST, extravars, envvars, job_timeout=300)
        shutil.copytree(str(self.collection), str(self.pdd / "requirements_collections" / "ansible_collections" /
                                                  "tensorfusion" / "ops"), symlinks=True)
        shutil.copytree(str(self.collection / "playbooks"), str(self.pdd / "project" / "playbooks"))
        # The EE's environment: its Python (with ansible-core and ansible-runner) and helm on PATH,
        # nothing of the test process (no KUBECONFIG, no K8S_AUTH_*).
        path = os.pathsep.join([os.path.dirname(sys.executable), os.path.dirname(self.helm_bin), "/usr/bin", "/bin"])
        env = {"PATH": path, "HOME": str(self.home), "LANG": "C.UTF-8"}
        self.proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-runner"), "run",
                                    str(self.pdd), "-p", "playbooks/%s.yml" % runbook, "--ident", self.ident],
                                   capture_output=True, text=True, env=env, timeout=330, check=False)
        self.artifacts = self.pdd / "artifacts" / self.ident
        self.events = job_events(self.pdd, self.ident)
        return self

    @property
    def status(self):
        return (self.artifacts / "status").read_text().strip(), (self.artifacts / "rc").read_text().strip()

    def results(self, task):
        """event_data of the task's results (runner_on_ok, _failed, _skipped: not runner_on_start),
        each with the event's own verdict as ``failed`` (the result's key may be left out)."""
        return [dict(e["event_data"], failed=e["event"] == "runner_on_failed") for e in self.events
                if e["event"].startswith("runner_on_") and e["event"] != "runner_on_start"
                and e["event_data"].get("task") == task]

    def assert_succeeded(self):
        tail = self.proc.stdout[-4000:] + self.proc.stderr[-2000:]
        assert self.status == ("successful", "0"), tail
        failed = [(e["event_data"].get("task"), e["event_data"].get("res", {}).get("msg"))
                  for e in self.events if e["event"] == "runner_on_failed" and not e["event_data"].get("ignore_errors")]
        assert not failed, failed

    def ok(self, task, changed=None):
        found = [r for r in self.results(task) if r["res"].get("changed") is changed or changed is None]
        assert found and all(not r["failed"] for r in found), (task, self.results(task))
        return found[-1]["res"]


def deployed_release(api_client):
    secrets = client.CoreV1Api(api_client).list_namespaced_secret(
        NS, label_selector="owner=helm,name=%s,status=deployed" % RELEASE).items
    newest = max(secrets, key=lambda s: int(s.metadata.labels["version"]))
    return json.loads(gzip.decompress(base64.b64decode(base64.b64decode(newest.data["release"]))))


def secret_values(api_client, token):
    """What must never reach an artifact: the token, and every value of the namespace's Secrets
    (not Helm's release records, not the CA and namespace of token Secrets: no secrets)."""
    values = {token}
    for secret in client.CoreV1Api(api_client).list_namespaced_secret(NS).items:
        if secret.type == "helm.sh/release.v1":
            continue
        for key, data in (secret.data or {}).items():
            value = base64.b64decode(data).decode("utf-8", "replace")
            if key not in ("ca.crt", "namespace") and len(value) >= 8:
                values.add(value)
    return values


def leaks(folder, values, allow_env_token=None):
    """(file, what) for every value found in a file under ``folder``. ansible-runner's own record
    of the process environment (artifacts/<ident>/command) holds the credential's token as
    K8S_AUTH_API_KEY, as env/envvars does: allowed there, and only there."""
    found = []
    for path in sorted(p for p in Path(folder).rglob("*") if p.is_file()):
        text = path.read_text(errors="replace")
        if allow_env_token and path.name == "command" and path.parent.parent.name == "artifacts":
            command = json.loads(text)
            assert command["env"].pop("K8S_AUTH_API_KEY") == allow_env_token
            text = json.dumps(command)
        found += [(str(path), value[:6] + "...") for value in values if value in text]
    return found


def test_precheck_upgrade_and_rollback_as_awx_jobs(lab, api_client, helm_bins, credential, collection, tmp_path):
    _host, token, _ca = credential
    jobs = []

    def job():
        jobs.append(Job(tmp_path, collection, credential, helm_bins["3"]))
        return jobs[-1]

    # Job template settings that are no survey questions: a value that renders nothing (so the
    # chart step writes a revision and no Pod rolls), the lab's test Pod skipped as elsewhere.
    marker = "awx-" + os.urandom(3).hex()
    template = {"tfops_values": {"tfopsAwxRunnerCheck": marker}}
    fast = {"tfops_verify_acceptance_pod": "false"}
    before = deployed_release(api_client)

    precheck = job().run("precheck", {})
    precheck.assert_succeeded()
    precheck.ok("Gather the health picture of TensorFusion", changed=False)
    run = artifact_data(precheck.events)["tfops_runs"]["localhost"]
    assert (run["playbook"], run["status"], run["changed"]) == ("precheck", "unchanged", False), run

    upgrade = job().run("upgrade", dict(fast, tfops_chart_version=tf.V1,
                                        tfops_chart_repo=lab["tensorfusion"]["chart_repo"]), template)
    upgrade.assert_succeeded()
    lock = upgrade.ok("Take (or renew) the maintenance lock")
    assert "job=%s" % upgrade.id in lock["holder"], lock["holder"]
    upgrade.ok("Capture a restore point of the release and the GPU-pool configuration", changed=False)
    assert upgrade.ok("Upgrade the Helm release", changed=True)["revision_after"] > before["version"]
    upgrade.ok("Hand the outcome to AWX workflows")
    stats = artifact_data(upgrade.events)
    run = stats["tfops_runs"]["localhost"]
    assert (run["playbook"], run["status"], run["changed"]) == ("upgrade", "succeeded", True), run
    assert run["chart_version_before"] == run["chart_version_after"] == tf.V1 and run["snapshot"], run
    assert stats["tfops_report_dir"] == run["report_dir"]
    # Kept in the cluster too, with the job's K8S_AUTH_* credential (the report's own inventory
    # host option once shadowed the auth host, and the ConfigMap was never stored).
    assert (run.get("report_ref") or "").startswith("configmap://"), run
    assert (deployed_release(api_client).get("config") or {}).get("tfopsAwxRunnerCheck") == marker

    # A workflow's failure node after an upgrade that stopped before its restore point: nothing to undo.
    nothing = job().run("rollback", {}, artifacts={"tfops_runs": {"localhost": dict(run, snapshot=None, changed=False)}})
    nothing.assert_succeeded()
    assert not nothing.results("Take (or renew) the maintenance lock") and not artifact_data(nothing.events)

    # The workflow's next job: a new HOME (a new EE); the restore point comes with the upgrade's
    # set_stats (tfops_snapshot left blank, as the survey's default).
    rollback = job().run("rollback", {"tfops_verify_acceptance_pod": "false"}, artifacts=stats)
    rollback.assert_succeeded()
    rollback.ok("Roll the chart and the pools back to the snapshot", changed=True)
    back = artifact_data(rollback.events)["tfops_runs"]["localhost"]
    assert (back["playbook"], back["status"], back["snapshot"]) == ("rollback", "succeeded", run["snapshot"]), back
    release = deployed_release(api_client)
    assert "tfopsAwxRunnerCheck" not in (release.get("config") or {}) and release["chart"]["metadata"]["version"] == tf.V1

    secrets = secret_values(api_client, token)
    assert len(secrets) > 1, "the namespace's Secrets (the snapshot key at least) are searched for too"
    for done in jobs:
        names = set(p.name for p in done.artifacts.iterdir())
        assert {"job_events", "status", "rc", "stdout", "command"} <= names, names
        assert not leaks(done.artifacts, secrets, allow_env_token=token), done.ident
        # The reports and restore points the job left in its HOME hold no secret either.
        assert not leaks(done.home, secrets), done.ident
