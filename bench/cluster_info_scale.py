"""Benchmark: tf_cluster_info on a big cluster, side by side with the manual kubectl commands of
the runbook's "before" step, in the same run on the same lab.

    source tests/env.sh && python bench/cluster_info_scale.py            # 1,000 nodes, 8,000 GPUs,
                                                                          # 10,000 Pods, 2,000 workloads
    python bench/cluster_info_scale.py --nodes 100 --pods 1000 --workloads 200   # a quick look

Starts its own lab, fills it, runs each contender --runs times, prints a table (median time,
peak memory of the process doing the work, API requests it made) with ratios, writes
bench/results/cluster_info_scale.json, and stops the lab.
"""
import argparse
import concurrent.futures
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from lab import cluster, paths  # noqa: E402
from lab import tensorfusion as tf  # noqa: E402

# The runbook's manual "before" step (design.md): clusters, pools, nodes, GPUs, operator Pods,
# plus what a person checks for business workloads (Deployments, StatefulSets, PDBs) and events.
KUBECTL_COMMANDS = [
    ["get", "tensorfusionclusters", "-o", "json"],
    ["get", "gpupools", "-o", "json"],
    ["get", "gpunodes", "-o", "json"],
    ["get", "gpus", "-o", "json"],
    ["get", "pods", "-n", "tensor-fusion-sys", "-o", "json"],
    ["get", "deployments,statefulsets", "-A", "-o", "json"],
    ["get", "pdb", "-A", "-o", "json"],
    ["get", "events", "-A", "--field-selector", "type=Warning", "-o", "json"],
]


def run_measured(cmd, env=None):
    """(seconds, peak RSS in MiB of the child, stdout) for one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    elapsed = time.monotonic() - started
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode:
        raise RuntimeError(f"{cmd[0]} failed: {proc.stderr[-2000:]}")
    # ru_maxrss of children is the max over all waited children so far; a new max shows this one.
    return elapsed, max(peak, before) / 1024.0, proc.stdout, proc.stderr


def fill(state, pods, workloads, threads=8):
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(state["kubeconfig"], client_configuration=cfg)
    cfg.connection_pool_maxsize = threads * 2
    api = client.ApiClient(cfg)
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    for ns in ("bench-apps", "bench-pods"):
        core.create_namespace({"metadata": {"name": ns}})
    nodes = [f"tfops-gpu-{i}" for i in range(state["nodes"])]

    def deployment(i):
        labels = {"app": f"app-{i}", "tensor-fusion.ai/enabled": "true"}
        apps.create_namespaced_deployment("bench-apps", {
            "metadata": {"name": f"app-{i}"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": f"app-{i}"}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "registry.lab/app:1"}]}}}})

    def pod(i):
        core.create_namespaced_pod("bench-pods", {
            "metadata": {"name": f"p-{i}", "labels": {"app": "filler"}},
            "spec": {"nodeName": nodes[i % len(nodes)], "automountServiceAccountToken": False,
                     "containers": [{"name": "c", "image": "registry.lab/filler:1"}]}})

    wait_default_sa(core, "bench-pods")
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(deployment, range(workloads)))
        list(pool.map(pod, range(pods)))
    api.close()


def wait_default_sa(core, ns):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # set-up only; not a measured wait
        if any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(ns).items):
            return
        time.sleep(0.2)
    raise RuntimeError("no default ServiceAccount")


def count_pods(state):
    out = subprocess.run([str(paths.kubectl_binary()), "--kubeconfig", state["kubeconfig"], "get", "pods",
                          "-A", "--no-headers", "--chunk-size=500"], capture_output=True, text=True, check=True)
    return len(out.stdout.splitlines())


def module_run(state, workdir):
    args = workdir / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {"kubeconfig": state["kubeconfig"]}}))
    env = dict(os.environ, PYTHONPATH=str(paths.collections_link(REPO)))
    secs, rss, out, _err = run_measured([sys.executable, str(REPO / "plugins/modules/tf_cluster_info.py"),
                                         str(args)], env=env)
    result = json.loads(out[out.index("{"):])
    if result.get("failed"):
        raise RuntimeError(result.get("msg"))
    return secs, rss, result["api_requests"], result


def kubectl_run(state):
    total_secs, peak, requests = 0.0, 0.0, 0
    for cmd in KUBECTL_COMMANDS:
        secs, rss, _out, err = run_measured([str(paths.kubectl_binary()), "--kubeconfig", state["kubeconfig"],
                                             "-v=6", "--chunk-size=500", *cmd])
        total_secs += secs
        peak = max(peak, rss)
        # kubectl -v=6 logs one line per request ("GET https://... 200 OK" or, newer, verb="GET").
        requests += len(re.findall(r'GET https://\S+ 200 OK|verb="GET"', err))
    return total_secs, peak, requests


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--pods", type=int, default=9000, help="filler Pods on top of the hypervisors")
    parser.add_argument("--workloads", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfops-bench-") as tmp:
        workdir = Path(tmp)
        state_dir = workdir / "lab"
        t0 = time.monotonic()
        state = cluster.up(state_dir, nodes=args.nodes, cpu_nodes=1, tensorfusion=True,
                           node_lifecycle=args.nodes <= 100)
        try:
            tf.stop_operator(state)
            tf.start_operator(state, gpus_per_node=args.gpus_per_node)
            fill(state, args.pods, args.workloads)
            tf.wait_pools_running(state, timeout=600)
            setup = time.monotonic() - t0
            total_pods = count_pods(state)
            mod, kub = [], []
            for _ in range(args.runs):
                mod.append(module_run(state, workdir))
                kub.append(kubectl_run(state))
            data = mod[-1][3]["data"]
            report = {
                "size": {"gpu_nodes": len(data["gpunodes"]), "gpus": data["gpus"]["total"], "pods": total_pods,
                         "tf_workloads": len(data["workloads"]), "setup_seconds": round(setup, 1)},
                "tf_cluster_info": {"median_seconds": statistics.median(m[0] for m in mod),
                                    "peak_rss_mib": max(m[1] for m in mod), "api_requests": mod[-1][2],
                                    "findings": mod[-1][3]["summary"]},
                "kubectl_get": {"median_seconds": statistics.median(k[0] for k in kub),
                                "peak_rss_mib": max(k[1] for k in kub), "api_requests": kub[-1][2]},
            }
        finally:
            cluster.down(state_dir)
    m, k = report["tf_cluster_info"], report["kubectl_get"]
    print(f"size: {report['size']}")
    print(f"{'':<16}{'median s':>10}{'peak MiB':>10}{'requests':>10}")
    print(f"{'tf_cluster_info':<16}{m['median_seconds']:>10.2f}{m['peak_rss_mib']:>10.0f}{m['api_requests']:>10}")
    print(f"{'kubectl get x8':<16}{k['median_seconds']:>10.2f}{k['peak_rss_mib']:>10.0f}{k['api_requests']:>10}")
    print(f"{'ratio':<16}{m['median_seconds'] / k['median_seconds']:>10.2f}"
          f"{m['peak_rss_mib'] / k['peak_rss_mib']:>10.2f}{m['api_requests'] / max(1, k['api_requests']):>10.2f}")
    out = REPO / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "cluster_info_scale.json").write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
