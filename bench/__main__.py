"""Benchmarks side by side with what operators use today (issue 9).

    source tests/env.sh && python -m bench                 # everything, about an hour
    python -m bench --parts 1,3,5                          # only some parts
    python -m bench --parts 4 --big-lab /tmp/my-1k-lab     # reuse a lab (left running)
    python -m bench --parts 6 --fleet-clusters 4           # the fleet (starts its own labs)
    python -m bench --parts 8 --fleet-clusters 4           # the fleet across 2 execution nodes, AWX's dispatch

Parts: 1 completion latency, 2 runbook overhead, 3 API load, 4 precheck at scale, 5 module start-up,
6 the fleet (clusters per execution node), 7 the runbook against each operator's own rollout time
(the double at upstream's batch timing and at the lab's default; upstream's operator: blocked),
8 the fleet workflow across two execution nodes as AWX dispatches its jobs (ansible-runner
transmit, worker, process; receptor: blocked).
Parts 1, 2, 3 (100 nodes), 5 and 7 run on a 100-GPU-node lab; parts 3 (1,000 nodes) and 4 on a
1,000-GPU-node lab filled to 8,000 GPUs, 10,000 Pods and 2,000 workloads; parts 6 and 8 on N + 1
small labs of their own (6: N at once, one alone for comparison). A lab this command
starts it also stops. Prints the tables and writes bench/results/bench.json (parts run earlier
are kept, each with its date)."""
import argparse
import datetime
import json
import os
import sys
import tempfile
import traceback
from pathlib import Path

from bench import awx_fleet, completion, fleet, precheck, runbook, scale_lab, startup

RESULTS = Path(__file__).resolve().parent / "results"
# The labs' kubeconfigs and the runs' folders are temporary ones: the runbooks' path variables may
# name them as the controller's opt-in allows (docs/security.md).
os.environ.setdefault("TFOPS_ALLOWED_PATHS", tempfile.gettempdir())


def _save(results):
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "bench.json"
    old = {}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = {}
    old.update(results)
    path.write_text(json.dumps(old, indent=2, default=str))
    return path


class LabScope:
    """A lab given with --lab (kept) or one started here (stopped at the end)."""

    def __init__(self, given, nodes, tmp):
        self.given = given
        self.dir = Path(given) if given else Path(tmp) / ("lab-%d" % nodes)
        self.nodes = nodes

    def __enter__(self):
        if self.given:
            return scale_lab.load(self.dir)
        return scale_lab.up(self.dir, self.nodes)

    def __exit__(self, *exc):
        if not self.given:
            scale_lab.down(self.dir)


def _stamp(report):
    report["measured_at"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    report["load_average"] = os.getloadavg()
    return report


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", default="1,2,3,4,5,6,7,8")
    parser.add_argument("--lab", help="state folder of a running lab for parts 1, 2, 3 (small) and 5")
    parser.add_argument("--big-lab", help="state folder of a running lab for parts 3 (big) and 4")
    parser.add_argument("--nodes", type=int, default=100, help="GPU nodes of the small lab (0: no small lab)")
    parser.add_argument("--big-nodes", type=int, default=1000, help="GPU nodes of the big lab (0: no big lab)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of each contender")
    parser.add_argument("--big-reps", type=int, default=1, help="repetitions of part 3 on the big lab")
    parser.add_argument("--big-contenders", default="a,c", help="contenders of part 3 on the big lab")
    parser.add_argument("--compare-tree", help="collections root with another version of the collection (for "
                        "example `git archive` of an older commit under ansible_collections/tensorfusion/ops): "
                        "part 4 measures its tf_cluster_info in the same rounds")
    parser.add_argument("--fleet-clusters", type=int, default=4, help="clusters of part 6's fleet (besides the one "
                        "alone) and part 8's (besides the canary)")
    parser.add_argument("--fleet-gpu-nodes", type=int, default=3, help="GPU nodes of each of part 6's and 8's labs")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))
    results, texts = {}, []

    def part(key, fn, render):
        try:
            report = _stamp(fn())
            results[key] = report
            texts.append(render(report))
            print(texts[-1], flush=True)
        except Exception:  # noqa: BLE001  (one failed part must not lose the others' figures)
            results[key] = {"error": traceback.format_exc()}
            print("%s failed:\n%s" % (key, results[key]["error"]), file=sys.stderr, flush=True)
        _save(results)

    with tempfile.TemporaryDirectory(prefix="tfops-bench-") as tmp:
        if parts & {"3", "4"} and args.big_nodes:
            with LabScope(args.big_lab, args.big_nodes, tmp) as state:
                if "4" in parts:
                    if not scale_lab.is_filled(state):
                        scale_lab.fill(state)
                    part("4_precheck", lambda: precheck.run(state, runs=args.reps, outdir=RESULTS,
                                                                    compare_root=args.compare_tree), precheck.render)
                if "3" in parts:
                    part("3_api_load_big", lambda: completion.run(state, tuple(args.big_contenders.split(",")),
                                                                          args.big_reps, idle=0),
                         lambda r: completion.render(r, "3. API load per rollout"))
        if parts & {"1", "2", "3", "5", "7"} and args.nodes:
            with LabScope(args.lab, args.nodes, tmp) as state:
                if parts & {"1", "3"}:
                    part("1_completion", lambda: completion.run(state, repetitions=args.reps),
                         lambda r: completion.render(r, "1./3. completion latency and API load"))
                if "3" in parts:
                    part("3_api_load_more_batches", lambda: completion.run(state, ("a", "c"), 1, pct=10, idle=0),
                         lambda r: completion.render(r, "3. API load per rollout, twice the batches"))
                if "5" in parts:
                    part("5_startup", lambda: startup.run(state), startup.render)
                if "2" in parts:
                    part("2_runbook", lambda: runbook.run(state, repetitions=max(1, args.reps - 1)), runbook.render)
                if "7" in parts:
                    part("7_operators", lambda: runbook.run_operators(state, repetitions=max(1, args.reps - 1)),
                         runbook.render_operators)
        if "6" in parts and args.fleet_clusters:
            part("6_fleet", lambda: fleet.run(tmp, args.fleet_clusters, args.fleet_gpu_nodes), fleet.render)
        if "8" in parts and args.fleet_clusters:
            part("8_awx_fleet", lambda: awx_fleet.run(tmp, args.fleet_clusters, args.fleet_gpu_nodes), awx_fleet.render)
    path = _save(results)
    print("\n\n".join(texts))
    print("\nJSON: %s" % path)
    return 1 if any("error" in r for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
