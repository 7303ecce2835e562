"""TensorFusion's own operator in the lab, given as a binary (issue 47): ``lab up --tensorfusion
--operator-binary PATH`` (or TFOPS_OPERATOR_BINARY) runs it instead of the double.

The project never builds that binary and holds none of upstream's files: whoever runs the lab
builds it by hand, outside the repository (CONTRIBUTING.md says how), and names it here.

It runs out of cluster, as its Deployment's container would, configured from what the chart
installed: the three files of its ConfigMaps (``-gpu-info-config``, ``-dynamic-config``,
``-scheduler-config``), the isolation policy and GPU node selector of the controller
Deployment's environment, the release's namespace. Its webhook serves on loopback with the lab's
certificate (controller-runtime reads it from ``$TMPDIR/k8s-webhook-server/serving-certs``; its
port is controller-runtime's 9443, which the lab's MutatingWebhookConfiguration names), its HTTP
API, metrics and health endpoints on free ports; leader election off. In a cluster the
hypervisor process on each GPU node writes that node's GPU objects; here ``lab.tensorfusion.gpus``
does (``tf-gpus``)."""
import os
import shutil
import sys
from pathlib import Path
from typing import Dict

from .. import procs
from ..errors import LabError
from ..state import free_ports, load_state, save_state

WEBHOOK_PORT = 9443  # controller-runtime's default; upstream sets no other
BINARY_ENV = "TFOPS_OPERATOR_BINARY"


def webhook_certificates(tf_dir: Path) -> Path:
    """The folder to give the operator as TMPDIR, holding the lab's webhook certificate where
    controller-runtime looks for it."""
    tmp = tf_dir / "upstream-tmp"
    certs = tmp / "k8s-webhook-server" / "serving-certs"
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tf_dir / "webhook.crt", certs / "tls.crt")
    shutil.copyfile(tf_dir / "webhook.key", certs / "tls.key")
    return tmp


def _controller_env(api, namespace: str) -> Dict[str, str]:
    """The controller container's plain environment values, as the chart rendered them."""
    from kubernetes import client
    deployments = client.AppsV1Api(api).list_namespaced_deployment(
        namespace, label_selector="tensor-fusion.ai/component=operator").items
    if not deployments:
        raise LabError(f"no controller Deployment (tensor-fusion.ai/component=operator) in {namespace}")
    for container in deployments[0].spec.template.spec.containers:
        if container.name == "controller":
            return dict((e.name, e.value) for e in container.env or [] if e.value is not None)
    return {}


def _config_files(api, namespace: str, release: str, out: Path) -> Dict[str, Path]:
    """The chart's ConfigMaps as the files the operator reads."""
    from kubernetes import client
    core = client.CoreV1Api(api)
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for flag, configmap, key in (("-dynamic-config", f"{release}-config", "config.yaml"),
                                 ("-scheduler-config", f"{release}-config", "scheduler-config.yaml"),
                                 ("-gpu-info-config", "tensor-fusion-sys-public-gpu-info", "gpu-info.yaml")):
        data = core.read_namespaced_config_map(configmap, namespace).data or {}
        if key not in data:
            raise LabError(f"ConfigMap {namespace}/{configmap} holds no {key}")
        (out / key).write_text(data[key])
        files[flag] = out / key
    return files


def start_operator(state: Dict, api) -> Dict:
    """Start the given operator binary (record ``tf-operator``, replacing any earlier one) and the
    GPU stand-in (``tf-gpus``) once; returns the operator's record."""
    tf = state["tensorfusion"]
    binary = Path(tf["operator_binary"])
    if not binary.is_file():
        raise LabError(f"the operator binary {binary} is not a file")
    tf_dir = Path(state["state_dir"]) / "tensorfusion"
    namespace = tf["namespace"]
    files = _config_files(api, namespace, tf["release"], tf_dir / "upstream-config")
    env_values = _controller_env(api, namespace)
    http, metrics, health = free_ports(3)
    env = {"KUBECONFIG": state["kubeconfig"], "OPERATOR_NAMESPACE": namespace, "PORT": str(http),
           "TMPDIR": str(webhook_certificates(tf_dir)), "ENABLE_WEBHOOKS": "true",
           "TF_ISOLATION_MODE_POLICY": env_values.get("TF_ISOLATION_MODE_POLICY", "dynamic"),
           "INITIAL_GPU_NODE_LABEL_SELECTOR": env_values.get("INITIAL_GPU_NODE_LABEL_SELECTOR",
                                                             "nvidia.com/gpu.present=true"),
           }
    argv = [str(binary), "-kubeconfig", state["kubeconfig"],
            "-metrics-bind-address", f"127.0.0.1:{metrics}",
            "-health-probe-bind-address", f"127.0.0.1:{health}",
            "-metrics-path", str(tf_dir / "upstream-metrics.log")]
    for flag, path in files.items():
        argv += [flag, str(path)]
    logs = Path(state["state_dir"]) / "logs"
    if not tf.get("scheduler_left"):  # the first start: the operator schedules its own Pods
        from .. import cluster
        save_state(state)
        cluster.leave_scheduler_name(Path(state["state_dir"]), "tensor-fusion-scheduler")
        state["processes"] = load_state(Path(state["state_dir"]))["processes"]
        tf["scheduler_left"] = True
    for rec in state["processes"]:
        if rec["name"] == "tf-operator":
            procs.stop(rec)
    rec = procs.spawn("tf-operator", argv, logs, env={**os.environ, **env})
    state["processes"] = [r for r in state["processes"] if r["name"] != "tf-operator"] + [rec]
    tf.update(operator="upstream", operator_http_port=http, operator_health_port=health)
    if not any(r["name"] == "tf-gpus" and procs.alive(r) for r in state["processes"]):
        gpus = procs.spawn("tf-gpus", [sys.executable, "-m", "lab.tensorfusion.gpus", "--kubeconfig",
                                       state["kubeconfig"], "--namespace", namespace], logs,
                           env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
        state["processes"] = [r for r in state["processes"] if r["name"] != "tf-gpus"] + [gpus]
    save_state(state)
    return rec
