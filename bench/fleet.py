"""Part 6, the fleet: ``playbooks/fleet_upgrade.yml`` against several small labs at once, one
inventory host per lab, ``forks`` = the number of clusters, against one cluster alone.

Runs, in order (each on labs that have not seen its change, so every change run does the same work):
  single  one lab alone (a fleet of one): the change (chart 1.8.6 -> 1.8.7 and a new hypervisor
          image), then the same again (a run that changes nothing);
  fleet   the other N labs at once (``tfops_fleet_serial: [N]``, forks N): the same change, then
          the run that changes nothing;
  failure the N labs with the default waves (canary, then 50 %) and a newer image that never
          becomes Ready on the first cluster of the second wave: that cluster must be rolled back
          and the later wave never started;
  modules the no-op of one lab alone again with the modules as module processes
          (``tfops_in_process: false``), side by side with the default (in ansible-playbook's
          worker), for the per-module profile.

Measured per run: the wall time of the whole run; each cluster's wall time (its first task's
start to its last task's end, from the timing callback); the CPU-seconds of the controller, from
the OS's accounting (``os.wait4`` of ansible-playbook: it and every process it started and waited
for - workers, module processes, helm); in the ``modules`` run, the module processes' own
CPU-seconds per cluster (each host's modules run under an interpreter wrapper that records its
child's ``wait4``); peak RSS."""
import json
import os
import stat
import sys
import tempfile
import time
from pathlib import Path

from bench.completion import HV, Lab, playbook_env
from bench import scale_lab
from bench.proc import REPO, median, processes_cpu_seconds, run_accounted, table

FLEET = REPO / "playbooks" / "fleet_upgrade.yml"
NEW_CHART = "1.8.7"

# The interpreter of one host's modules: runs the real one as a child and appends that child's
# CPU accounting to a file (a module's cost, without ansible-playbook's own per-task work).
WRAPPER = """#!{python}
import json, os, sys, time
started = time.time()
pid = os.posix_spawn({python!r}, [{python!r}] + sys.argv[1:], os.environ)
_, status, usage = os.wait4(pid, 0)
with open({log!r}, "a") as handle:
    handle.write(json.dumps({{"module": os.path.basename(sys.argv[1]) if len(sys.argv) > 1 else "-",
                              "start": started, "end": time.time(),
                              "cpu": usage.ru_utime + usage.ru_stime, "rss_mib": usage.ru_maxrss / 1024.0}}) + "\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def up(tmp, count, gpu_nodes):
    labs = []
    try:
        for i in range(count):
            state = scale_lab.up(Path(tmp) / ("fleet-%d" % i), gpu_nodes)
            Lab(state).set_gap_floor(1)
            labs.append(state)
    except Exception:
        down(labs)
        raise
    return labs


def down(labs):
    for state in labs:
        scale_lab.down(state["state_dir"])


class Fleet:
    """Inventories, wrappers and runs for a set of labs."""

    def __init__(self, tmp, labs):
        from lab import paths
        self.tmp, self.labs, self.python = Path(tmp), labs, sys.executable
        self.helm = str(paths.helm_binary("3"))

    def _wrapper(self, host, run):
        log = self.tmp / ("modules-%s-%s.jsonl" % (run, host))
        path = self.tmp / ("python-%s-%s" % (run, host))
        path.write_text(WRAPPER.format(python=self.python, log=str(log)))
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
        return path, log

    def run(self, name, labs, change, serial=None, module_processes=False):
        hosts, logs = {}, {}
        for state in labs:
            host = "cluster-%d" % self.labs.index(state)
            hosts[host] = {"tfops_kubeconfig": state["kubeconfig"],
                           "tfops_chart_repo": state["tensorfusion"]["chart_repo"]}
            if module_processes:  # in the worker (the default) there is no module process to wrap
                wrapper, logs[host] = self._wrapper(host, name)
                hosts[host].update(tfops_python_interpreter=str(wrapper), tfops_in_process=False)
        inventory = self.tmp / ("inventory-%s.json" % name)
        inventory.write_text(json.dumps({"clusters": {"hosts": hosts}}))
        extra = dict(change, tfops_fleet_hosts="clusters", tfops_helm_binary=self.helm, tfops_batch_percentage=50,
                     tfops_batch_interval="1s", tfops_stall_timeout=30,
                     tfops_artifacts_dir=str(self.tmp / "artifacts"), tfops_snapshot_dir=str(self.tmp / "snapshots"))
        if serial:
            extra["tfops_fleet_serial"] = serial
        times_file = self.tmp / ("times-%s.json" % name)
        env = playbook_env(str(times_file))
        lab_pids = [p["pid"] for state in self.labs for p in state.get("processes") or []]
        labs_before = processes_cpu_seconds(lab_pids)
        started = time.time()
        res = run_accounted(["ansible-playbook", "-i", str(inventory), "-f", str(len(labs)), str(FLEET),
                             "-e", json.dumps(extra)], env=env)
        labs_cpu = processes_cpu_seconds(lab_pids) - labs_before
        times = json.loads(times_file.read_text()) if times_file.exists() else {"on_hosts": []}
        clusters = {}
        for host in hosts:
            mine = [t for t in times.get("on_hosts", []) if t["host"] == host]
            ended = [t["end"] for t in mine if t["end"]]
            log = logs.get(host)
            modules = [json.loads(line) for line in log.read_text().splitlines()] if log and log.exists() else []
            clusters[host] = {
                "seconds": (max(ended) - min(t["start"] for t in mine)) if ended else None,
                "tasks": len(mine), "module_runs": len(modules) if module_processes else None,
                "module_cpu_seconds": sum(m["cpu"] for m in modules) if module_processes else None,
                "profile": profile(mine, modules),
                "reports": _reports(self.tmp / "artifacts", host, started)}
        return {"name": name, "module_processes": module_processes, "clusters": clusters, "seconds": res["seconds"], "rc": res["rc"],
                "cpu_seconds": res["cpu_seconds"], "cpu_user": res["cpu_user"], "cpu_system": res["cpu_system"],
                "cpu_seconds_per_cluster": res["cpu_seconds"] / len(labs), "peak_rss_mib": res["peak_rss_mib"],
                # The labs' own control planes share this machine's cores with the controller: with
                # the controller's CPU they bound the run's wall time from below.
                "labs_cpu_seconds": labs_cpu, "cpu_bound_seconds": (res["cpu_seconds"] + labs_cpu) / (os.cpu_count() or 1),
                "started": started, "tail": res["stdout"][-2000:] if res["rc"] else ""}


def profile(tasks, modules):
    """Where one cluster's run goes: per action its tasks and their wall seconds (each task's start
    to its end on this host), and per module its runs and the CPU-seconds of its processes."""
    by_action, by_module = {}, {}
    for t in tasks:
        entry = by_action.setdefault(t.get("action") or "?", {"tasks": 0, "seconds": 0.0})
        entry["tasks"] += 1
        entry["seconds"] += (t["end"] - t["start"]) if t.get("end") else 0.0
    for m in modules:
        name = _module_of(m, tasks)
        entry = by_module.setdefault(name, {"runs": 0, "cpu_seconds": 0.0})
        entry["runs"] += 1
        entry["cpu_seconds"] += m["cpu"]
    return {"actions": by_action, "modules": by_module}


def _module_of(record, tasks):
    """A module process's name: the action of the task it ran in (with pipelining the module
    comes on standard input and its command line has no file name), else that file's name."""
    for t in tasks:
        if t.get("end") and "start" in record and t["start"] <= record["start"] <= t["end"]:
            return (t.get("action") or "?").split(".")[-1]
    name = record["module"]
    name = name[len("AnsiballZ_"):] if name.startswith("AnsiballZ_") else name
    return name[:-3] if name.endswith(".py") else name


def render_profile(run):
    """The profile of one cluster of a run, as two tables (slowest first)."""
    prof = next(iter(run["clusters"].values()))["profile"]
    actions = sorted(prof["actions"].items(), key=lambda kv: -kv[1]["seconds"])
    modules = sorted(prof["modules"].items(), key=lambda kv: -kv[1]["cpu_seconds"])
    text = table("profile of %s: tasks by action" % run["name"], ["action", "tasks", "wall s"],
                 [[a, v["tasks"], v["seconds"]] for a, v in actions])
    if not modules:  # in the worker: no module process of its own
        return text
    return text + "\n" + table("profile of %s: module processes" % run["name"], ["module", "runs", "CPU s"],
                                [[m, v["runs"], v["cpu_seconds"]] for m, v in modules])


def _reports(artifacts, host, since):
    """Status of each report this host wrote after ``since`` (the report folder's report.json)."""
    out = []
    for folder in sorted(Path(artifacts).glob("*-%s-*" % host)):
        path = folder / "report.json"
        if path.exists() and path.stat().st_mtime >= since:
            out.append(json.loads(path.read_text()).get("status"))
    return out


def run(tmp_root=None, clusters=4, gpu_nodes=3):
    with tempfile.TemporaryDirectory(prefix="tfops-bench-fleet-", dir=tmp_root) as tmp:
        labs = up(tmp, clusters + 1, gpu_nodes)
        try:
            fleet = Fleet(tmp, labs)
            single, many = labs[:1], labs[1:]
            stamp = int(time.time())
            change = {"tfops_chart_version": NEW_CHART, "tfops_hypervisor_image": "%s:fleet-%d" % (HV, stamp)}
            runs = [fleet.run("single-change", single, change), fleet.run("single-noop", single, change),
                    fleet.run("fleet-change", many, change, serial=[len(many)]),
                    fleet.run("fleet-noop", many, change, serial=[len(many)])]
            # The failure: a newer image, never Ready on the first cluster of the second wave.
            broken = "%s:fleet-broken-%d" % (HV, stamp)
            victim = many[1]
            _never_ready(victim, broken)
            runs.append(fleet.run("fleet-failure", many, dict(change, tfops_hypervisor_image=broken)))
            runs.append(fleet.run("single-noop-module-processes", single, change, module_processes=True))
        finally:
            down(labs)
    by = {r["name"]: r for r in runs}
    single_change = by["single-change"]["seconds"]
    return {"clusters": clusters, "gpu_nodes": gpu_nodes, "runs": runs,
            "fleet_over_single": by["fleet-change"]["seconds"] / single_change if single_change else None,
            "in_process_over_module_processes": by["single-noop"]["cpu_seconds"] /
            by["single-noop-module-processes"]["cpu_seconds"],
            "goal_fleet_over_single": 1.5, "goal_noop_seconds": 8, "goal_noop_cpu_seconds": 6,
            "victim": "cluster-%d" % labs.index(victim)}


def _never_ready(state, image):
    from kubernetes import client
    from lab import tensorfusion as tf
    from lab.kubelet import KNOBS_NAME
    api = tf._clients(state)
    try:
        body = {"metadata": {"name": KNOBS_NAME}, "data": {"neverReadyImages": image.split(":")[-1]}}
        client.CoreV1Api(api).create_namespaced_config_map("kube-system", body)
    finally:
        api.close()


def render(report):
    rows = []
    for r in report["runs"]:
        walls = [c["seconds"] for c in r["clusters"].values()]
        rows.append([r["name"], len(r["clusters"]), r["seconds"], median(walls), r["cpu_seconds"],
                     r["cpu_seconds_per_cluster"], median(c["module_cpu_seconds"] for c in r["clusters"].values()),
                     median(c["module_runs"] for c in r["clusters"].values()), r.get("labs_cpu_seconds"),
                     r.get("cpu_bound_seconds"), r["peak_rss_mib"], r["rc"]])
    text = table("6. the fleet: fleet_upgrade.yml, %d clusters of %d GPU nodes (goals: fleet <= 1.5 x one alone; "
                 "no-op <= 8 s, <= 6 CPU-s)" % (report["clusters"], report["gpu_nodes"]),
                 ["run", "clusters", "wall s", "cluster wall s (median)", "CPU s", "CPU s / cluster",
                  "module CPU s / cluster", "module runs / cluster", "labs' CPU s", "CPU-bound floor s",
                  "peak RSS MiB", "rc"], rows)
    text += "\nfleet / one alone (change): %s" % (
        "%.2f" % report["fleet_over_single"] if report["fleet_over_single"] else "-")
    if report.get("in_process_over_module_processes"):
        text += "\nno-op CPU, in the worker / as module processes: %.2f" % report["in_process_over_module_processes"]
    text += "\n" + render_profile(next(r for r in report["runs"] if r["name"] == "single-noop"))
    processes = [r for r in report["runs"] if r.get("module_processes")]
    if processes:
        text += "\n" + render_profile(processes[0])
    failure = next(r for r in report["runs"] if r["name"] == "fleet-failure")
    text += "\nfailure run (victim %s): %s" % (report["victim"], ", ".join(
        "%s %s" % (h, "/".join(str(s) for s in c["reports"]) or "not started")
        for h, c in sorted(failure["clusters"].items())))
    return text
