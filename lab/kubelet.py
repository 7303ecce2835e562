"""The lab's kubelet stand-in: kwok (sigs.k8s.io/kwok, built by lab/install.py) plays the life of
the Nodes and their Pods; this process registers the Nodes, runs kwok with the lab's Stages
(lab/kwok_stages.py) and turns the knobs of the ConfigMap ``kube-system/tfops-lab-kubelet`` into
them. kube-scheduler binds every Pod (its second profile is TensorFusion's scheduler).

Everything kwok and this process write goes through the real API server, as a kubelet's writes
would. The knobs (lab/kwok_stages.py says what each does):

- ``readyDelaySeconds`` and ``neverReadyImages`` change the Stages: kwok is restarted with the new
  ones (it looks at a Pod again only when the Pod changes; a restart re-lists every Pod);
- ``deadNodes`` labels those Nodes and their Leases (``tfops.lab/dead``): kwok stops managing the
  Node (its Pods stay as they are) and stops renewing its Lease, so kube-controller-manager's
  node-lifecycle controller marks it; without the label again it posts its status at once.

The main thread registers the Nodes, then runs kwok (lab/kwok_process.py: restarted when the
Stages change, when the API server is back after an outage, and when it dies); a second thread
watches the ConfigMap. kwok dies with this process, so that ``lab down`` stopping this one (the
process the lab records) stops both.
"""
import argparse
import logging
import os
import signal
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Dict, List, Optional

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from . import kwok_stages as ks
from . import paths
from .kwok_process import Kwok, Supervisor
from .kwok_stages import KNOBS_NAME, KNOBS_NAMESPACE  # noqa: F401 - where the bench finds them

GPU_LABELS = {"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true"}
CAPACITY = {"cpu": "64", "memory": "256Gi", "pods": "250", "ephemeral-storage": "500Gi"}

log = logging.getLogger("kubelet")


def node_names(gpu_nodes: int, cpu_nodes: int) -> List[str]:
    return [f"tfops-gpu-{i}" for i in range(gpu_nodes)] + [f"tfops-cpu-{i}" for i in range(cpu_nodes)]


def node_ip(index: int) -> str:
    """Each node's own loopback address, 127.1.0.1 on (250 to a /24)."""
    return f"127.1.{index // 250}.{index % 250 + 1}"


def node_body(name: str, index: int, version: str) -> Dict:
    """The Node as a kubelet registers it: labels and its static status (the Ready condition is
    kwok's to post)."""
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64", ks.STAND_IN_LABEL: "true"}
    if name.startswith("tfops-gpu-"):
        labels.update(GPU_LABELS)
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {
                "capacity": CAPACITY, "allocatable": CAPACITY,
                "addresses": [{"type": "InternalIP", "address": node_ip(index)},
                              {"type": "Hostname", "address": name}],
                # A kubelet reports its own version; the lab's nodes report the API server's.
                "nodeInfo": {"kubeletVersion": version, "kubeProxyVersion": version,
                             "containerRuntimeVersion": "kwok://" + paths.KWOK_VERSION,
                             "operatingSystem": "linux", "architecture": "amd64",
                             "osImage": "tfops lab", "kernelVersion": "lab", "machineID": name,
                             "systemUUID": name, "bootID": name}}}


def lease_body(name: str, node_uid: str, now: datetime) -> Dict:
    """The node's Lease as its kubelet creates it (held in the node's name, owned by the Node);
    the stand-in label lets kwok's lease Stage tell it from other Leases."""
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": ks.LEASE_NAMESPACE,
                         "labels": {ks.STAND_IN_LABEL: "true"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": node_uid}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": ks.LEASE_SECONDS,
                     "renewTime": now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}


def dead_label_patch(dead: bool) -> Dict:
    return {"metadata": {"labels": {ks.DEAD_LABEL: "true" if dead else None}}}


class StandIn:
    def __init__(self, args):
        self.core = client.CoreV1Api()
        self.coord = client.CoordinationV1Api()
        self.nodes = node_names(args.gpu_nodes, args.cpu_nodes)
        self.default_delay = args.ready_delay
        self.supervisor = Supervisor(Kwok(Path(args.kwok), Path(args.kubeconfig),
                                          Path(args.stages), Path(args.kwok_log)))
        self.knobs: Optional[ks.Knobs] = None
        self.problems: List[str] = []

    # ---- nodes -------------------------------------------------------------------------------
    def register_nodes(self) -> None:
        version = client.VersionApi().get_code().git_version
        for index, name in enumerate(self.nodes):
            try:
                node = self.core.create_node(node_body(name, index, version))
            except ApiException as exc:
                if exc.status != 409:
                    raise
                node = self.core.read_node(name)
            try:
                self.coord.create_namespaced_lease(
                    ks.LEASE_NAMESPACE, lease_body(name, node.metadata.uid, datetime.now(timezone.utc)))
            except ApiException as exc:
                if exc.status != 409:
                    raise

    def mark_dead(self, dead: frozenset) -> None:
        """Label exactly the nodes of ``dead`` (and their Leases) dead. A node that dies stops
        its Lease first; one that comes back is managed by kwok first, so that it posts its
        status before its Lease is due again."""
        for node in self.core.list_node(label_selector=f"{ks.STAND_IN_LABEL}=true").items:
            name = node.metadata.name
            want = name in dead
            if ((node.metadata.labels or {}).get(ks.DEAD_LABEL) == "true") == want:
                continue
            writes = [lambda: self.coord.patch_namespaced_lease(name, ks.LEASE_NAMESPACE,
                                                                dead_label_patch(want)),
                      lambda: self.core.patch_node(name, dead_label_patch(want))]
            for write in writes if want else reversed(writes):
                try:
                    write()
                except ApiException as exc:
                    if exc.status != 404:
                        raise
            log.info("node %s is %s", name, "dead" if want else "back")
        unknown = dead - set(self.nodes)
        if unknown:
            log.warning("deadNodes names nodes the lab does not have: %s", ", ".join(sorted(unknown)))

    # ---- knobs -------------------------------------------------------------------------------
    def on_knobs(self, cm) -> None:
        knobs, problems = ks.parse_knobs(cm.data if cm is not None else None, self.default_delay)
        if problems != self.problems:  # said once, not at every re-list
            for problem in problems:
                log.error("ConfigMap %s/%s: %s", KNOBS_NAMESPACE, KNOBS_NAME, problem)
                self.warn(cm, problem)
            self.problems = problems
        if knobs == self.knobs:
            return
        log.info("knobs: readyDelaySeconds=%s neverReadyImages=%r deadNodes=%s", knobs.ready_delay,
                 knobs.never_ready, ",".join(sorted(knobs.dead_nodes)) or "-")
        self.mark_dead(knobs.dead_nodes)
        self.knobs = knobs
        self.supervisor.wanted.put(ks.render(knobs))

    def warn(self, cm, message: str) -> None:
        """An Event on the ConfigMap, so that ``kubectl describe`` shows why a knob is ignored."""
        if cm is None:
            return
        now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            self.core.create_namespaced_event(KNOBS_NAMESPACE, {
                "metadata": {"generateName": KNOBS_NAME + "."},
                "involvedObject": {"kind": "ConfigMap", "namespace": KNOBS_NAMESPACE,
                                   "name": KNOBS_NAME, "uid": cm.metadata.uid},
                "type": "Warning", "reason": "InvalidKnob", "message": message,
                "source": {"component": "tfops-lab-kubelet"}, "firstTimestamp": now,
                "lastTimestamp": now, "count": 1})
        except ApiException as exc:
            log.warning("could not record the knob problem as an Event: %s", exc.reason)

    def read_knobs(self) -> None:
        try:
            cm = self.core.read_namespaced_config_map(KNOBS_NAME, KNOBS_NAMESPACE)
        except ApiException as exc:
            if exc.status != 404:
                raise
            cm = None
        self.on_knobs(cm)

    def watch_knobs(self) -> None:
        """List, then watch from the list's resourceVersion; list again when the watch ends in
        an error (an expired resourceVersion, the API server away)."""
        away = False
        while True:
            try:
                listing = self.core.list_namespaced_config_map(
                    KNOBS_NAMESPACE, field_selector=f"metadata.name={KNOBS_NAME}")
                if away:
                    log.info("the API server answers again")
                    self.supervisor.api_back.set()
                    away = False
                self.on_knobs(listing.items[0] if listing.items else None)
                rv = listing.metadata.resource_version
                while True:
                    for ev in watch.Watch().stream(
                            self.core.list_namespaced_config_map, KNOBS_NAMESPACE,
                            field_selector=f"metadata.name={KNOBS_NAME}", resource_version=rv,
                            timeout_seconds=300, allow_watch_bookmarks=True):
                        # A bookmark's object stays a dict (the client does not deserialize it).
                        rv = ev["raw_object"]["metadata"]["resourceVersion"]
                        if ev["type"] in ("ADDED", "MODIFIED", "DELETED"):
                            self.on_knobs(None if ev["type"] == "DELETED" else ev["object"])
            except ApiException as exc:
                if exc.status != 410:
                    log.warning("watching the knobs failed (%s); listing again", exc.reason)
                    away = away or exc.status >= 500
                    time.sleep(1)
            except Exception as exc:  # noqa: BLE001 - an API server restart must not end the watch
                if not away:
                    log.warning("the API server is away (%s); listing again every second",
                                exc.__class__.__name__)
                away = True
                time.sleep(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--gpu-nodes", type=int, default=3)
    parser.add_argument("--cpu-nodes", type=int, default=1)
    parser.add_argument("--ready-delay", type=float, default=ks.DEFAULT_READY_DELAY)
    parser.add_argument("--kwok", required=True, help="the kwok binary")
    parser.add_argument("--stages", required=True, help="kwok's configuration file (written here)")
    parser.add_argument("--kwok-log", required=True, help="where kwok's output goes")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # its retries while the API server is away
    config.load_kube_config(args.kubeconfig)
    stop = threading.Event()

    def on_term(signum, _frame):
        stop.set()
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    stand_in = StandIn(args)
    stand_in.register_nodes()
    stand_in.read_knobs()
    threading.Thread(target=stand_in.watch_knobs, daemon=True).start()
    rc = stand_in.supervisor.run(stop)  # kwok has stopped
    # Nothing is left to clean up: skip the interpreter's teardown of the API client's
    # connections, which takes seconds (and so would every ``lab down``).
    logging.shutdown()
    os._exit(rc)


if __name__ == "__main__":
    main()
