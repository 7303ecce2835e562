"""Labs for the benchmarks: up (or reuse one given with --lab), fill to the size of part 4, down."""
import concurrent.futures
import json
import subprocess
import time
from pathlib import Path

from bench.proc import REPO  # noqa: F401  (puts the repository on sys.path)


def up(state_dir, nodes):
    from lab import cluster
    from lab import tensorfusion as tf
    return cluster.up(Path(state_dir), nodes=nodes, cpu_nodes=1, addons=[tf.addon()], node_lifecycle=nodes <= 100)


def load(state_dir):
    return json.loads((Path(state_dir) / "state.json").read_text())


def down(state_dir):
    from lab import cluster
    from lab import tensorfusion  # noqa: F401  (registers the add-on, which down stops first)
    cluster.down(Path(state_dir))


def is_filled(state):
    from lab import paths
    out = subprocess.run([str(paths.kubectl_binary()), "--kubeconfig", state["kubeconfig"], "get", "namespace",
                          "bench-apps", "--ignore-not-found", "-o", "name"], capture_output=True, text=True, check=False)
    return bool(out.stdout.strip())


def fill(state, gpus_per_node=8, pods=9000, workloads=2000, threads=8):
    """Part 4's size: ``gpus_per_node`` GPUs per node (the double restarted with it), ``pods``
    filler Pods spread over the GPU nodes and ``workloads`` TensorFusion Deployments (0 replicas,
    no probe, no PDB: three findings each)."""
    from kubernetes import client, config
    from lab import tensorfusion as tf
    tf.stop_operator(state)
    tf.start_operator(state, gpus_per_node=gpus_per_node)
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

    deadline = time.monotonic() + 60
    while not any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account("bench-pods").items):
        if time.monotonic() > deadline:  # set-up only; not a measured wait
            raise RuntimeError("no default ServiceAccount in bench-pods")
        time.sleep(0.2)
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(deployment, range(workloads)))
        list(pool.map(pod, range(pods)))
    api.close()
    tf.wait_settled(state, timeout=900)
