"""Part 5, module start-up: one task of each module on a no-op (the cluster already as wanted),
against ``ansible.builtin.ping``, each task looped ``--loops`` times in one playbook (the
per-iteration time is what one task costs), run both ways side by side - in ansible-playbook's
worker (the default, plugin_utils/in_process.py) and as module processes (``tfops_in_process:
false``) - plus each module's import time in a fresh interpreter (what a module process pays). ``tf_acceptance`` is left out: it always runs a test
Pod, it has no no-op."""
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from bench.completion import GPUPOOL, _kubectl, playbook
from bench.proc import median, module_env, table

MODULES = ["gpupool_rollout", "helm_release", "helm_snapshot", "helm_snapshot_info", "maintenance_lock",
           "maintenance_window", "tf_acceptance", "tf_cluster_info", "workload_restart"]


def _tasks(state, snapdir):
    from lab import paths
    pool = json.loads(subprocess.run([_kubectl(), "--kubeconfig", state["kubeconfig"], "get", "gpupool", GPUPOOL,
                                      "-o", "json"], capture_output=True, text=True, check=True).stdout)
    image = pool["spec"]["componentConfig"]["hypervisor"]["image"]
    tfs = state["tensorfusion"]
    kc = {"kubeconfig": state["kubeconfig"]}
    return {
        "ansible.builtin.ping": {},
        "tensorfusion.ops.maintenance_window": {"start": "2000-01-01T00:00:00Z", "end": "2999-01-01T00:00:00Z"},
        "tensorfusion.ops.helm_snapshot_info": {"dest": snapdir, **kc},
        "tensorfusion.ops.helm_snapshot": {"dest": snapdir, "state": "absent", "bundle": "none-such", **kc},
        "tensorfusion.ops.maintenance_lock": {"state": "released", **kc},
        "tensorfusion.ops.workload_restart": {"restarted_after": "2000-01-01T00:00:00Z", **kc},
        "tensorfusion.ops.gpupool_rollout": {"pool": "shared", "components": {"hypervisor": {"image": image}}, **kc},
        "tensorfusion.ops.tf_cluster_info": {"workloads": False, **kc},
        "tensorfusion.ops.helm_release": {"chart_repo_url": tfs["chart_repo"], "chart_version": tfs["chart_version"],
                                          "binary_path": str(paths.helm_binary("3")), **kc},
    }


def import_seconds(module, repeats=3):
    code = ("import time; t = time.perf_counter(); "
            "import ansible_collections.tensorfusion.ops.plugins.modules.%s; print(time.perf_counter() - t)" % module)
    vals = []
    for _ in range(repeats):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=module_env(), check=True)
        vals.append(float(out.stdout.strip()))
    return median(vals)


def _per_task(path, loops, in_process):
    """{task: (seconds per iteration, {changed, failed})} of one run of the play."""
    _ended, times, _proc = playbook(str(path), {"tfops_in_process": in_process})
    out = {}
    for task in times["tasks"]:
        results = (task["result"] or {}).get("results") or []
        out[task["task"]] = ((task["end"] - task["start"]) / loops,
                             {"changed": any(r.get("changed") for r in results),
                              "failed": [r.get("msg") for r in results if r.get("failed")][:1]})
    return out


def run(state, loops=5):
    with tempfile.TemporaryDirectory(prefix="tfops-bench-startup-") as tmp:
        tasks = _tasks(state, tmp)
        play = [{"name": "One no-op task per module", "hosts": "localhost", "gather_facts": False,
                 "tasks": [{"name": action, action: args, "loop": list(range(loops)), "ignore_errors": True}
                           for action, args in tasks.items()]}]
        path = Path(tmp) / "startup.yml"
        path.write_text(yaml.safe_dump(play, sort_keys=False))
        inside = _per_task(path, loops, True)
        outside = _per_task(path, loops, False)
    ping = inside.get("ansible.builtin.ping", (None,))[0]
    rows = {}
    for name, (secs, status) in inside.items():
        short = name.split(".")[-1]
        process = outside.get(name, (None, {}))
        rows[name] = {"seconds_per_task": secs, "over_ping": secs / ping if ping else None,
                      "module_process_seconds_per_task": process[0],
                      "in_process_over_module_process": secs / process[0] if process[0] else None,
                      "import_seconds": import_seconds(short) if short in MODULES else None,
                      "changed": status["changed"] or process[1].get("changed"),
                      "failed": status["failed"] or process[1].get("failed")}
    return {"loops": loops, "tasks": rows, "not_measured": {"tf_acceptance": "runs a test Pod every time: no no-op"}}


def render(report):
    rows = [[name, r["seconds_per_task"], r.get("module_process_seconds_per_task"),
             r.get("in_process_over_module_process"), r["over_ping"], r["import_seconds"],
             "FAILED" if r["failed"] else ("changed" if r["changed"] else "ok")] for name, r in report["tasks"].items()]
    return table("5. module start-up, one no-op task (mean of %d loop iterations; import: fresh interpreter, median of 3)"
                 % report["loops"], ["", "s/task in process", "s/task module process", "in / module process",
                                      "x ping (in process)", "import s", "result"], rows)
