"""Part 8, the fleet across execution nodes: ``extensions/awx/fleet_workflow.yml`` (the canary as
one job, then each wave sliced over two execution nodes) run the way AWX dispatches its jobs -
the private data dir streamed by ``ansible-runner transmit`` on the controller, run by
``ansible-runner worker`` on the execution node (a process of its own, in the node's own folder,
with the node's environment), its events back through ``ansible-runner process`` on the
controller - over N + 1 small labs (the dispatch of the source tree's integration tests,
tests/integration/awx_dispatch.py). Receptor, which carries those streams in AWX, is not run
(the Go module proxy refuses github.com/ansible/receptor).

The fleet: c0 the canary (group tfops_fleet_wave_0), then waves of four clusters
(tfops_fleet_wave_1: c1 to c4; ...). AWX slices by host name, so each wave has two clusters on
each node, worked on at once (forks); the canary runs on exec-a.

Runs: ``change`` (chart 1.8.6 -> 1.8.7 and a new hypervisor image on every cluster, part 6's
change), then ``noop`` (the same again), then ``direct-noop``: the canary's cluster alone with
``ansible-playbook`` (part 6's way, no ansible-runner), for what AWX's dispatch adds to a job.
Measured per job: wall seconds (dispatch to the end of ``process``); CPU-seconds of ``transmit``
and ``process`` (the controller) and of ``worker`` with everything it ran - ansible-playbook, its
workers, helm (the execution node), each from ``os.wait4``. Per execution node: the clusters it
upgraded, its busy seconds (its jobs' walls), its CPU-seconds; clusters per hour of that busy
time, and the CPU-bound ceiling (the node's cores over its CPU-seconds per cluster). The
controller's share: its CPU-seconds over the controller's and the nodes' together. The labs'
own CPU-seconds during the run are recorded as well (they share this machine's cores)."""
import os
import subprocess
import tempfile
import time
from pathlib import Path

import yaml

from bench import fleet
from bench.proc import REPO, processes_cpu_seconds, table

WORKFLOW = REPO / "extensions" / "awx" / "fleet_workflow.yml"
HV = "tensorfusion/tensor-fusion-hypervisor:"


PER_WAVE = 4  # two clusters on each of the two execution nodes


def _layout(clusters):
    """Hosts c0..cN and their wave groups (the canary, then waves of PER_WAVE)."""
    names = ["c%d" % i for i in range(clusters + 1)]
    groups = {"tfops_fleet_wave_0": names[:1]}
    for wave, first in enumerate(range(1, len(names), PER_WAVE), start=1):
        groups["tfops_fleet_wave_%d" % wave] = names[first:first + PER_WAVE]
    return names, groups


def _workflow(waves):
    """The fleet workflow of extensions/awx/fleet_workflow.yml, its wave nodes repeated up to ``waves``."""
    wf = yaml.safe_load(WORKFLOW.read_text())["workflow_job_template"]
    canary, first = wf["workflow_nodes"][0], wf["workflow_nodes"][1]
    nodes = [dict(canary, related={"success_nodes": [{"identifier": "wave-1"}]} if waves else {})]
    for wave in range(1, waves + 1):
        node = dict(first, identifier="wave-%d" % wave, extra_data={"tfops_fleet_wave": wave})
        node["related"] = {"success_nodes": [{"identifier": "wave-%d" % (wave + 1)}]} if wave < waves else {}
        nodes.append(node)
    return dict(wf, workflow_nodes=nodes)


def run(tmp_root=None, clusters=4, gpu_nodes=3):
    from lab import paths
    from tests.integration.awx_dispatch import Controller, ExecutionNode
    if clusters < 2 or clusters % 2:
        raise ValueError("part 8 needs an even number of clusters after the canary (one half on each node)")
    names, groups = _layout(clusters)
    with tempfile.TemporaryDirectory(prefix="tfops-bench-awx-", dir=tmp_root) as tmp:
        tmp = Path(tmp)
        subprocess.run([str(REPO / "tests" / "stage-collection.sh"), str(tmp / "ee")], cwd=str(REPO), check=True,
                       capture_output=True, timeout=300)
        collection = tmp / "ee" / "ansible_collections" / "tensorfusion" / "ops"
        labs = fleet.up(tmp, len(names), gpu_nodes)
        try:
            hosts = dict((name, {"tfops_kubeconfig": state["kubeconfig"],
                                 "tfops_chart_repo": state["tensorfusion"]["chart_repo"]})
                         for name, state in zip(names, labs))
            nodes = [ExecutionNode(n, tmp, tmp / "ee", str(paths.helm_binary("3"))) for n in ("exec-a", "exec-b")]
            controller = Controller(tmp, nodes, collection / "playbooks", _workflow(len(groups) - 1), hosts, groups)
            lab_pids = [p["pid"] for state in labs for p in state.get("processes") or []]
            answers = {"tfops_chart_version": fleet.NEW_CHART, "tfops_batch_percentage": 50,
                       "tfops_batch_interval": "1s", "tfops_stall_timeout": 60,
                       "tfops_hypervisor_image": "%sawx-%d" % (HV, int(time.time()))}
            runs = [_measured("change", controller, answers, lab_pids), _measured("noop", controller, answers, lab_pids)]
            change = dict((k, answers[k]) for k in ("tfops_chart_version", "tfops_hypervisor_image"))
            direct = fleet.Fleet(tmp, labs).run("direct-noop", labs[:1], change)
            runs.append({"name": "direct-noop", "seconds": direct["seconds"], "cpu_seconds": direct["cpu_seconds"],
                         "rc": direct["rc"], "labs_cpu_seconds": direct["labs_cpu_seconds"]})
        finally:
            fleet.down(labs)
    return {"clusters": clusters + 1, "gpu_nodes": gpu_nodes, "cores": os.cpu_count(), "runs": runs}


def _measured(name, controller, answers, lab_pids):
    labs_before = processes_cpu_seconds(lab_pids)
    started = time.monotonic()
    ran, stats = controller.run_workflow(answers)
    seconds = time.monotonic() - started
    labs_cpu = processes_cpu_seconds(lab_pids) - labs_before
    jobs = [{"node": ident, "execution_node": j.node.name, "hosts": _hosts(j), "seconds": j.seconds,
             "status": j.status[0], "transmit": j.usage["transmit"], "process": j.usage["process"],
             "worker": j.usage["worker"]} for ident, started_jobs in ran for j in started_jobs]
    per_node = {}
    for job in jobs:
        entry = per_node.setdefault(job["execution_node"], {"jobs": 0, "clusters": 0, "busy_seconds": 0.0,
                                                             "cpu_seconds": 0.0})
        entry["jobs"] += 1
        entry["clusters"] += len(job["hosts"])
        entry["busy_seconds"] += job["seconds"]
        entry["cpu_seconds"] += job["worker"]
    for entry in per_node.values():
        entry["clusters_per_hour"] = 3600.0 * entry["clusters"] / entry["busy_seconds"] if entry["busy_seconds"] else None
        entry["cpu_seconds_per_cluster"] = entry["cpu_seconds"] / entry["clusters"] if entry["clusters"] else None
        entry["cpu_bound_clusters_per_hour"] = (3600.0 * (os.cpu_count() or 1) / entry["cpu_seconds_per_cluster"]
                                                if entry["cpu_seconds_per_cluster"] else None)
    controller_cpu = sum(j["transmit"] + j["process"] for j in jobs)
    nodes_cpu = sum(j["worker"] for j in jobs)
    statuses = dict((h, r.get("status")) for h, r in (stats.get("tfops_runs") or {}).items())
    return {"name": name, "seconds": seconds, "jobs": jobs, "per_node": per_node, "controller_cpu_seconds": controller_cpu,
            "nodes_cpu_seconds": nodes_cpu, "controller_share": controller_cpu / (controller_cpu + nodes_cpu),
            "controller_cpu_seconds_per_job": controller_cpu / len(jobs), "labs_cpu_seconds": labs_cpu,
            "workflow_nodes": [ident for ident, _jobs in ran], "failed_jobs": [j for j in jobs if j["status"] != "successful"],
            "last_statuses": statuses}


def _hosts(job):
    return sorted(set(e["event_data"]["host"] for e in job.events if e["event"] == "runner_on_ok"))


def render(report):
    rows, node_rows = [], []
    for r in report["runs"]:
        if "jobs" not in r:  # the direct run
            continue
        rows.append([r["name"], len(r["jobs"]), r["seconds"], r["controller_cpu_seconds"], r["nodes_cpu_seconds"],
                     100.0 * r["controller_share"], r["controller_cpu_seconds_per_job"], r["labs_cpu_seconds"],
                     len(r["failed_jobs"])])
        for node, e in sorted(r["per_node"].items()):
            node_rows.append([r["name"], node, e["jobs"], e["clusters"], e["busy_seconds"], e["cpu_seconds"],
                              e["cpu_seconds_per_cluster"], e["clusters_per_hour"], e["cpu_bound_clusters_per_hour"]])
    text = table("8. the fleet workflow across 2 execution nodes, AWX's dispatch (%d clusters of %d GPU nodes, %d cores)"
                 % (report["clusters"], report["gpu_nodes"], report["cores"]),
                 ["run", "jobs", "wall s", "controller CPU s", "nodes CPU s", "controller %", "controller CPU s / job",
                  "labs' CPU s", "failed jobs"], rows)
    text += "\n" + table("8. per execution node", ["run", "node", "jobs", "clusters", "busy s", "CPU s",
                                                     "CPU s / cluster", "clusters / h (busy)", "clusters / h (CPU-bound)"],
                         node_rows)
    by = dict((r["name"], r) for r in report["runs"])
    direct, noop = by.get("direct-noop"), by.get("noop")
    if direct and noop:
        canary = next(j for j in noop["jobs"] if j["node"] == "canary")
        text += ("\nthe canary's no-op, one cluster: ansible-playbook alone %.1f CPU-s (%.1f s, rc %s); as an AWX job "
                 "%.1f CPU-s on the node + %.2f on the controller (%.1f s)" % (
                     direct["cpu_seconds"], direct["seconds"], direct["rc"], canary["worker"],
                     canary["transmit"] + canary["process"], canary["seconds"]))
    return text
