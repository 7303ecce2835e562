"""Parts 2 and 7, runbook overhead: ``playbooks/upgrade.yml`` (a new hypervisor image for every pool, at
20 % / 1 s) against the operator's own rollout time, read from the double's log (from the first
status write of each campaign to its final synced write, overlapping campaigns merged). Where the
rest goes: per role and per task, from the benchmark callback (ansible.posix's profile_tasks is
not installed here; tfops_bench_times records the same start and end of each task). Part 7 puts
that ratio side by side per operator: the double at upstream's batch timing and at the lab's
default, and upstream's own operator when its binary is given (TFOPS_OPERATOR_BINARY)."""
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


def one_run(lab, state, each_batch, pct, interval):
    """One ``upgrade.yml`` run with a new hypervisor image for every pool (and, the first time,
    the chart's newest version): the runbook's seconds against the operator's own rollout
    seconds, and where the rest went, per role and task."""
    from lab import paths
    tfs = state["tensorfusion"]
    with_chart = max(tfs.get("versions") or [tfs["chart_version"]])
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
    return {"each_batch": each_batch, "seconds": total, "rollout_seconds": rollout, "campaigns": campaigns,
            "ratio": total / rollout if rollout else None, "chart": with_chart,
            "by_role": dict(sorted(by_role.items(), key=lambda kv: -kv[1])), "top_tasks": by_task[:15]}


def run(state, repetitions=2, pct=20, interval="1s"):
    if not UPGRADE.exists():
        raise RuntimeError("playbooks/upgrade.yml is not in the tree yet")
    lab = Lab(state)
    lab.set_gap_floor(1)
    # Both ways the runbook follows a pool: a task per batch (default) and one task per pool,
    # compared on the runs after the first, which alone also upgrades the chart.
    runs = [one_run(lab, state, each_batch, pct, interval) for each_batch in [True] + [False, True] * repetitions]
    by_way = dict((way, {"ratio": median(r["ratio"] for r in runs[1:] if r["each_batch"] is way),
                         "seconds": median(r["seconds"] for r in runs[1:] if r["each_batch"] is way)})
                  for way in (True, False))
    return {"nodes": state.get("nodes"), "batch_percentage": pct, "batch_interval": interval, "runs": runs,
            "ratio": median(r["ratio"] for r in runs), "seconds": median(r["seconds"] for r in runs),
            "rollout_seconds": median(r["rollout_seconds"] for r in runs), "goal_ratio": 1.15,
            "each_batch": by_way[True], "one_task_per_pool": by_way[False]}


# The operators part 7 puts side by side: the double at upstream's batch timing (its lab floor
# batchGapFloorSeconds at 0: the next batch due once batchInterval has passed), the double at
# the lab's default floor (3 s), and upstream's own operator when its binary is given
# (TFOPS_OPERATOR_BINARY; built by hand outside the repository, CONTRIBUTING.md), on a lab of the
# same size of its own.
DOUBLE_TIMINGS = (("double, upstream's batch timing (floor 0)", 0), ("double, lab default (floor 3 s)", 3))
UPSTREAM_SKIPPED = ("not measured: TFOPS_OPERATOR_BINARY names no binary of upstream's operator (it is built "
                    "by hand, outside the repository: CONTRIBUTING.md, 'The real operator')")


def _summary(label, mine, **extra):
    seconds, rollout = median(r["seconds"] for r in mine), median(r["rollout_seconds"] for r in mine)
    return dict({"operator": label, "runs": mine, "seconds": seconds, "rollout_seconds": rollout,
                 "ratio": median(r["ratio"] for r in mine),
                 "overhead_seconds": seconds - rollout if seconds is not None and rollout else None}, **extra)


def _upstream_runs(state, binary, repetitions, pct, interval):
    """The same runs on a lab of the same size running upstream's operator, its campaigns timed
    from a watch of the pools (bench/poolwatch.py: it logs no status writes)."""
    import tempfile
    from pathlib import Path

    from bench.poolwatch import PoolStatusRecorder
    from lab import cluster
    from lab import tensorfusion as tf
    with tempfile.TemporaryDirectory(prefix="tfops-bench-upstream-") as tmp:
        up = cluster.up(Path(tmp) / "lab", nodes=state.get("nodes") or 100, cpu_nodes=1,
                        addons=[tf.addon(operator_binary=binary)])
        api = tf._clients(up)  # pylint: disable=protected-access
        recorder = PoolStatusRecorder(api).start()
        try:
            lab = Lab(up)
            lab.recorder = recorder
            warm_up = one_run(lab, up, True, pct, interval)
            runs = [one_run(lab, up, True, pct, interval) for _ in range(repetitions)]
        finally:
            recorder.stop()
            api.close()
            cluster.down(Path(tmp) / "lab")
    return warm_up, runs


def run_operators(state, repetitions=2, pct=20, interval="1s", operator_binary=None):
    """Part 7: ``upgrade.yml`` (one task per batch) against the operator's own rollout time - from
    a campaign's first status write to its synced write, the physical limit of a rollout - per
    operator. One warm-up run first (it also takes the chart to its newest version), then
    ``repetitions`` runs per timing of the double, interleaved; then upstream's operator
    (``operator_binary``, default TFOPS_OPERATOR_BINARY) the same way, or why it is not measured."""
    import os
    if not UPGRADE.exists():
        raise RuntimeError("playbooks/upgrade.yml is not in the tree yet")
    binary = operator_binary or os.environ.get("TFOPS_OPERATOR_BINARY")
    lab = Lab(state)
    runs = dict((label, []) for label, _floor in DOUBLE_TIMINGS)
    try:
        lab.set_gap_floor(DOUBLE_TIMINGS[0][1])
        warm_up = one_run(lab, state, True, pct, interval)
        for _ in range(repetitions):
            for label, floor in DOUBLE_TIMINGS:
                lab.set_gap_floor(floor)
                runs[label].append(one_run(lab, state, True, pct, interval))
    finally:
        lab.set_gap_floor(None)
    operators = [_summary(label, runs[label], gap_floor=floor) for label, floor in DOUBLE_TIMINGS]
    if binary:
        up_warm_up, up_runs = _upstream_runs(state, binary, repetitions, pct, interval)
        operators.append(_summary("upstream (%s)" % os.path.basename(binary), up_runs, warm_up=up_warm_up))
    else:
        operators.append({"operator": "upstream", "blocked": UPSTREAM_SKIPPED})
    return {"nodes": state.get("nodes"), "batch_percentage": pct, "batch_interval": interval,
            "warm_up": warm_up, "operators": operators}


def render_operators(report):
    rows = []
    for op in report["operators"]:
        if op.get("blocked"):
            rows.append([op["operator"], None, None, None, None, "not measured, see below"])
        else:
            rows.append([op["operator"], op["seconds"], op["rollout_seconds"], op["overhead_seconds"],
                         op["ratio"], "median of %d" % len(op["runs"])])
    text = table("7. runbook against each operator's own rollout time: upgrade.yml on %s nodes at %s%% / %s"
                 % (report["nodes"], report["batch_percentage"], report["batch_interval"]),
                 ["operator", "runbook s", "operator's rollout s", "runbook - rollout s", "ratio", ""], rows)
    return text + "".join("\n%s: %s" % (op["operator"], op["blocked"]) for op in report["operators"]
                          if op.get("blocked"))


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
