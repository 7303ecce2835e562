"""A kubelet stand-in: registers Nodes and keeps them alive, binds Pods, and plays their life cycle.

It is the lab's only fake part of the data plane; everything it writes goes through the real API
server, exactly as a kubelet's writes would. Knobs live in the ConfigMap
``kube-system/tfops-lab-kubelet`` so that tests can turn them at run time:

- ``readyDelaySeconds``: how long a Pod takes from bound to Running and Ready;
- ``neverReadyImages``: a regular expression; a container whose image matches never becomes Ready
  (its status shows ImagePullBackOff, as a failed image pull would);
- ``deadNodes``: comma-separated Node names that stop answering (no heartbeats, their Pods frozen).
"""
import argparse
import heapq
import itertools
import logging
import re
import threading
import time
from datetime import datetime, timezone

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

KNOBS_NAMESPACE = "kube-system"
KNOBS_NAME = "tfops-lab-kubelet"
GPU_LABELS = {"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true"}
LEASE_RENEW_SECONDS = 10
STATUS_REPORT_SECONDS = 60
RETRY_SECONDS = 2.0
DEFAULT_SCHEDULER = "default-scheduler"

log = logging.getLogger("kubelet")


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Knobs:
    def __init__(self, ready_delay: float):
        self.lock = threading.Lock()
        self.ready_delay = ready_delay
        self.never_ready = None
        self.dead_nodes = set()
        self.default_delay = ready_delay

    def update(self, data):
        data = data or {}
        with self.lock:
            self.ready_delay = float(data.get("readyDelaySeconds", self.default_delay))
            pattern = data.get("neverReadyImages") or ""
            self.never_ready = re.compile(pattern) if pattern else None
            self.dead_nodes = {n.strip() for n in (data.get("deadNodes") or "").split(",") if n.strip()}

    def image_fails(self, image: str) -> bool:
        with self.lock:
            return bool(self.never_ready and self.never_ready.search(image or ""))

    def is_dead(self, node: str) -> bool:
        with self.lock:
            return node in self.dead_nodes


class Timers:
    """One thread that runs delayed actions in time order."""

    def __init__(self):
        self.heap = []
        self.cond = threading.Condition()
        self.counter = itertools.count()

    def at(self, when: float, fn, *args):
        with self.cond:
            heapq.heappush(self.heap, (when, next(self.counter), fn, args))
            self.cond.notify()

    def run(self):
        while True:
            with self.cond:
                while not self.heap or self.heap[0][0] > time.monotonic():
                    self.cond.wait(None if not self.heap else self.heap[0][0] - time.monotonic())
                _, _, fn, args = heapq.heappop(self.heap)
            try:
                fn(*args)
            except Exception:  # a failed action must not end the stand-in
                log.exception("timer action failed")


class Kubelet:
    def __init__(self, gpu_nodes: int, cpu_nodes: int, ready_delay: float):
        self.core = client.CoreV1Api()
        self.coord = client.CoordinationV1Api()
        # A kubelet reports its own version; the lab's nodes report the API server's.
        self.version = client.VersionApi().get_code().git_version
        self.knobs = Knobs(ready_delay)
        self.timers = Timers()
        self.nodes = [f"tfops-gpu-{i}" for i in range(gpu_nodes)] + \
                     [f"tfops-cpu-{i}" for i in range(cpu_nodes)]
        self.node_ip = {n: f"127.1.{i // 250}.{i % 250 + 1}" for i, n in enumerate(self.nodes)}
        self.node_labels = {}
        self.rr = itertools.count()
        self.pending = {}  # uid -> (namespace, name): bound Pods not yet Ready
        self.pod_ip = itertools.count(1)
        self.lock = threading.Lock()

    # ---- nodes -----------------------------------------------------------------------------
    def register_nodes(self):
        for name in self.nodes:
            labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                      "kubernetes.io/arch": "amd64", "tfops.lab/stand-in": "true"}
            if name.startswith("tfops-gpu-"):
                labels.update(GPU_LABELS)
            self.node_labels[name] = labels
            body = {"metadata": {"name": name, "labels": labels}}
            try:
                self.core.create_node(body)
            except ApiException as exc:
                if exc.status != 409:
                    raise
            self.report_status(name)
            self.renew_lease(name)

    def report_status(self, name):
        capacity = {"cpu": "64", "memory": "256Gi", "pods": "250", "ephemeral-storage": "500Gi"}
        body = {"status": {
            "capacity": capacity, "allocatable": capacity,
            "addresses": [{"type": "InternalIP", "address": self.node_ip[name]},
                          {"type": "Hostname", "address": name}],
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "tfops lab kubelet stand-in is posting ready status",
                            "lastHeartbeatTime": now_iso(), "lastTransitionTime": now_iso()}],
            "nodeInfo": {"kubeletVersion": self.version, "kubeProxyVersion": self.version,
                         "containerRuntimeVersion": "tfops-lab://0", "operatingSystem": "linux",
                         "architecture": "amd64", "osImage": "tfops lab", "kernelVersion": "lab",
                         "machineID": name, "systemUUID": name, "bootID": name}}}
        self.core.patch_node_status(name, body)

    def renew_lease(self, name):
        body = {"metadata": {"name": name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": name, "leaseDurationSeconds": 40,
                         "renewTime": datetime.now(timezone.utc).strftime(
                             "%Y-%m-%dT%H:%M:%S.%fZ")}}
        try:
            self.coord.patch_namespaced_lease(name, "kube-node-lease", body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.coord.create_namespaced_lease("kube-node-lease", body)

    def heartbeat_loop(self):
        last_status = time.monotonic()
        while True:
            time.sleep(LEASE_RENEW_SECONDS)
            report = time.monotonic() - last_status >= STATUS_REPORT_SECONDS
            for name in self.nodes:
                if self.knobs.is_dead(name):
                    continue
                try:
                    self.renew_lease(name)
                    if report:
                        self.report_status(name)
                except Exception as exc:  # noqa: BLE001 - an API server restart must not end heartbeats
                    log.warning("heartbeat of %s failed: %s", name, exc)
            if report:
                last_status = time.monotonic()

    def on_node(self, event_type, node):
        """The node controller marked a node whose heartbeats it missed (the API server was away)
        not Ready: a live kubelet's next status sync (every 10 s) puts Ready back at once, not at
        its next periodic report."""
        name = node.metadata.name
        if event_type == "DELETED" or name not in self.node_ip or self.knobs.is_dead(name):
            return
        ready = [c for c in (node.status.conditions or []) if c.type == "Ready"] if node.status else []
        if ready and ready[0].status != "True":
            log.info("node %s is marked %s (%s); posting its status", name, ready[0].status,
                     ready[0].reason)
            self.report_status(name)

    # ---- pods ------------------------------------------------------------------------------
    def _affinity_allows(self, pod, node):
        """Required node affinity: DaemonSet Pods pin their node with a metadata.name field term."""
        affinity = pod.spec.affinity.node_affinity if pod.spec.affinity else None
        required = affinity.required_during_scheduling_ignored_during_execution if affinity else None
        if not required:
            return True
        for term in required.node_selector_terms or []:
            ok = True
            for expr in term.match_fields or []:
                if expr.key == "metadata.name":
                    ok &= (node in (expr.values or [])) == (expr.operator == "In")
            for expr in term.match_expressions or []:
                value = self.node_labels[node].get(expr.key)
                if expr.operator == "In":
                    ok &= value in (expr.values or [])
                elif expr.operator == "NotIn":
                    ok &= value not in (expr.values or [])
                elif expr.operator == "Exists":
                    ok &= value is not None
                elif expr.operator == "DoesNotExist":
                    ok &= value is None
            if ok:
                return True
        return False

    def pick_node(self, pod):
        selector = pod.spec.node_selector or {}
        candidates = [n for n in self.nodes if not self.knobs.is_dead(n)
                      and all(self.node_labels[n].get(k) == v for k, v in selector.items())
                      and self._affinity_allows(pod, n)]
        if not candidates:
            return None
        return candidates[next(self.rr) % len(candidates)]

    def bind(self, pod, node):
        body = client.V1Binding(metadata=client.V1ObjectMeta(name=pod.metadata.name),
                                target=client.V1ObjectReference(kind="Node", name=node))
        # The generated client cannot parse the Binding reply; the write itself is what counts.
        self.core.create_namespaced_pod_binding(pod.metadata.name, pod.metadata.namespace, body,
                                                _preload_content=False)

    def on_pod(self, event_type, pod):
        meta, spec = pod.metadata, pod.spec
        if event_type == "DELETED":
            with self.lock:
                self.pending.pop(meta.uid, None)
            return
        node = spec.node_name
        if meta.deletion_timestamp is not None:
            if node and self.knobs.is_dead(node):
                return  # a node that does not answer never confirms the deletion
            try:
                self.core.delete_namespaced_pod(meta.name, meta.namespace, grace_period_seconds=0,
                                                body=client.V1DeleteOptions(
                                                    grace_period_seconds=0,
                                                    preconditions=client.V1Preconditions(uid=meta.uid)))
            except ApiException as exc:
                if exc.status not in (404, 409):
                    raise
            return
        phase = pod.status.phase if pod.status else None
        if phase in ("Succeeded", "Failed"):
            return
        if not node:
            if (spec.scheduler_name or DEFAULT_SCHEDULER) == DEFAULT_SCHEDULER:
                return  # kube-scheduler binds it; the MODIFIED event of the binding brings it back
            # Another scheduler's Pod (TensorFusion's, which the lab does not run): bound here.
            node = self.pick_node(pod)
            if node is None:
                return
            try:
                self.bind(pod, node)
            except ApiException as exc:
                if exc.status not in (404, 409):
                    log.warning("bind %s/%s failed: %s", meta.namespace, meta.name, exc.reason)
            return  # the MODIFIED event of the binding brings it back here
        if self._is_ready(pod) or self.knobs.is_dead(node):
            return
        with self.lock:
            if meta.uid in self.pending:
                return
            self.pending[meta.uid] = (meta.namespace, meta.name)
        self.timers.at(time.monotonic() + self.knobs.ready_delay, self.start_pod,
                       meta.namespace, meta.name, meta.uid)

    def next_pod_ip(self):
        n = next(self.pod_ip) % (2 * 256 * 254)
        return f"198.{18 + n // (256 * 254)}.{(n // 254) % 256}.{n % 254 + 1}"

    @staticmethod
    def _is_ready(pod):
        for cond in (pod.status.conditions or []) if pod.status else []:
            if cond.type == "Ready" and cond.status == "True":
                return True
        return False

    def start_pod(self, namespace, name, uid):
        """Play the start of a bound Pod; a write that does not get through (the API server is
        away) is tried again, as a kubelet's status sync keeps trying: a Pod stays pending (and so
        ignored by later events) only while a retry is armed."""
        try:
            self._start_pod(namespace, name, uid)
        except Exception as exc:  # noqa: BLE001 - unreachable API server, 5xx, conflict
            if isinstance(exc, ApiException) and exc.status == 404:
                with self.lock:
                    self.pending.pop(uid, None)
                return
            log.warning("starting %s/%s failed (%s); trying again in %.0fs", namespace, name,
                        getattr(exc, "reason", None) or exc.__class__.__name__, RETRY_SECONDS)
            with self.lock:
                self.pending[uid] = (namespace, name)
            self.timers.at(time.monotonic() + RETRY_SECONDS, self.start_pod, namespace, name, uid)

    def _start_pod(self, namespace, name, uid):
        try:
            pod = self.core.read_namespaced_pod(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                with self.lock:
                    self.pending.pop(uid, None)
                return
            raise
        if pod.metadata.uid != uid or pod.metadata.deletion_timestamp is not None:
            with self.lock:
                self.pending.pop(uid, None)
            return
        node = pod.spec.node_name
        if self.knobs.is_dead(node):
            with self.lock:
                self.pending.pop(uid, None)  # picked up again when the node comes back
            return
        started = now_iso()
        is_job = any(o.kind == "Job" for o in (pod.metadata.owner_references or []))
        failing = [c for c in pod.spec.containers if self.knobs.image_fails(c.image)]
        statuses = []
        for c in pod.spec.containers:
            if c in failing:
                state = {"waiting": {"reason": "ImagePullBackOff",
                                     "message": f'Back-off pulling image "{c.image}"'}}
            elif is_job:
                state = {"terminated": {"exitCode": 0, "reason": "Completed",
                                        "startedAt": started, "finishedAt": started}}
            else:
                state = {"running": {"startedAt": started}}
            statuses.append({"name": c.name, "image": c.image, "imageID": f"lab://{c.image}",
                             "ready": c not in failing and not is_job, "restartCount": 0,
                             "started": c not in failing and not is_job, "state": state,
                             "containerID": f"lab://{uid}/{c.name}" if c not in failing else None})
        ready = not failing and not is_job
        phase = "Succeeded" if is_job and not failing else ("Pending" if failing else "Running")
        cond = lambda t, ok: {"type": t, "status": "True" if ok else "False",  # noqa: E731
                              "lastTransitionTime": started}
        body = {"status": {
            "phase": phase, "hostIP": self.node_ip[node],
            # The benchmarking range (198.18.0.0/15): valid for Endpoints, routed nowhere, and
            # nothing ever connects to it (there is no kube-proxy); loopback IPs are refused.
            "podIP": self.next_pod_ip(),
            "startTime": started, "containerStatuses": statuses,
            "conditions": [cond("Initialized", True), cond("PodScheduled", True),
                           cond("ContainersReady", ready), cond("Ready", ready)]}}
        self.core.patch_namespaced_pod_status(name, namespace, body)
        log.info("pod %s/%s on %s: %s", namespace, name, node, "Ready" if ready else phase)
        if failing:
            # Stays pending, so that a later change of the knob lets it start.
            self.timers.at(time.monotonic() + RETRY_SECONDS, self.start_pod, namespace, name, uid)
        else:
            with self.lock:
                self.pending.pop(uid, None)

    # ---- watches ---------------------------------------------------------------------------
    def watch_forever(self, list_fn, handler, **kwargs):
        """List, then watch from the list's resourceVersion; re-list when the watch expires."""
        while True:
            try:
                listing = list_fn(**kwargs)
                for item in listing.items:
                    handler("ADDED", item)
                rv = listing.metadata.resource_version
                while True:
                    w = watch.Watch()
                    for ev in w.stream(list_fn, resource_version=rv, timeout_seconds=300,
                                       allow_watch_bookmarks=True, **kwargs):
                        # A bookmark's object stays a dict (the client does not deserialize it).
                        rv = ev["raw_object"]["metadata"]["resourceVersion"]
                        if ev["type"] != "BOOKMARK":
                            handler(ev["type"], ev["object"])
            except ApiException as exc:
                if exc.status != 410:
                    log.warning("watch failed: %s; re-listing", exc.reason)
                    time.sleep(1)
            except Exception:
                log.exception("watch loop error; re-listing")
                time.sleep(1)

    def on_knobs(self, event_type, cm):
        if cm.metadata.name != KNOBS_NAME:
            return
        was_dead = set(self.knobs.dead_nodes)
        self.knobs.update(None if event_type == "DELETED" else cm.data)
        for name in was_dead - self.knobs.dead_nodes:
            # A kubelet that comes back posts its status at once, as a restarted kubelet does.
            self.report_status(name)
            self.renew_lease(name)
        log.info("knobs now: delay=%s neverReady=%s dead=%s", self.knobs.ready_delay,
                 self.knobs.never_ready and self.knobs.never_ready.pattern, self.knobs.dead_nodes)
        # Re-evaluate Pods on nodes that came back.
        threading.Thread(target=self.resync_pods, daemon=True).start()

    def resync_pods(self):
        for pod in self.core.list_pod_for_all_namespaces().items:
            self.on_pod("MODIFIED", pod)

    def run(self):
        self.register_nodes()
        threads = [
            threading.Thread(target=self.timers.run, daemon=True),
            threading.Thread(target=self.heartbeat_loop, daemon=True),
            threading.Thread(target=self.watch_forever, daemon=True,
                             args=(client.CoreV1Api().list_namespaced_config_map, self.on_knobs),
                             kwargs={"namespace": KNOBS_NAMESPACE}),
            threading.Thread(target=self.watch_forever, daemon=True,
                             args=(client.CoreV1Api().list_pod_for_all_namespaces, self.on_pod)),
            threading.Thread(target=self.watch_forever, daemon=True,
                             args=(client.CoreV1Api().list_node, self.on_node),
                             kwargs={"label_selector": "tfops.lab/stand-in=true"}),
        ]
        for t in threads:
            t.start()
        while True:
            time.sleep(3600)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--gpu-nodes", type=int, default=3)
    parser.add_argument("--cpu-nodes", type=int, default=1)
    parser.add_argument("--ready-delay", type=float, default=0.5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    config.load_kube_config(args.kubeconfig)
    cfg = client.Configuration.get_default_copy()
    cfg.connection_pool_maxsize = 16
    client.Configuration.set_default(cfg)
    Kubelet(args.gpu_nodes, args.cpu_nodes, args.ready_delay).run()


if __name__ == "__main__":
    main()
