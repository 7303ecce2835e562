"""Benchmark: how long a warm-cache ``lab up`` takes, and ``down``, over several repetitions.

    source tests/env.sh && python bench/lab_up.py [--runs 3] [--nodes 3]

Prints a table (median, min, max) and writes bench/results/lab_up.json.
"""
import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from lab import cluster, install  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args()
    install.ensure_all()  # the cache is warm from here on
    ups, downs = [], []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="tfops-bench-lab-") as tmp:
            state = Path(tmp) / "lab"
            t0 = time.monotonic()
            cluster.up(state, nodes=args.nodes)
            t1 = time.monotonic()
            cluster.down(state)
            t2 = time.monotonic()
            ups.append(t1 - t0)
            downs.append(t2 - t1)
    rows = {"up_seconds": ups, "down_seconds": downs}
    print(f"{'step':<14}{'median':>10}{'min':>10}{'max':>10}   ({args.runs} runs, {args.nodes} GPU nodes)")
    for name, values in rows.items():
        print(f"{name:<14}{statistics.median(values):>10.2f}{min(values):>10.2f}{max(values):>10.2f}")
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    (out / "lab_up.json").write_text(json.dumps({"nodes": args.nodes, **rows}, indent=2))


if __name__ == "__main__":
    main()
