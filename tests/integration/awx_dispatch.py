"""Jobs dispatched as AWX dispatches them to execution nodes, without AWX and without receptor:
the controller lays out the job's private data dir (awx_job.py) and streams it with
``ansible-runner transmit``; the execution node runs ``ansible-runner worker`` on that stream (a
process of its own, in the node's own working folder, with the node's environment: what its
execution environment holds - ansible-core, ansible-runner, helm, the collection - and its own
HOME); the worker's stream comes back to ``ansible-runner process`` on the controller, which
writes the job's events and artifacts into the private data dir as AWX's callback receiver reads
them. Receptor only carries those streams between the three (its work type runs the same worker
command); here a pipe does.

A slice's inventory is awx_job.py's (lay_out with job_slice); the slice's job gets no variable
saying it is a slice, only the extra variables every job gets (awx_job_id,
awx_job_template_name, awx_job_launch_type, and, in a workflow, awx_workflow_job_id and
awx_workflow_job_name - a sliced job's workflow job is named after its job template)."""
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from .awx_job import artifact_data, job_events, job_extra_vars, lay_out, load_survey

RUNNER = os.path.join(os.path.dirname(sys.executable), "ansible-runner")


class ExecutionNode:
    """An execution node: its own folder (HOME, the workers' private data dirs) and the
    environment its execution environment gives a job."""

    def __init__(self, name, root, collections_root, helm_bin):
        self.name = name
        self.root = Path(root) / name
        self.home = self.root / "home"
        self.work = self.root / "work"
        for folder in (self.home, self.work):
            folder.mkdir(parents=True, exist_ok=True)
        path = os.pathsep.join([os.path.dirname(sys.executable), os.path.dirname(helm_bin), "/usr/bin", "/bin"])
        self.env = {"PATH": path, "HOME": str(self.home), "LANG": "C.UTF-8",
                    "ANSIBLE_COLLECTIONS_PATH": str(collections_root)}
        # The folders the clusters' kubeconfigs are in, as an administrator would name them in
        # the execution environment (docs/awx.md): the tests' opt-in (tests/conftest.py).
        if os.environ.get("TFOPS_ALLOWED_PATHS"):
            self.env["TFOPS_ALLOWED_PATHS"] = os.environ["TFOPS_ALLOWED_PATHS"]


def _controller_env():
    return {"PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/bin", "/bin"]),
            "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}


class Dispatch:
    """``ansible-runner transmit <pdd> | ansible-runner worker | ansible-runner process <pdd>``:
    three processes, the worker on ``node``. ``wait()`` reaps each with ``os.wait4`` and keeps its
    CPU accounting (the process and every descendant it waited for)."""

    def __init__(self, pdd, ident, playbook, node):
        self.pdd, self.ident, self.node = Path(pdd), ident, node
        self.log = open(self.pdd.parent / (ident + ".log"), "wb")  # pylint: disable=consider-using-with
        self.started = time.monotonic()
        controller = _controller_env()
        # pylint: disable=consider-using-with
        self.transmit = subprocess.Popen([RUNNER, "transmit", str(self.pdd), "-p", playbook, "--ident", ident],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.log,
                                         env=controller)
        self.worker = subprocess.Popen([RUNNER, "worker", "--private-data-dir", str(node.work / ident)],
                                       stdin=self.transmit.stdout, stdout=subprocess.PIPE, stderr=self.log,
                                       env=node.env, cwd=str(node.work))
        self.process = subprocess.Popen([RUNNER, "process", str(self.pdd), "--ident", ident],
                                        stdin=self.worker.stdout, stdout=self.log, stderr=self.log, env=controller)
        self.transmit.stdout.close()
        self.worker.stdout.close()
        self.usage = {}

    def wait(self, timeout=600):
        deadline = time.monotonic() + timeout
        procs = {"transmit": self.transmit, "worker": self.worker, "process": self.process}
        while len(self.usage) < len(procs):
            for name, proc in procs.items():
                if name in self.usage:
                    continue
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
                if pid:
                    proc.returncode = os.waitstatus_to_exitcode(status)
                    self.usage[name] = usage.ru_utime + usage.ru_stime
            if time.monotonic() > deadline:
                for name, proc in procs.items():
                    if name not in self.usage:
                        proc.kill()
                raise TimeoutError("job %s on %s did not end within %d s" % (self.ident, self.node.name, timeout))
            time.sleep(0.1)
        self.ended = time.monotonic()
        self.seconds = self.ended - self.started
        self.log.close()
        return self

    @property
    def artifacts(self):
        return self.pdd / "artifacts" / self.ident

    @property
    def status(self):
        """(status, rc) as ansible-runner process wrote them on the controller."""
        try:
            return ((self.artifacts / "status").read_text().strip(), (self.artifacts / "rc").read_text().strip())
        except OSError:
            return ("lost", None)

    def output(self, tail=4000):
        return (self.pdd.parent / (self.ident + ".log")).read_text(errors="replace")[-tail:]


def dispatch_all(jobs, timeout=600):
    """Start every (pdd, ident, playbook, node) at once, as AWX starts the slices of a sliced job
    on nodes with capacity; wait for all of them."""
    started = [Dispatch(*job) for job in jobs]
    errors = []

    def wait(dispatch):
        try:
            dispatch.wait(timeout)
        except TimeoutError as exc:
            errors.append(exc)
    threads = [threading.Thread(target=wait, args=(d,)) for d in started]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise errors[0]
    return started


class Controller:
    """AWX's controller for one job template (``playbook`` with the survey of ``survey``) over one
    inventory (``hosts`` {name: vars}, ``groups`` {group: [names]}): lays out each job of a
    workflow node (one per slice, as AWX lays out a private data dir), dispatches the slices at
    once to the execution nodes (slice k to node k), hands the artifacts on as AWX does."""
    job_id = 7300

    def __init__(self, root, nodes, playbooks, workflow, hosts, groups, playbook="playbooks/fleet_upgrade.yml",
                 survey="fleet_upgrade"):
        self.folder = Path(root) / "controller"
        self.folder.mkdir(parents=True)
        self.nodes, self.playbooks, self.workflow = nodes, Path(playbooks), workflow
        self.hosts, self.groups, self.playbook, self.survey = hosts, groups, playbook, survey
        self.workflow_job_id = 0

    def jobs(self, node, answers, artifacts, slices, workflow_job_name, hosts=None):
        """The (pdd, ident, playbook, execution node) of each slice of workflow node ``node``."""
        out = []
        template = node["unified_job_template"]["name"]
        for number in range(1, slices + 1):
            Controller.job_id += 1
            ident = "job-%d" % Controller.job_id
            runs_on = self.nodes[(number - 1) % len(self.nodes)]
            extravars = job_extra_vars(load_survey(self.survey), answers, node.get("extra_data"), artifacts)
            extravars.update(awx_job_id=Controller.job_id, awx_job_template_name=template,
                             awx_job_launch_type="workflow", awx_workflow_job_id=self.workflow_job_id,
                             awx_workflow_job_name=workflow_job_name, awx_execution_node=runs_on.name,
                             awx_user_name="admin")
            pdd = self.folder / ident
            pdd.mkdir()
            envvars = {"JOB_ID": str(Controller.job_id), "ANSIBLE_FORCE_COLOR": "0",
                       "ANSIBLE_RETRY_FILES_ENABLED": "False"}
            lay_out(pdd, hosts or self.hosts, extravars, envvars, job_timeout=600, groups=self.groups,
                    job_slice=(number, slices))
            shutil.copytree(str(self.playbooks), str(pdd / "project" / "playbooks"))
            out.append((pdd, ident, self.playbook, runs_on))
        return out

    def launch(self, node, answers, artifacts, hosts=None):
        """One workflow node: a job, or (its job_slice_count above 1) AWX's workflow job of slices,
        named after the job template; every slice at once."""
        self.workflow_job_id += 1
        slices = min(int(node.get("job_slice_count") or 1), len(hosts or self.hosts))
        name = node["unified_job_template"]["name"] if slices > 1 else self.workflow["name"]
        return self.dispatch(self.jobs(node, answers, artifacts, slices, name, hosts=hosts))

    @staticmethod
    def dispatch(jobs):
        """Every job at once, to its execution node; each with its events and AWX job id."""
        started = dispatch_all(jobs)
        for job in started:
            job.events = job_events(job.pdd, job.ident)
            job.job_id = int(job.ident.split("-")[1])
        return started

    def run_workflow(self, answers, hosts=None):
        """The workflow from its root node, each node on the success of every job of the one
        before (a sliced job fails when a slice fails); the artifacts of a node's jobs merged key
        by key in the order they finished (AWX's WorkflowJob.get_effective_artifacts), children's
        over their parents'. ([(identifier, [jobs])] of the nodes run, the artifacts handed on)."""
        nodes = dict((n["identifier"], n) for n in self.workflow["workflow_nodes"])
        children = set(c["identifier"] for n in nodes.values() for kind in (n.get("related") or {}).values() for c in kind)
        todo = [i for i in nodes if i not in children]
        ran, artifacts = [], {}
        while todo:
            node = nodes[todo.pop(0)]
            jobs = self.launch(node, answers, artifacts, hosts)
            ran.append((node["identifier"], jobs))
            merged = {}
            for job in sorted(jobs, key=lambda j: j.ended):
                merged.update(artifact_data(job.events))
            artifacts = dict(artifacts, **merged)
            kind = "success_nodes" if all(j.status[0] == "successful" for j in jobs) else "failure_nodes"
            todo += [c["identifier"] for c in (node.get("related") or {}).get(kind, [])]
        return ran, artifacts
