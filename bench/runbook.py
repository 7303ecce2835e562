"""Part 2, runbook overhead: ``playbooks/upgrade.yml`` (a new hypervisor image for every pool, at
20 % / 1 s) against the operator's own rollout time, read from the double's log (from the first
status write of each campaign to its final synced write, overlapping campaigns merged). Where the
rest goes: per role and per task, from the benchmark callback (ansible.posix's profile_tasks is
not installed here; tfops_bench_times records the same start and end of each task)."""
import time
from collections import defaultdict

from bench import oplog
from bench.completion import HV, Lab, playbook
from bench.proc import REPO, median, table

UPGRADE = REPO / "playbooks" / "upgrade.yml"


def rollout_seconds(writes, since, until):
    """Seconds during which any campaign was running in [since, until]: from a new hash's first
    status write to its synced write, merged where campaigns overlap."""
    spans, open_ = [], {}
    for w in writes:
        if w["sent"] < since or w["sent"] > until:
            continue
        key = (w["pool"], w["component"])
        if not w["synced"]:
            if key not in open_ or open_[key][1] != w["hash"]:
                open_[key] = (w["sent"], w["hash"])
        elif key in open_ and open_[key][1] == w["hash"]:
            spans.append((open_.pop(key)[0], w["acked"]))
    spans.sort()
    total, cur = 0.0, None
    for start, end in spans:
        if cur and start <= cur[1]:
            cur = (cur[0], max(cur[1], end))
        else:
            if cur:
                total += cur[1] - cur[0]
            cur = (start, end)
    if cur:
        total += cur[1] - cur[0]
    return total, len(spans)


def run(state, repetitions=2, pct=20, interval="1s"):
    if not UPGRADE.exists():
        raise RuntimeError("playbooks/upgrade.yml is not in the tree yet")
    lab = Lab(state)
    lab.set_gap_floor(1)
    tfs = state["tensorfusion"]
    from lab import paths
    runs = []
    with_chart = max(tfs.get("versions") or [tfs["chart_version"]])
    # Both ways the runbook follows a pool: a task per batch (default) and one task per pool,
    # compared on the runs after the first, which alone also upgrades the chart.
    for each_batch in [True] + [False, True] * repetitions:
        lab.settle()
        image = "%s:bench-runbook-%d" % (HV, int(time.time()))
        extra = {"tfops_kubeconfig": state["kubeconfig"], "tfops_chart_repo": tfs["chart_repo"],
                 "tfops_chart_version": with_chart, "tfops_hypervisor_image": image,
                 "tfops_batch_percentage": pct, "tfops_batch_interval": interval, "tfops_each_batch": each_batch,
                 "tfops_helm_binary": str(paths.helm_binary("3")),
                 "tfops_artifacts_dir": "/tmp/tfops-bench-artifacts", "tfops_snapshot_dir": "/tmp/tfops-bench-snapshots"}
        started = time.time()
        ended, times, _proc = playbook(str(UPGRADE), extra)
        total = ended - started
        rollout, campaigns = rollout_seconds(lab.status_writes(), started, ended)
        by_role, by_task = defaultdict(float), []
        for task in times["tasks"]:
            if task["end"] is None:
                continue
            secs = task["end"] - task["start"]
            by_role[task["role"] or "(play)"] += secs
            by_task.append({"task": task["task"], "role": task["role"], "seconds": round(secs, 3)})
        by_task.sort(key=lambda t: -t["seconds"])
        runs.append({"each_batch": each_batch, "seconds": total, "rollout_seconds": rollout, "campaigns": campaigns,
                     "ratio": total / rollout if rollout else None, "chart": with_chart,
                     "by_role": dict(sorted(by_role.items(), key=lambda kv: -kv[1])), "top_tasks": by_task[:15]})
    by_way = dict((way, {"ratio": median(r["ratio"] for r in runs[1:] if r["each_batch"] is way),
                         "seconds": median(r["seconds"] for r in runs[1:] if r["each_batch"] is way)})
                  for way in (True, False))
    return {"nodes": state.get("nodes"), "batch_percentage": pct, "batch_interval": interval, "runs": runs,
            "ratio": median(r["ratio"] for r in runs), "seconds": median(r["seconds"] for r in runs),
            "rollout_seconds": median(r["rollout_seconds"] for r in runs), "goal_ratio": 1.15,
            "each_batch": by_way[True], "one_task_per_pool": by_way[False]}


def render(report):
    way = {True: "per batch", False: "per pool"}
    rows = [["run %d (%s)" % (i + 1, way[r.get("each_batch", True)]), r["seconds"], r["rollout_seconds"],
             r["campaigns"], r["ratio"]] for i, r in enumerate(report["runs"])]
    rows.append(["median", report["seconds"], report["rollout_seconds"], None, report["ratio"]])
    for key, label in (("each_batch", "per batch, image only"), ("one_task_per_pool", "per pool, image only")):
        if report.get(key):
            rows.append([label, report[key]["seconds"], None, None, report[key]["ratio"]])
    text = table("2. runbook overhead: upgrade.yml on %s nodes at %s%% / %s (goal ratio <= 1.15)" % (
        report["nodes"], report["batch_percentage"], report["batch_interval"]),
        ["", "runbook s", "rollout s", "campaigns", "ratio"], rows)
    last = report["runs"][-1]
    text += "\nper role (last run): " + ", ".join("%s %.1fs" % kv for kv in last["by_role"].items())
    return text


