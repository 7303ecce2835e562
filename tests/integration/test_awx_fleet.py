"""The fleet runbook across two execution nodes, dispatched as AWX dispatches it (#39): the fleet
workflow of extensions/awx/fleet_workflow.yml - the canary as one job, then each wave as a job
template sliced in two - over four small labs, every job laid out as AWX lays out a private data
dir (awx_job.py), streamed with ``ansible-runner transmit`` to ``ansible-runner worker`` on its
execution node (a process of its own in the node's own folder, with the node's environment) and
back to ``ansible-runner process`` on the controller (awx_dispatch.py). Receptor, which carries
these streams in AWX, is not used: the Go module proxy refuses github.com/ansible/receptor.

The fleet: c0 (lab 0) is the canary (group tfops_fleet_wave_0); wave 1 is c1 and c2 (labs 1 and
2), wave 2 is c3 and c4, two inventory hosts of one cluster (lab 3) - a cluster entered twice by
mistake. AWX slices by host name: slice 1 gets c0, c2, c4, slice 2 gets c1, c3; slice 1 runs on
exec-a, slice 2 on exec-b, the canary (unsliced) on exec-a. So each wave is spread over both
nodes, and c3 and c4 upgrade one cluster at once from two nodes.

1. A change across the fleet: the canary first (alone), then wave 1 on both nodes, then wave 2,
   where the maintenance lock lets one of c3 and c4 upgrade lab 3 and refuses the other, naming
   the holder; each cluster keeps its restore point and its report.
2. A second change, whose health gate fails on c1 (wave 1, exec-b): c1 rolls back to its restore
   point, c2 (exec-a) goes through, and no job of wave 2 is started on either node.
3. What the runbook enforces, each refused before any write, through the same pipelines: wave 2
   started all the same (as a node wired on "always" would), and the plain fleet job sliced in
   two (each slice would start its own canary)."""
import base64
import concurrent.futures
import copy
import gzip
import json
import time
from pathlib import Path

import pytest
import yaml
from kubernetes import client, config

from lab import cluster
from lab import tensorfusion as tf

from .awx_dispatch import Controller, ExecutionNode
from .awx_job import artifact_data
from .helpers import GROUP, NS, TFC, VERSION
from .settle import settle
# The collection as the execution environment holds it (a fixture).
from .test_awx_runner import collection  # noqa: F401  # pylint: disable=unused-import

REPO = Path(__file__).resolve().parents[2]
WORKFLOW = yaml.safe_load((REPO / "extensions" / "awx" / "fleet_workflow.yml").read_text())["workflow_job_template"]
TEMPLATE = WORKFLOW["workflow_nodes"][0]["unified_job_template"]["name"]  # every node's job template
HV = "tensorfusion/tensor-fusion-hypervisor:"
LABS = 4
GROUPS = {"tfops_fleet_wave_0": ["c0"], "tfops_fleet_wave_1": ["c1", "c2"], "tfops_fleet_wave_2": ["c3", "c4"]}
LAB_OF = {"c0": 0, "c1": 1, "c2": 2, "c3": 3, "c4": 3}
LOCK = "Take (or renew) the maintenance lock"
INPUTS = "Check every tfops_* variable before anything is written"


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    """Four small labs (2 GPU nodes each, TensorFusion installed), two started at a time, settled."""
    root = tmp_path_factory.mktemp("awx-fleet-labs")
    dirs = [root / ("lab%d" % i) for i in range(LABS)]
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            states = list(pool.map(lambda d: cluster.up(d, nodes=2, cpu_nodes=0, addons=[tf.addon()]), dirs))
        for state in states:
            api = config.new_client_from_config(state["kubeconfig"])
            try:
                settle(api)  # a new lab may still run its first hypervisor campaign
                tf.set_knobs(api, batchGapFloorSeconds=1)
            finally:
                api.close()
        yield states
    finally:
        for folder in dirs:
            if folder.exists():
                cluster.down(folder)


def results(job, task):
    """{host: res} of the task's results in the job's events (``failed``: the event's)."""
    return dict((e["event_data"]["host"], dict(e["event_data"].get("res") or {}, failed=e["event"] == "runner_on_failed"))
                for e in job.events
                if e["event"] in ("runner_on_ok", "runner_on_failed") and e["event_data"].get("task") == task)


def ran_hosts(job):
    return sorted(set(e["event_data"]["host"] for e in job.events if e["event"] == "runner_on_ok"))


class View:
    """What a lab holds: the upgrade reports and restore points of the runbooks, the pool's
    hypervisor image, the lock's holder."""

    def __init__(self, state):
        api = config.new_client_from_config(state["kubeconfig"])
        try:
            core = client.CoreV1Api(api)
            self.reports = sorted(c.metadata.name for c in core.list_namespaced_config_map(
                NS, label_selector="tensorfusion.ops/report-of=upgrade").items)
            self.snapshots = sorted(s.metadata.name for s in core.list_namespaced_secret(NS).items
                                    if s.type == "tensorfusion.ops/snapshot")
            tfc = client.CustomObjectsApi(api).get_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", TFC)
            self.image = tfc["spec"]["gpuPools"][0]["specTemplate"]["componentConfig"]["hypervisor"]["image"]
            leases = client.CoordinationV1Api(api).list_namespaced_lease(NS).items
            self.holders = [le.spec.holder_identity for le in leases
                            if le.metadata.name == "tensorfusion-ops-maintenance" and le.spec.holder_identity]
        finally:
            api.close()

    def report(self, ref, kubeconfig):
        """The stored report of a configmap://<namespace>/<name> reference."""
        namespace, name = ref[len("configmap://"):].split("/")
        assert name in self.reports, (ref, self.reports)
        api = config.new_client_from_config(kubeconfig)
        try:
            cm = client.CoreV1Api(api).read_namespaced_config_map(name, namespace)
        finally:
            api.close()
        if cm.data and "report.json" in cm.data:
            return json.loads(cm.data["report.json"])
        return json.loads(gzip.decompress(base64.b64decode(cm.binary_data["report.json.gz"])))


def cpu(jobs):
    """(controller CPU-s: transmit + process, execution nodes' CPU-s: the workers and all they ran)."""
    return (sum(j.usage["transmit"] + j.usage["process"] for j in jobs), sum(j.usage["worker"] for j in jobs))


def test_a_fleet_workflow_across_two_execution_nodes(labs, collection, helm_bins, tmp_path):  # noqa: F811
    nodes = [ExecutionNode(name, tmp_path, collection.parents[2], helm_bins["3"]) for name in ("exec-a", "exec-b")]
    hosts = dict((h, {"tfops_kubeconfig": labs[i]["kubeconfig"], "tfops_chart_repo": labs[i]["tensorfusion"]["chart_repo"]})
                 for h, i in LAB_OF.items())
    fleet = Controller(tmp_path, nodes, collection / "playbooks", WORKFLOW, hosts, GROUPS)
    started = time.monotonic()
    before = [View(state) for state in labs]
    answers = {"tfops_chart_version": tf.V1, "tfops_batch_percentage": 100, "tfops_batch_interval": "1s",
               "tfops_verify_acceptance_pod": "false", "tfops_stall_timeout": 120}
    image1, image2 = HV + "fleet-39a", HV + "fleet-39b"

    # ---- 1. the change across the fleet --------------------------------------------------------
    ran, stats = fleet.run_workflow(dict(answers, tfops_hypervisor_image=image1))
    assert [i for i, _jobs in ran] == ["canary", "wave-1", "wave-2"], ran
    (canary,), wave1, wave2 = [jobs for _i, jobs in ran]
    assert canary.status == ("successful", "0"), canary.output()
    assert canary.node.name == "exec-a" and ran_hosts(canary) == ["c0"]
    assert [(j.node.name, ran_hosts(j), j.status[0]) for j in wave1] == [
        ("exec-a", ["c2"], "successful"), ("exec-b", ["c1"], "successful")], [j.output() for j in wave1]
    # Wave 1 started after the canary had ended, on both nodes.
    assert min(j.started for j in wave1) > canary.ended
    # Wave 2: c4 (exec-a) and c3 (exec-b), one cluster: the lock lets one in, refuses the other.
    assert [(j.node.name, ran_hosts(j)) for j in wave2] == [("exec-a", ["c4"]), ("exec-b", ["c3"])]
    outcome = dict((ran_hosts(j)[0], j) for j in wave2)
    winner = next(h for h, j in outcome.items() if j.status == ("successful", "0"))
    loser = ({"c3", "c4"} - {winner}).pop()
    assert outcome[loser].status[0] == "failed", [j.output() for j in wave2]
    refused = results(outcome[loser], LOCK)[loser]
    assert refused["failed"] and refused.get("error") == "LockHeld", refused
    assert "job=%d" % outcome[winner].job_id in refused["holder"], refused
    assert not results(outcome[loser], "Capture a restore point of the release and the GPU-pool configuration")
    runs = dict((h, artifact_data(j.events)["tfops_runs"][h]) for j in [canary] + wave1 + wave2 for h in ran_hosts(j))
    assert dict((h, r["status"]) for h, r in runs.items()) == {
        "c0": "succeeded", "c1": "succeeded", "c2": "succeeded", winner: "succeeded", loser: "failed"}, runs
    # Each cluster holds the restore point and the report of its run; lab 3 one restore point only.
    views = [View(state) for state in labs]
    for host in ("c0", "c1", "c2", winner):
        view, state = views[LAB_OF[host]], labs[LAB_OF[host]]
        snapshot = runs[host]["snapshot"]
        assert snapshot and snapshot.startswith("secret://%s/" % NS) and snapshot.split("/")[-1] in view.snapshots
        assert view.report(runs[host]["report_ref"], state["kubeconfig"])["status"] == "succeeded"
        assert view.image == image1 and not view.holders, (host, view.image, view.holders)
    assert len(set(views[3].snapshots) - set(before[3].snapshots)) == 1
    # What the last wave handed on: wave 2 did not pass (lab 3's second host).
    assert stats["tfops_fleet_passed"] == {"wave": 2} and list(stats["tfops_fleet_failed"]) == [loser], stats
    cpu1 = cpu([canary] + wave1 + wave2)
    phases = [("first change", time.monotonic() - started)]

    # ---- 2. a second change whose health gate fails on c1 --------------------------------------
    hosts = copy.deepcopy(hosts)
    hosts["c1"]["tfops_gates"] = {"bake_seconds": 1, "http": [{"url": "http://127.0.0.1:9/health"}]}
    views1 = views
    ran, stats = fleet.run_workflow(dict(answers, tfops_hypervisor_image=image2), hosts=hosts)
    assert [i for i, _jobs in ran] == ["canary", "wave-1"], "a wave after the failed one was started: %s" % ran
    (canary,), wave1 = [jobs for _i, jobs in ran]
    assert canary.status[0] == "successful" and ran_hosts(canary) == ["c0"], canary.output()
    by_host = dict((ran_hosts(j)[0], j) for j in wave1)
    assert by_host["c2"].status[0] == "successful" and by_host["c2"].node.name == "exec-a", by_host["c2"].output()
    assert by_host["c1"].status[0] == "failed" and by_host["c1"].node.name == "exec-b", by_host["c1"].output()
    c1 = artifact_data(by_host["c1"].events)["tfops_runs"]["c1"]
    assert c1["status"] == "rolled_back" and c1["snapshot"], c1
    assert stats["tfops_fleet_failed"] == {"c1": {"wave": 1, "status": "rolled_back"}}, stats
    views = [View(state) for state in labs]
    assert views[1].image == image1, "c1 is back at its restore point"
    assert views[1].report(c1["report_ref"], labs[1]["kubeconfig"])["status"] == "rolled_back"
    assert views[0].image == views[2].image == image2
    # Wave 2 never started on either node: lab 3 as the first change left it.
    assert views[3].image == image1 and views[3].reports == views1[3].reports
    assert views[3].snapshots == views1[3].snapshots and not views[3].holders

    phases.append(("second change", time.monotonic() - started - sum(p for _n, p in phases)))

    # ---- 3. refused before any write ------------------------------------------------------------
    wave_2 = next(n for n in WORKFLOW["workflow_nodes"] if n["identifier"] == "wave-2")
    plain = {"identifier": "plain", "unified_job_template": {"name": TEMPLATE}}  # the fleet job (its canary and waves) sliced
    fleet.workflow_job_id += 1
    jobs = fleet.dispatch(fleet.jobs(wave_2, dict(answers, tfops_hypervisor_image=image2), stats, 2, TEMPLATE) +
                          fleet.jobs(plain, dict(answers, tfops_hypervisor_image=image2), {}, 2, TEMPLATE))
    for job in jobs:
        assert job.status[0] == "failed", job.output()
    for job in jobs[:2]:  # wave 2 after the failed wave 1: c4 on exec-a, c3 on exec-b
        (host, res), = results(job, INPUTS).items()
        assert res["failed"] and "tfops_fleet_failed: wave 2 does not start: a cluster of an earlier wave did not " \
            "pass (c1: wave 1 rolled_back)" in res["msg"], res
    for job in jobs[2:]:  # each slice's own canary (its first host by inventory order) refused
        refused = results(job, INPUTS)
        assert len(refused) == 1 and not results(job, LOCK), (list(refused), job.output())
        assert "tfops_fleet_wave: unset, and this job is one slice of the sliced job template %r" % TEMPLATE \
            in list(refused.values())[0]["msg"]
    after = [View(state) for state in labs]
    for view, then in zip(after, views):
        assert (view.reports, view.snapshots, view.image, view.holders) == (
            then.reports, then.snapshots, then.image, []), "a refused job wrote to a cluster"
    phases.append(("refusals", time.monotonic() - started - sum(p for _n, p in phases)))
    print("awx fleet: %s; first change: controller %.1f CPU-s, execution nodes %.1f CPU-s"
          % (", ".join("%s %.0f s" % p for p in phases), cpu1[0], cpu1[1]))
