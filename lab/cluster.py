"""Bring the lab's control plane up and down: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and the kubelet stand-in (kwok, run by lab/kubelet.py), on free loopback ports, in
a state folder of its own (lab.state). What runs on top of it (TensorFusion) is an add-on
(lab.addons): started after the control plane, stopped before it, told about API server
restarts; this module imports none of them."""
import json
import os
import secrets
import shutil
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Union

from . import addons as addons_mod
from . import certs, install, paths, procs
from .errors import LabError
from .state import MARKER, claim, free_ports, is_lab_folder, load_state, save_state

ADMIN_USER = "tfops-lab-admin"


def _kubeconfig(server: str, ca: Path, user: Dict) -> str:
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "tfops-lab",
        "clusters": [{"name": "tfops-lab", "cluster": {"server": server,
                                                       "certificate-authority": str(ca)}}],
        "users": [{"name": ADMIN_USER, "user": user}],
        "contexts": [{"name": "tfops-lab",
                      "context": {"cluster": "tfops-lab", "user": ADMIN_USER}}],
    }, indent=2)


def _ssl_context(pki: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(pki / "ca.crt"))


def _get(state: Dict, path: str, timeout: float = 2.0):
    req = urllib.request.Request(state["server"] + path,
                                 headers={"Authorization": f"Bearer {state['token']}"})
    ctx = _ssl_context(Path(state["state_dir"]) / "pki")
    with urllib.request.urlopen(req, context=ctx, timeout=timeout) as resp:
        return resp.status, resp.read()


def _serving(port: int) -> bool:
    """Whether a control-plane component answers /healthz on its secure port (its own
    self-signed certificate; the path is open to anonymous callers)."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=2.0) as resp:
        return resp.status == 200


def _wait_for(what: str, check, state: Dict, deadline: float,
              processes: Optional[List[Dict]] = None) -> None:
    """Start-up readiness is polled: there is nothing to watch before the API server answers.
    A process of ``processes`` (default: all of the lab's) that exits meanwhile ends the wait."""
    last = "no answer yet"
    while time.monotonic() < deadline:
        for rec in state["processes"] if processes is None else processes:
            if not procs.alive(rec):
                raise LabError(f"{rec['name']} exited while waiting for {what}; see "
                               f"{state['state_dir']}/logs/{rec['name']}.log")
        try:
            if check():
                return
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.1)
    raise LabError(f"timed out waiting for {what} (last: {last}); logs in {state['state_dir']}/logs")


def up(state_dir: Path, nodes: int = 3, cpu_nodes: int = 1, ready_delay: float = 0.5,
       node_lifecycle: bool = True, leader_elect: bool = False, timeout: float = 120.0,
       addons: Sequence[Union[str, addons_mod.Addon]] = (),
       kube_version: Optional[str] = None) -> Dict:
    """Start the control plane (Kubernetes ``kube_version``, a minor such as "1.34" or a
    release; default the lab's default), then ``addons`` in their order (add-on objects, or
    names of registered add-ons with their default options); returns the state. ``leader_elect``:
    kube-controller-manager holds its leader Lease, kube-system/kube-controller-manager, as in
    production (tests of who watches that Lease need it). A lab already
    running in ``state_dir`` is returned as it is."""
    state_dir = Path(state_dir).resolve()
    wanted = addons_mod.resolve(addons)
    try:
        release = paths.kube_release(kube_version or paths.DEFAULT_KUBE_MINOR)
    except ValueError as exc:
        raise LabError(str(exc)) from None
    claim(state_dir)
    existing = load_state(state_dir)
    if existing and all(procs.alive(r) for r in existing["processes"]):
        return existing
    if existing:
        down(state_dir)
    install.ensure_all()
    bin_dir = install.ensure_kube_binaries(release)
    claim(state_dir)
    pki = state_dir / "pki"
    certs.make_pki(pki)
    logs = state_dir / "logs"
    token = secrets.token_hex(24)
    (state_dir / "tokens.csv").write_text(f'{token},{ADMIN_USER},tfops-lab-admin,"system:masters"\n')
    (state_dir / "tokens.csv").chmod(0o600)
    etcd_port, peer_port, metrics_port, api_port, cm_port, sched_port = free_ports(6)
    server = f"https://127.0.0.1:{api_port}"
    state = {"state_dir": str(state_dir), "server": server, "token": token,
             "kubeconfig": str(state_dir / "kubeconfig"), "processes": [],
             "ports": {"etcd": etcd_port, "apiserver": api_port, "controller_manager": cm_port,
                       "scheduler": sched_port},
             "nodes": nodes, "cpu_nodes": cpu_nodes, "kube_version": release}
    for name, user in (("kubeconfig", {"token": token}),
                       ("kubeconfig-cert", {"client-certificate": str(pki / "admin.crt"),
                                            "client-key": str(pki / "admin.key")})):
        (state_dir / name).write_text(_kubeconfig(server, pki / "ca.crt", user))
        (state_dir / name).chmod(0o600)
    try:
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        state["processes"].append(procs.spawn("etcd", [
            str(paths.etcd_binary()), "--data-dir", str(state_dir / "etcd"), "--name", "tfops-lab",
            "--listen-client-urls", etcd_url, "--advertise-client-urls", etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer_port}",
            "--initial-cluster", f"tfops-lab=http://127.0.0.1:{peer_port}",
            "--listen-metrics-urls", f"http://127.0.0.1:{metrics_port}",
            "--quota-backend-bytes", str(4 * 1024 ** 3)], logs))
        save_state(state)
        state["processes"].append(procs.spawn("kube-apiserver", [
            str(bin_dir / "kube-apiserver"), f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            # Kubernetes 1.37 refuses a loopback address in the default/kubernetes Endpoints;
            # nothing in the lab reaches the API server through that Service.
            "--endpoint-reconciler-type=none",
            f"--secure-port={api_port}",
            f"--tls-cert-file={pki / 'server.crt'}", f"--tls-private-key-file={pki / 'server.key'}",
            f"--client-ca-file={pki / 'ca.crt'}", f"--token-auth-file={state_dir / 'tokens.csv'}",
            "--authorization-mode=RBAC", "--allow-privileged=true",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={pki / 'sa.pub'}",
            f"--service-account-signing-key-file={pki / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--max-requests-inflight=800", "--max-mutating-requests-inflight=400",
            "--event-ttl=1h", "--v=1"], logs))
        save_state(state)
        deadline = time.monotonic() + timeout
        _wait_for("kube-apiserver /readyz", lambda: _get(state, "/readyz")[0] == 200,
                  state, deadline)
        # No Pod CIDRs and no CSR signing here; without heartbeats the node-lifecycle controller
        # would evict Pods, which a lab of thousands of simulated nodes may not want.
        controllers = ("*,-node-ipam-controller,-certificatesigningrequest-signing-controller"
                       + ("" if node_lifecycle else ",-node-lifecycle-controller"))
        state["processes"].append(_spawn_supervised("kube-controller-manager", [
            str(bin_dir / "kube-controller-manager"), f"--kubeconfig={state_dir / 'kubeconfig'}",
            # Leader election off by default: a restart would wait out the Lease (15 s).
            f"--leader-elect={str(leader_elect).lower()}",
            f"--service-account-private-key-file={pki / 'sa.key'}",
            f"--root-ca-file={pki / 'ca.crt'}", f"--controllers={controllers}",
            f"--secure-port={cm_port}", "--bind-address=127.0.0.1",
            f"--cert-dir={state_dir / 'cm-certs'}", "--use-service-account-credentials=false",
            "--concurrent-deployment-syncs=10", "--concurrent-replicaset-syncs=10",
            "--kube-api-qps=200", "--kube-api-burst=400", "--v=1"], logs))
        save_state(state)
        (state_dir / "scheduler.json").write_text(scheduler_config(state_dir / "kubeconfig"))
        state["processes"].append(_spawn_supervised("kube-scheduler", [
            str(bin_dir / "kube-scheduler"), f"--config={state_dir / 'scheduler.json'}",
            f"--authentication-kubeconfig={state_dir / 'kubeconfig'}",
            f"--authorization-kubeconfig={state_dir / 'kubeconfig'}",
            f"--secure-port={sched_port}", "--bind-address=127.0.0.1",
            f"--cert-dir={state_dir / 'scheduler-certs'}", "--v=1"], logs))
        save_state(state)
        # The kubelet stand-in: kwok, run (and restarted when the knobs change) by lab.kubelet.
        state["processes"].append(procs.spawn("kubelet", [
            sys.executable, "-m", "lab.kubelet", "--kubeconfig", str(state_dir / "kubeconfig"),
            "--gpu-nodes", str(nodes), "--cpu-nodes", str(cpu_nodes),
            "--ready-delay", str(ready_delay), "--kwok", str(paths.kwok_binary()),
            "--stages", str(state_dir / "kwok-stages.yaml"),
            "--kwok-log", str(logs / "kwok.log")], logs,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}))
        save_state(state)
        # Supervised: one that cannot start is started again and again, so its exit ends no wait;
        # its health endpoint shows it is up.
        for name, port in (("kube-controller-manager", cm_port), ("kube-scheduler", sched_port)):
            _wait_for(f"{name} /healthz on port {port} (see logs/{name}.log)",
                      lambda port=port: _serving(port), state, deadline)
        _wait_for("the default ServiceAccount", lambda: _get(
            state, "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200, state, deadline)
        _wait_for(f"{nodes + cpu_nodes} Ready Nodes", lambda: _ready_nodes(state) >= nodes + cpu_nodes,
                  state, deadline)
        addons_mod.start_all(state, wanted, saved=save_state)
    except BaseException as exc:
        # Keep the logs of a failed start for whoever has to find out why.
        kept = state_dir.with_name(state_dir.name + ".failed-logs")
        shutil.rmtree(kept, ignore_errors=True)
        if (state_dir / "logs").exists():
            shutil.copytree(state_dir / "logs", kept)
            if isinstance(exc, LabError):
                exc.args = (f"{exc} (logs kept in {kept})",)
        try:
            down(state_dir)
        except LabError:
            pass  # an add-on that also fails to stop: the start's failure is the one to report
        raise
    return state


# TensorFusion's Pods name their own scheduler, which the lab does not run: kube-scheduler
# schedules them as well, under a second profile of that name (its default plugins honour the
# nodeSelector and affinity the webhook gives them).
SCHEDULER_NAMES = ("default-scheduler", "tensor-fusion-scheduler")


def scheduler_config(kubeconfig: Path, names=SCHEDULER_NAMES) -> str:
    """kube-scheduler's configuration file. With --config, kube-scheduler ignores its client
    flags (--kubeconfig, --kube-api-qps, ...), so the client connection is set here."""
    return json.dumps({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": 200, "burst": 400},
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": name} for name in names]}, indent=2)


def leave_scheduler_name(state_dir: Path, name: str) -> None:
    """kube-scheduler stops serving the profile ``name`` (restarted with its new configuration):
    a scheduler of that name of its own runs now (TensorFusion's operator embeds one)."""
    state_dir = Path(state_dir).resolve()
    (state_dir / "scheduler.json").write_text(scheduler_config(
        state_dir / "kubeconfig", [n for n in SCHEDULER_NAMES if n != name]))
    restart_process(state_dir, "kube-scheduler")


def _spawn_supervised(name: str, argv: List[str], logs: Path) -> Dict:
    """A control-plane process that is started again when it exits on its own (lab.supervise), as
    a kubelet restarts a crashed static Pod; ``lab down`` stops it like any other."""
    return procs.spawn(name, [sys.executable, "-m", "lab.supervise", name, "--", *argv], logs,
                       env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)})


def _ready_nodes(state: Dict) -> int:
    _, body = _get(state, "/api/v1/nodes")
    count = 0
    for node in json.loads(body)["items"]:
        for cond in node.get("status", {}).get("conditions", []):
            if cond["type"] == "Ready" and cond["status"] == "True":
                count += 1
    return count


def down(state_dir: Path) -> None:
    """Stop exactly the processes this lab started (newest first), then remove its state folder,
    which must carry the lab's marker."""
    state_dir = Path(state_dir).resolve()
    if state_dir.exists() and not is_lab_folder(state_dir):
        raise LabError(f"{state_dir} is not a lab state folder (no {MARKER}): refusing to stop "
                       "anything or delete it")
    state = load_state(state_dir)
    failed: Optional[LabError] = None
    if state:
        try:  # the add-ons first (newest first); their processes are also in the list below
            addons_mod.stop_all(state)
        except LabError as exc:
            failed = exc
        for rec in reversed(state["processes"]):
            procs.stop(rec)
    if state_dir.exists():
        shutil.rmtree(state_dir)
    if failed:  # everything is stopped and removed all the same
        raise failed


def status(state_dir: Path) -> Dict:
    state = load_state(Path(state_dir).resolve())
    if not state:
        return {"running": False, "state_dir": str(state_dir)}
    procs_alive = {r["name"]: procs.alive(r) for r in state["processes"]}
    ready = False
    try:
        ready = _get(state, "/readyz")[0] == 200
    except (urllib.error.URLError, OSError):
        pass
    info = {"running": all(procs_alive.values()) and ready, "state_dir": state["state_dir"],
            "server": state["server"], "kubeconfig": state["kubeconfig"],
            "processes": procs_alive, "apiserver_ready": ready}
    if addons_mod.recorded(state):
        info["addons"] = addons_mod.health(state)
    return info


def restart_process(state_dir: Path, name: str, down_seconds: float = 0.0) -> Dict:
    """Stop one of the lab's processes and start it again with the same command line, as a
    crash-and-restart of that component would (tests use it on kube-apiserver); with
    ``down_seconds``, it stays stopped that long first (clients meanwhile see their connections
    refused: an outage, not just a restart)."""
    state_dir = Path(state_dir).resolve()
    state = load_state(state_dir)
    if not state:
        raise LabError(f"no lab in {state_dir}")
    for index, rec in enumerate(state["processes"]):
        if rec["name"] == name:
            procs.stop(rec)
            time.sleep(max(0.0, down_seconds))  # the outage itself: nothing is listening
            new = procs.spawn(name, rec["argv"], state_dir / "logs",
                              env={**os.environ, **rec.get("env_extra", {})})
            state["processes"][index] = new
            save_state(state)
            if name == "kube-apiserver":
                # Only the restarted API server counts here: a client that gave up during the
                # outage (the operator double does after about 50 s) is the caller's to restart.
                _wait_for("kube-apiserver /readyz", lambda: _get(state, "/readyz")[0] == 200,
                          state, time.monotonic() + 180, processes=[new])
            return new
    raise LabError(f"the lab has no process named {name}")


OUTAGE_COMPONENTS = ("kube-apiserver", "etcd", "kube-controller-manager")


def outage(state_dir: Path, seconds: float, component: str = "kube-apiserver") -> None:
    """An outage of ``seconds`` of kube-apiserver (or etcd, or kube-controller-manager): stopped,
    then started again with the same flags. After an API server outage the lab's add-ons are told
    (TensorFusion's operator double is restarted, as its Deployment would restart a crashed
    operator)."""
    if component not in OUTAGE_COMPONENTS:
        raise LabError(f"an outage is of {', '.join(OUTAGE_COMPONENTS)}, not {component}")
    restart_process(state_dir, component, down_seconds=seconds)
    if component == "kube-apiserver":
        addons_mod.api_server_restarted(load_state(Path(state_dir).resolve()))


def restart_api_server(state_dir: Path) -> None:
    """Restart kube-apiserver as a control-plane failover would, then tell the lab's add-ons
    (TensorFusion's operator double, kopf, gives up when the API server answers 404 for its CRDs
    while starting, so that add-on restarts it, as its Deployment would restart a crashed
    operator); the kubelet stand-in and the modules under test must survive on their own."""
    restart_process(state_dir, "kube-apiserver")
    addons_mod.api_server_restarted(load_state(Path(state_dir).resolve()))
