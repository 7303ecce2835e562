"""The TensorFusion operator test double: ``python -m lab.tensorfusion.operator --kubeconfig K``.

kopf does the list+watch of every kind the double needs and feeds a cache (store.py); worker
threads run the reconcilers (controllers.py) from a delayed work queue, as controller-runtime does.
As controller-runtime waits for its informers' caches to sync, the double reconciles nothing until
every kind's first listing is in its cache (kopf's indexing, which holds every handler back until
each kind is listed, fills it): a pool reconciled with half of its GPUNodes listed would count the
rest as absent and call its campaign done.
It lives in one namespace, the release's (``--namespace``, else env ``OPERATOR_NAMESPACE``, else
``tensor-fusion-sys``), as upstream: its hypervisor Pods go there. It acts only while a Pod of the
chart's controller Deployment (label ``tensor-fusion.ai/component=operator`` in that namespace)
is Ready, and takes that Pod's ``controller`` image tag as its own version (part of the
hypervisor hash) and its ``TF_ISOLATION_MODE_POLICY`` as its isolation policy.

Fault knobs: ConfigMap ``<namespace>/tfops-lab-operator``, read live (see ``Knobs``).
"""
import argparse
import copy
import logging
import os
import re
import threading
import time

import kopf
from kubernetes import client, config

from . import KNOBS as KNOBS_NAME, KNOBS_APPLIED, knobs_digest
from . import controllers as c
from .kube import Api, key_of
from .store import Store, WorkQueue

log = logging.getLogger("tf-operator")


class Knobs:
    """``batchGapFloorSeconds`` (default 3): floor of the gap between batches;
    ``pendingRecheckSeconds`` (default 3): recheck period while a node is Pending;
    ``staleStatusSeconds`` (default 0): after a component hash changes, keep reporting the old
    componentStatus (hash, synced, progress) this long; ``slowNodes``: ``node=seconds,...`` (``*``
    for every node): wait that long before (re)creating that node's hypervisor Pod;
    ``staleClusterStatus`` (``true``): a cluster write that changes its pools but starts no
    rollout leaves the TensorFusionCluster Updating, as upstream does (controllers.py,
    ``_requeue_dropped``); ``failGpuImages``: a regular expression; the GPUs of a node whose Ready hypervisor Pod runs a
    matching image go ``Unknown`` (the node stays Running, so the rollout goes on)."""

    def __init__(self):
        self.update({})

    def update(self, data):
        data = data or {}

        def num(key, default):
            try:
                return max(0.0, float(data.get(key, default)))
            except (TypeError, ValueError):
                return default
        self.gap_floor = num("batchGapFloorSeconds", 3.0)
        self.pending_recheck = num("pendingRecheckSeconds", 3.0)
        self.stale_status_seconds = num("staleStatusSeconds", 0.0)
        self.stale_cluster_status = str(data.get("staleClusterStatus", "")).lower() in ("1", "true", "yes")
        slow = {}
        for item in (data.get("slowNodes") or "").split(","):
            name, _, secs = item.partition("=")
            try:
                slow[name.strip()] = float(secs)
            except ValueError:
                continue
        self.slow = slow
        try:
            self.fail_gpu_images = re.compile(data["failGpuImages"]) if data.get(
                "failGpuImages") else None
        except re.error:
            log.warning("knob failGpuImages: %r is not a regular expression", data["failGpuImages"])
            self.fail_gpu_images = None

    def fails_gpus(self, image: str) -> bool:
        return bool(self.fail_gpu_images and image and self.fail_gpu_images.search(image))

    def slow_node_delay(self, node: str) -> float:
        return self.slow.get(node, self.slow.get("*", 0.0))


def containers_running(pod) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return bool(statuses) and all("running" in (s.get("state") or {}) for s in statuses)


def controller_identity(pods, namespace):
    """(active, operator version, isolation policy) from the controller Deployment's Pods.

    The newest Ready Pod speaks for the operator; without one, the newest Pod whose containers
    still run does: the node controller clears a Pod's Ready condition when its node misses
    heartbeats (an API server outage longer than the lease), yet the operator process goes on, as
    upstream's does. Flipping to "no version" there would change every hypervisor hash and start
    a bogus campaign mid-rollout. Only a stopped or deleted Pod pauses the double."""
    mine = [p for p in pods if c.labels(p).get(c.L_COMPONENT) == "operator"
            and c.meta(p).get("namespace") == namespace and not c.deleting(p)]
    speaking = [p for p in mine if c.pod_ready(p)] or [p for p in mine if containers_running(p)]
    if not speaking:
        return False, "", "static"
    newest = max(speaking, key=lambda p: c.meta(p).get("creationTimestamp") or "")
    version, policy = "", "static"
    for ctr in (newest.get("spec") or {}).get("containers") or []:
        if ctr.get("name") == "controller":
            image = ctr.get("image") or ""
            version = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else image
            env = {e.get("name"): e.get("value") for e in ctr.get("env") or []}
            policy = (env.get("TF_ISOLATION_MODE_POLICY") or "static").lower()
    return True, version, policy


class Operator:
    def __init__(self, workers: int, gpus_per_node: int, namespace: str = c.DEFAULT_NAMESPACE):
        self.store = Store()
        self.queue = WorkQueue()
        self.knobs = Knobs()
        self.api = Api(self.store, keep=self.cache)
        self.ns = namespace
        self.ctl = c.Controllers(self.store, self.api, self.queue, self.knobs, gpus_per_node,
                                 namespace)
        self.active = False
        self.listed = False  # every kind's first listing is in the store (see prime)
        self.workers = workers
        self.handlers = {"tfc": self.ctl.reconcile_tfc, "pool": self.ctl.reconcile_pool,
                         "gpunode": self.ctl.reconcile_gpunode, "node": self.ctl.reconcile_node,
                         "pc": self.ctl.reconcile_pc, "workload": self.ctl.reconcile_workload,
                         "tfpod": self.ctl.reconcile_tfpod, "knobs": self.acknowledge_knobs}
        self.knobs_data = None  # the data last applied (None: no ConfigMap)

    # ---------------------------------------------------------------- events -> cache + queue
    def prime(self, kind, obj):
        """kopf's indexing of a listed object, before any event handler runs: into the store
        (knobs applied), nothing queued. The first event handler call ends the priming; the
        activation that follows queues everything the store holds."""
        if self.listed or not obj.get("metadata"):
            return
        if kind == "configmap":
            if obj["metadata"].get("name") == KNOBS_NAME and obj["metadata"].get("namespace") == self.ns:
                self.apply_knobs(obj)
            return
        if kind == "pod" and not self._interesting_pod(obj):
            return
        self.store.put(kind, key_of(obj), obj)

    def on_event(self, kind, event):
        obj = event.get("object") or {}
        if not obj.get("metadata"):
            return
        if not self.listed:
            self.listed = True
            log.info("caches synced: every kind listed")
        if kind == "pod" and not self._interesting_pod(obj):
            return
        if kind == "configmap":
            if obj["metadata"].get("name") == KNOBS_NAME and \
                    obj["metadata"].get("namespace") == self.ns:
                self.apply_knobs(None if event.get("type") == "DELETED" else obj)
                for name, _ in self.store.items("pool"):
                    self.queue.add(("pool", name))
            return
        key = key_of(obj)
        if event.get("type") == "DELETED":
            old = self.store.get(kind, key) or obj
            self.store.remove(kind, key, obj)
            self._enqueue_for(kind, key, obj, old)
        else:
            self.cache(kind, key, obj)

    def apply_knobs(self, obj):
        """The knobs of the ConfigMap ``obj`` (None: deleted) from now on; its acknowledgment is
        queued unless it already names this data."""
        data = dict(obj.get("data") or {}) if obj else None
        if data != self.knobs_data:
            self.knobs.update(data)
            log.info("knobs: %s", vars(self.knobs))
        self.knobs_data = data
        if obj and (c.meta(obj).get("annotations") or {}).get(KNOBS_APPLIED) != knobs_digest(data):
            self.queue.add(("knobs", KNOBS_NAME))

    def acknowledge_knobs(self, _name):
        """KNOBS_APPLIED names the data applied; if the ConfigMap changed meanwhile, its own event
        queues the next acknowledgment."""
        if self.knobs_data is None:
            return None
        try:
            self.api.core.patch_namespaced_config_map(KNOBS_NAME, self.ns, {"metadata": {
                "annotations": {KNOBS_APPLIED: knobs_digest(self.knobs_data)}}}, _request_timeout=30)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
        return None

    def cache(self, kind, key, obj):
        """An object reaches the cache, from a watch event or as the response of our own write
        (write-through). Either way it is an event: a response may carry someone else's newer
        write (a user's spec edit under our status patch), whose own watch event then looks older
        than the cache and is dropped; the generation-filtered TensorFusionCluster would never be
        reconciled for it otherwise."""
        old = self.store.put(kind, key, obj)
        if old is not None:  # else older than what we already hold
            self._enqueue_for(kind, key, obj, old)

    def _interesting_pod(self, pod):
        lab = c.labels(pod)
        if lab.get("tensor-fusion.ai/enabled") == "true":
            return True
        return pod["metadata"].get("namespace") == self.ns and \
            lab.get(c.L_COMPONENT) in ("hypervisor", "operator")

    def _enqueue_for(self, kind, key, obj, old):
        q = self.queue.add
        lab = c.labels(obj)
        if kind == "tfc":
            # GenerationChangedPredicate: label/annotation/status edits do not trigger it.
            if c.meta(obj).get("generation") != c.meta(old).get("generation") or not old:
                q(("tfc", key))
        elif kind == "pool":
            q(("pool", key))
            for ref in c.meta(obj).get("ownerReferences") or []:
                if ref.get("kind") == "TensorFusionCluster":
                    q(("tfc", ref["name"]))
            if not old or c.meta(obj).get("generation") != c.meta(old).get("generation"):
                for name, _ in self.store.items("node"):
                    q(("node", name))
        elif kind == "gpunode":
            q(("gpunode", key))
            if lab.get(c.L_OWNER):
                q(("pool", lab[c.L_OWNER]))
        elif kind == "gpu":
            if lab.get(c.L_OWNER):
                q(("gpunode", lab[c.L_OWNER]))
        elif kind == "node":
            if not old or c.labels(old) != lab or c.node_ready(old) != c.node_ready(obj):
                q(("node", key))
                q(("gpunode", key))
        elif kind == "pc":
            q(("pc", key))
        elif kind == "workload":
            q(("workload", key))
            if lab.get(c.L_POOL):
                q(("pool", lab[c.L_POOL]))
        elif kind == "pod":
            comp = lab.get(c.L_COMPONENT)
            if obj["metadata"].get("namespace") == self.ns and comp == "operator":
                self.refresh_activity()
            elif obj["metadata"].get("namespace") == self.ns and comp == "hypervisor":
                for ref in c.meta(obj).get("ownerReferences") or []:
                    if ref.get("kind") == "GPUNode":
                        q(("gpunode", ref["name"]))
                for k, v in lab.items():
                    if k.startswith("tensor-fusion.ai/pool-") and v == "true":
                        q(("pool", k[len("tensor-fusion.ai/pool-"):]))
            if lab.get("tensor-fusion.ai/enabled") == "true":
                if lab.get(c.L_POOL):
                    q(("pool", lab[c.L_POOL]))
                q(("tfpod", key))

    # ---------------------------------------------------------------- activity
    def refresh_activity(self):
        active, version, policy = controller_identity(self.store.values("pod"), self.ns)
        if not active:  # nothing runs: keep the last version and policy for when it comes back
            version, policy = self.ctl.operator_version, self.ctl.isolation_policy
        if (active, version, policy) != (self.active, self.ctl.operator_version,
                                         self.ctl.isolation_policy):
            log.info("controller Deployment %s; operator version %r, isolation policy %s",
                     "has a running Pod: acting" if active else "has no running Pod: paused",
                     version, policy)
            self.ctl.operator_version = version
            self.ctl.isolation_policy = policy
            self.active = active
            if active:
                for kind in ("tfc", "pool", "node", "gpunode", "pc", "workload"):
                    for key, _ in self.store.items(kind):
                        self.queue.add((kind, key))

    # ---------------------------------------------------------------- workers
    def work(self):
        while True:
            key = self.queue.get()
            try:
                if key[0] != "knobs" and (not self.active or not self.listed):
                    continue  # dropped; everything is enqueued again on activation
                again = self.handlers[key[0]](key[1])
                if again is not None:
                    self.queue.add(key, again)
            except Exception:  # a failing reconcile is retried, as controller-runtime does
                log.exception("reconcile %s failed", key)
                self.queue.add(key, 2.0)
            finally:
                self.queue.done(key)

    def start_workers(self):
        for i in range(self.workers):
            threading.Thread(target=self.work, name=f"worker-{i}", daemon=True).start()


OP: Operator = None  # set by main() before kopf runs

WATCHED = [("tfc", "tensor-fusion.ai", "v1", "tensorfusionclusters"),
           ("pool", "tensor-fusion.ai", "v1", "gpupools"),
           ("gpunode", "tensor-fusion.ai", "v1", "gpunodes"),
           ("gpu", "tensor-fusion.ai", "v1", "gpus"),
           ("pc", "tensor-fusion.ai", "v1", "providerconfigs"),
           ("workload", "tensor-fusion.ai", "v1", "tensorfusionworkloads"),
           ("node", "", "v1", "nodes"), ("pod", "", "v1", "pods"),
           ("configmap", "", "v1", "configmaps")]


def _register():
    for kind, group, version, plural in WATCHED:
        async def handler(event, _kind=kind, **_):
            OP.on_event(_kind, event)
        kopf.on.event(group, version, plural, id=f"cache-{kind}")(handler)

        def prime(body, _kind=kind, **_):
            OP.prime(_kind, copy.deepcopy(dict(body)))
        kopf.index(group, version, plural, id=f"list-{kind}")(prime)

    @kopf.on.startup()
    def configure(settings: kopf.OperatorSettings, **_):
        settings.posting.enabled = False       # upstream emits no Events for rollout steps
        settings.watching.server_timeout = 240
        settings.watching.client_timeout = 300

    @kopf.on.login()
    def login(**_):
        # The same credentials as the worker threads' client (a token in the lab's kubeconfig).
        cfg = client.Configuration.get_default_copy()
        keys = cfg.api_key or {}
        token = keys.get("BearerToken") or keys.get("authorization") or ""
        return kopf.ConnectionInfo(server=cfg.host, ca_path=cfg.ssl_ca_cert,
                                   scheme="Bearer" if token else None,
                                   token=token.split(" ", 1)[-1] if token else None,
                                   certificate_path=cfg.cert_file, private_key_path=cfg.key_file)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--gpus-per-node", type=int, default=1)
    parser.add_argument("--namespace", default=os.environ.get("OPERATOR_NAMESPACE") or
                        c.DEFAULT_NAMESPACE, help="the operator's (the release's) namespace")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    logging.getLogger("kopf").setLevel(logging.WARNING)
    logging.getLogger("aiohttp").setLevel(logging.WARNING)
    os.environ["KUBECONFIG"] = args.kubeconfig
    config.load_kube_config(args.kubeconfig)
    cfg = client.Configuration.get_default_copy()
    cfg.connection_pool_maxsize = args.workers * 2
    client.Configuration.set_default(cfg)
    global OP
    OP = Operator(args.workers, args.gpus_per_node, args.namespace)
    OP.start_workers()
    _register()
    started = time.monotonic()
    log.info("operator double starting")
    kopf.run(clusterwide=True, standalone=True)
    log.info("operator double stopped after %.0fs", time.monotonic() - started)


if __name__ == "__main__":
    main()
