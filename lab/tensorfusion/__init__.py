"""TensorFusion in the lab: CRDs, the operator test double, the Pod webhook, and the test chart.

The lab's add-on ``tensorfusion`` (``TensorFusion``, registered with lab.addons on import):
``lab up --tensorfusion`` and ``cluster.up(..., addons=[addon(...)])`` start it after the control
plane. Its start is ``start(state, chart_version=V1)``, which can also be called on a running lab.
Helpers for tests: ``stop_operator``, ``start_operator``, ``set_knobs``, ``helm_install``.
"""
import base64
import hashlib
import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional

import yaml

from .. import addons, paths, procs
from ..errors import LabError
from ..state import free_ports, port_free, save_state
from .chartrepo import V1, V2, VERSIONS  # noqa: F401  (re-exported for tests and the CLI)
from . import upstream

NAMESPACE = "tensor-fusion-sys"
RELEASE = "tensor-fusion-sys"
CHART = "tensor-fusion"
KNOBS = "tfops-lab-operator"
# The double's answer to a knobs write: the digest of the data it applies, as an annotation of
# the ConfigMap; set_knobs waits for it, so that no test runs under the knobs before its own.
KNOBS_APPLIED = "tfops-lab/knobs-applied"
ADDON = "tensorfusion"  # its name among the lab's add-ons (lab.addons)
CRD_DIR = Path(__file__).resolve().parent.parent / "crds"
REPO_ROOT = Path(__file__).resolve().parent.parent.parent


class TensorFusionError(LabError):
    """TensorFusion could not be brought up in the lab; the message says which part and why."""


def _env() -> Dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO_ROOT)}


def _clients(state):
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(state["kubeconfig"], client_configuration=cfg)
    return client.ApiClient(cfg)


def install_crds(api_client, timeout: float = 60.0) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    ext = client.ApiextensionsV1Api(api_client)
    names = []
    for path in sorted(CRD_DIR.glob("*.yaml")):
        body = yaml.safe_load(path.read_text())
        names.append(body["metadata"]["name"])
        try:
            ext.create_custom_resource_definition(body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            cur = ext.read_custom_resource_definition(body["metadata"]["name"])
            body["metadata"]["resourceVersion"] = cur.metadata.resource_version
            ext.replace_custom_resource_definition(body["metadata"]["name"], body)
    deadline = time.monotonic() + timeout
    for name in names:  # a handful of objects, once: polling is fine here
        while True:
            crd = ext.read_custom_resource_definition(name)
            if any(c.type == "Established" and c.status == "True"
                   for c in (crd.status.conditions or [])):
                break
            if time.monotonic() > deadline:
                raise TensorFusionError(f"CRD {name} not Established")
            time.sleep(0.2)


def namespace_of(state: Dict) -> str:
    """The release namespace of this lab's TensorFusion (the operator's namespace)."""
    return (state.get("tensorfusion") or {}).get("namespace") or NAMESPACE


def _webhook_cert(state: Dict, out: Path, namespace: str) -> None:
    pki = Path(state["state_dir"]) / "pki"
    out.mkdir(parents=True, exist_ok=True)
    (out / "webhook.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost,"
                                     f"DNS:{RELEASE}-webhook.{namespace}.svc\n"
                                     "extendedKeyUsage=serverAuth\n")
    for cmd in (["req", "-newkey", "rsa:2048", "-nodes", "-keyout", "webhook.key", "-out",
                 "webhook.csr", "-subj", "/CN=tensor-fusion-webhook"],
                ["x509", "-req", "-in", "webhook.csr", "-CA", str(pki / "ca.crt"), "-CAkey",
                 str(pki / "ca.key"), "-CAcreateserial", "-CAserial", "webhook.srl", "-days", "3650",
                 "-out", "webhook.crt", "-extfile", "webhook.ext"]):
        res = subprocess.run(["openssl", *cmd], cwd=out, capture_output=True, text=True)
        if res.returncode:
            raise TensorFusionError(f"openssl {cmd[0]}: {res.stderr.strip()}")


def _wait_http(url: str, rec: Dict, what: str, timeout: float = 30.0, ctx=None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not procs.alive(rec):
            raise TensorFusionError(f"{what} exited; see its log in the lab's logs folder")
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx):
                return
        except OSError:
            time.sleep(0.1)
    raise TensorFusionError(f"{what} did not answer at {url}")


def _ensure_namespace_and_secret(api_client, cert_dir: Path, namespace: str) -> None:
    from kubernetes import client
    from kubernetes.client.rest import ApiException
    core = client.CoreV1Api(api_client)
    for fn, args in ((core.create_namespace, ({"metadata": {"name": namespace}},)),
                     # What the chart's certgen Job makes upstream: the webhook serving cert.
                     (core.create_namespaced_secret, (namespace, {
                         "metadata": {"name": "tensor-fusion-webhook-secret"},
                         "data": {"cert": base64.b64encode((cert_dir / "webhook.crt").read_bytes())
                                  .decode(),
                                  "key": base64.b64encode((cert_dir / "webhook.key").read_bytes())
                                  .decode()}}))):
        try:
            fn(*args)
        except ApiException as exc:
            if exc.status != 409:
                raise


def start_operator(state: Dict, workers: int = 8, gpus_per_node: int = 1) -> Dict:
    """(Re)start the operator (the double, or the binary the lab was given); its record replaces
    any earlier one in the state (which is stopped first, so that no operator is left running
    unrecorded)."""
    if (state.get("tensorfusion") or {}).get("operator") == "upstream":
        api = _clients(state)
        try:
            return upstream.start_operator(state, api)
        finally:
            api.close()
    stop_operator(state)
    logs = Path(state["state_dir"]) / "logs"
    rec = procs.spawn("tf-operator", [
        sys.executable, "-m", "lab.tensorfusion.operator", "--kubeconfig", state["kubeconfig"],
        "--namespace", namespace_of(state),
        "--workers", str(workers), "--gpus-per-node", str(gpus_per_node)], logs, env=_env())
    state["processes"] = [r for r in state["processes"] if r["name"] != "tf-operator"] + [rec]
    save_state(state)
    return rec


def stop_operator(state: Dict) -> None:
    """Stop the double (SIGTERM, as a Pod deletion would), e.g. in the middle of a rollout."""
    for rec in state["processes"]:
        if rec["name"] == "tf-operator":
            procs.stop(rec)


def knobs_digest(data) -> str:
    """What the double writes into KNOBS_APPLIED once it applies the knobs ``data``."""
    return hashlib.sha256(json.dumps(data or {}, sort_keys=True).encode()).hexdigest()[:16]


def set_knobs(api_client, namespace: str = NAMESPACE, applied_within: float = 60, **knobs) -> None:
    """Write the double's fault knobs (ConfigMap <namespace>/tfops-lab-operator, in the
    operator's namespace); ``None`` removes a knob. Read live by the double, and returns once the
    double says it applies them (``applied_within`` seconds at most, then LabError; 0: no wait,
    for an operator that reads no knobs)."""
    from kubernetes import client, watch
    from kubernetes.client.rest import ApiException
    core = client.CoreV1Api(api_client)
    data = {k: (None if v is None else str(v)) for k, v in knobs.items()}
    try:
        written = core.patch_namespaced_config_map(KNOBS, namespace, {"data": data})
    except ApiException as exc:
        if exc.status != 404:
            raise
        written = core.create_namespaced_config_map(namespace, {
            "metadata": {"name": KNOBS}, "data": {k: v for k, v in data.items() if v is not None}})
    if not applied_within:
        return
    want = knobs_digest(written.data)
    deadline = time.monotonic() + applied_within
    seen = written
    while (seen.metadata.annotations or {}).get(KNOBS_APPLIED) != want:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise LabError(
                f"the operator double has not applied its knobs {written.data} within "
                f"{applied_within:g} s (ConfigMap {namespace}/{KNOBS}, annotation {KNOBS_APPLIED} "
                f"is {(seen.metadata.annotations or {}).get(KNOBS_APPLIED)!r}, not {want!r}): is it "
                "running? See the lab's logs/tf-operator.log")
        stream = watch.Watch().stream(core.list_namespaced_config_map, namespace,
                                      field_selector=f"metadata.name={KNOBS}",
                                      resource_version=seen.metadata.resource_version,
                                      timeout_seconds=max(1, int(remaining)))
        try:
            for event in stream:
                seen = event["object"]
                if (seen.metadata.annotations or {}).get(KNOBS_APPLIED) == want:
                    break
        except ApiException as exc:
            if exc.status != 410:
                raise
            seen = core.read_namespaced_config_map(KNOBS, namespace)


def helm_install(state: Dict, version: str = V1, helm_major: str = "3", values_cn: bool = False,
                 extra: Optional[List[str]] = None, timeout: str = "10m") -> str:
    """The documented command against the lab's chart repository; returns helm's output."""
    repo = state["tensorfusion"]["chart_repo"]
    cmd = [str(paths.helm_binary(helm_major)), "upgrade", "--install", "--create-namespace",
           "--namespace", namespace_of(state), "--repo", repo, RELEASE, CHART, "--version", version,
           "--kubeconfig", state["kubeconfig"], "--wait", "--timeout", timeout]
    if values_cn:
        cmd += ["-f", f"{repo}/values-cn.yaml"]
    res = subprocess.run(cmd + list(extra or []), capture_output=True, text=True)
    if res.returncode:
        raise TensorFusionError(f"helm {helm_major} install of {version} failed: "
                                f"{res.stderr.strip() or res.stdout.strip()}")
    return res.stdout


def _check_alive(state: Dict) -> None:
    for rec in state["processes"]:
        if rec["name"].startswith("tf-") and not procs.alive(rec):
            raise TensorFusionError(f"{rec['name']} exited; see {state['state_dir']}/logs/"
                                    f"{rec['name']}.log")


COMPONENTS = ("hypervisor", "worker", "client")


def unsettled(tfcs: List[Dict], pools: List[Dict]) -> List[str]:
    """What keeps TensorFusion from being settled, one line each (empty: settled): a cluster or
    pool that is not Running, and a component campaign in progress - the in-progress annotation
    set and not synced, or a hash not synced although its autoUpdate is on (what the collection's
    precheck refuses as ROLLOUT_IN_PROGRESS / COMPONENT_NOT_SYNCED)."""
    waiting = []
    if not pools:
        waiting.append("no GPUPool yet")
    for kind, items in (("TensorFusionCluster", tfcs), ("GPUPool", pools)):
        for item in items:
            phase = (item.get("status") or {}).get("phase") or "no phase"
            if phase != "Running":
                waiting.append(f"{kind} {item['metadata']['name']} is {phase}")
    for pool in pools:
        name = pool["metadata"]["name"]
        status = (pool.get("status") or {}).get("componentStatus") or {}
        annotations = pool["metadata"].get("annotations") or {}
        policy = (((pool.get("spec") or {}).get("nodeManagerConfig") or {})
                  .get("nodePoolRollingUpdatePolicy") or {})
        for comp in COMPONENTS:
            synced = bool(status.get(f"{comp}ConfigSynced"))
            campaign = annotations.get(f"tensor-fusion.ai/{comp}-update-in-progress", "")
            auto = bool(policy.get(f"autoUpdate{comp.capitalize()}"))
            progress = status.get(f"{comp}UpdateProgress") or 0
            if campaign and not synced:
                waiting.append(f"GPUPool {name}: {comp} campaign {campaign} at {progress}%")
            elif status.get(comp) and auto and not synced:
                waiting.append(f"GPUPool {name}: {comp} not synced ({progress}%)")
    return waiting


def wait_settled(state: Dict, timeout: float) -> None:
    """Watch (no polling) until TensorFusion has settled (``unsettled`` is empty): every
    TensorFusionCluster and GPUPool Running and no component campaign in progress, so that the
    first change made on a new lab does not meet the chart's first hypervisor campaign."""
    from kubernetes import client, watch
    api = _clients(state)
    co = client.CustomObjectsApi(api)
    deadline = time.monotonic() + timeout
    waiting: List[str] = ["nothing read yet"]
    try:
        while time.monotonic() < deadline:
            _check_alive(state)
            tfcs = co.list_cluster_custom_object("tensor-fusion.ai", "v1", "tensorfusionclusters")
            pools = co.list_cluster_custom_object("tensor-fusion.ai", "v1", "gpupools")
            waiting = unsettled(tfcs["items"], pools["items"])
            if not waiting:
                return
            w = watch.Watch()
            # Short watches of the pools: the TensorFusionCluster turns Running just after them.
            for _ in w.stream(co.list_cluster_custom_object, "tensor-fusion.ai", "v1", "gpupools",
                              resource_version=pools["metadata"]["resourceVersion"],
                              timeout_seconds=max(1, min(3, int(deadline - time.monotonic())))):
                w.stop()  # re-check everything once a pool changed
        raise TensorFusionError(f"TensorFusion not settled after {timeout:.0f}s: "
                                + "; ".join(waiting))
    finally:
        api.close()


def start(state: Dict, chart_version: str = V1, timeout: Optional[float] = None,
          namespace: str = NAMESPACE, operator_binary: Optional[str] = None) -> List[Dict]:
    """Install the CRDs, start the chart repository, the webhook and the operator double, install
    chart ``chart_version`` with helm 3 into ``namespace`` (the release's and the operator's) and
    wait until TensorFusion has settled (``wait_settled``). Appends the process records to ``state['processes']`` and
    the details to ``state['tensorfusion']``; returns the records it started. Called on a running
    lab, it makes TensorFusion an add-on of that lab (recorded in ``state['addons']``), as
    ``cluster.up`` does for the add-ons it starts. ``operator_binary``: TensorFusion's own
    operator runs instead of the double (lab/tensorfusion/upstream.py), serving the webhook
    itself."""
    if ADDON not in addons.recorded(state):
        state["addons"] = addons.recorded(state) + [ADDON]
    state_dir = Path(state["state_dir"])
    logs = state_dir / "logs"
    tf_dir = state_dir / "tensorfusion"
    timeout = timeout or 180.0 + 0.5 * int(state.get("nodes") or 3)
    api = _clients(state)
    started: List[Dict] = []
    try:
        install_crds(api)
        _webhook_cert(state, tf_dir, namespace)
        _ensure_namespace_and_secret(api, tf_dir, namespace)
        wh_port, repo_port = free_ports(2)
        if operator_binary:
            wh_port = upstream.WEBHOOK_PORT
            if not port_free(wh_port):
                raise TensorFusionError(f"port {wh_port}, where TensorFusion's operator serves its webhook, "
                                        "is taken (another lab with that operator?)")
        repo_url = f"http://127.0.0.1:{repo_port}"
        webhook_url = f"https://127.0.0.1:{wh_port}/mutate-v1-pod"
        ca = base64.b64encode((state_dir / "pki" / "ca.crt").read_bytes()).decode()
        from .chartrepo import build
        build(tf_dir / "chart-repo", repo_url, str(paths.helm_binary("3")), webhook_url, ca)
        for name, cmd in (
                ("tf-chart-repo", [sys.executable, "-m", "http.server", str(repo_port),
                                   "--bind", "127.0.0.1", "--directory", str(tf_dir / "chart-repo")]),
                ("tf-webhook", [sys.executable, "-m", "lab.tensorfusion.webhook", "--kubeconfig",
                                state["kubeconfig"], "--port", str(wh_port),
                                "--cert", str(tf_dir / "webhook.crt"),
                                "--key", str(tf_dir / "webhook.key")])):
            if operator_binary and name == "tf-webhook":
                continue  # the operator serves its own
            rec = procs.spawn(name, cmd, logs, env=_env())
            started.append(rec)
            state["processes"].append(rec)
        state["tensorfusion"] = {"chart_repo": repo_url, "webhook_url": webhook_url,
                                 "webhook_port": wh_port, "namespace": namespace,
                                 "release": RELEASE, "chart": CHART, "versions": list(VERSIONS),
                                 "chart_version": chart_version, "knobs_configmap": KNOBS,
                                 "operator": "upstream" if operator_binary else "double",
                                 "operator_binary": str(Path(operator_binary).resolve()) if operator_binary else None}
        save_state(state)
        _wait_http(f"{repo_url}/index.yaml", started[0], "chart repository")
        if operator_binary:
            # Configured from what the chart installs: after it.
            helm_install(state, chart_version)
            started.append(upstream.start_operator(state, api))
        else:
            import ssl
            _wait_http(f"https://127.0.0.1:{wh_port}/healthz", started[1], "webhook",
                       ctx=ssl.create_default_context(cafile=str(state_dir / "pki" / "ca.crt")))
            started.append(start_operator(state))
            helm_install(state, chart_version)
        wait_settled(state, timeout)
    finally:
        api.close()
    return started



class TensorFusion(addons.Addon):
    """TensorFusion as an add-on of the lab: ``start`` is ``start()`` above with these options;
    ``stop`` stops its processes (newest first); ``health`` checks they run; after an API server
    restart the operator double is started again, as its Deployment would restart a crashed
    operator (kopf gives up when the API server answers 404 for its CRDs while it starts)."""

    name = ADDON

    def __init__(self, chart_version: Optional[str] = None, namespace: Optional[str] = None,
                 timeout: Optional[float] = None, operator_binary: Optional[str] = None):
        self.chart_version = chart_version or V1
        self.namespace = namespace or NAMESPACE
        self.timeout = timeout
        self.operator_binary = operator_binary

    def start(self, state: Dict) -> None:
        start(state, self.chart_version, timeout=self.timeout, namespace=self.namespace,
              operator_binary=self.operator_binary)

    def stop(self, state: Dict) -> None:
        for rec in reversed(state["processes"]):
            if rec["name"].startswith("tf-"):
                procs.stop(rec)

    def health(self, state: Dict) -> None:
        _check_alive(state)

    def api_server_restarted(self, state: Dict) -> None:
        if any(r["name"] == "tf-operator" for r in state["processes"]):
            start_operator(state)


def addon(chart_version: Optional[str] = None, namespace: Optional[str] = None,
          timeout: Optional[float] = None, operator_binary: Optional[str] = None) -> TensorFusion:
    """The add-on with these options (None: chart ``V1``, namespace ``NAMESPACE``, the double;
    ``operator_binary``: TensorFusion's own operator, lab/tensorfusion/upstream.py)."""
    return TensorFusion(chart_version=chart_version, namespace=namespace, timeout=timeout,
                        operator_binary=operator_binary)


addons.register(ADDON, addon)
