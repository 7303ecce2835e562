"""A lab of its own for the TensorFusion tests (3 GPU nodes, 1 CPU node, chart 1.8.6 installed),
so that the chart upgrades and fault knobs used here never leak into other tests. Its release
(and so the operator and its hypervisor Pods) lives in a namespace other than the default
``tensor-fusion-sys``, so that nothing here passes only because of that name."""
import os
import time
from pathlib import Path

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from lab import cluster
from lab import tensorfusion as tf

G, V = "tensor-fusion.ai", "v1"
NS = "gpu-operators"
POOL = "tensor-fusion-shared"
TFC = "tensor-fusion"


@pytest.fixture(scope="package")
def tf_lab(tmp_path_factory):
    state_dir = Path(tmp_path_factory.mktemp("tf-lab-state", numbered=True))
    started = time.monotonic()
    state = cluster.up(state_dir, nodes=3, cpu_nodes=1)
    up_done = time.monotonic()
    try:
        tf.start(state, namespace=NS)
        state["timings"] = {"cluster_up": up_done - started, "tf_start": time.monotonic() - up_done}
        yield state
    finally:
        if not os.environ.get("TFOPS_KEEP_TF_LAB"):
            cluster.down(state_dir)


class TF:
    """Small helpers over the real API for the tests (reads, patches, watch-based waits)."""

    def __init__(self, state):
        self.state = state
        cfg = client.Configuration()
        config.load_kube_config(state["kubeconfig"], client_configuration=cfg)
        self.api = client.ApiClient(cfg)
        self.co = client.CustomObjectsApi(self.api)
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)

    # reads
    def get(self, plural, name, ns=None):
        if ns:
            return self.co.get_namespaced_custom_object(G, V, ns, plural, name)
        return self.co.get_cluster_custom_object(G, V, plural, name)

    def pool(self, name=POOL):
        return self.get("gpupools", name)

    def tfc(self):
        return self.get("tensorfusionclusters", TFC)

    def template(self):
        """gpuPools[0].specTemplate of the TensorFusionCluster (the pool the tests roll)."""
        return self.tfc()["spec"]["gpuPools"][0]["specTemplate"]

    def cs(self, name=POOL):
        return (self.pool(name).get("status") or {}).get("componentStatus") or {}

    def hv_pods(self):
        pods = self.core.list_namespaced_pod(
            NS, label_selector="tensor-fusion.ai/component=hypervisor").items
        return {p.metadata.name: p for p in pods}

    def gpunodes(self):
        return {n["metadata"]["name"]: n for n in
                self.co.list_cluster_custom_object(G, V, "gpunodes")["items"]}

    # writes
    def patch_tfc(self, patch):
        return self.co.patch_cluster_custom_object(G, V, "tensorfusionclusters", TFC, patch)

    def pool_patch(self, template_patch):
        """JSON merge patch of gpuPools[0].specTemplate (the list is replaced as a whole)."""
        tfc = self.tfc()
        pools = tfc["spec"]["gpuPools"]

        def merge(a, b):
            for k, v in b.items():
                if isinstance(v, dict) and isinstance(a.get(k), dict):
                    merge(a[k], v)
                elif v is None:
                    a.pop(k, None)
                else:
                    a[k] = v
        merge(pools[0]["specTemplate"], template_patch)
        return self.patch_tfc({"spec": {"gpuPools": pools}})

    def policy(self, **fields):
        return self.pool_patch({"nodeManagerConfig": {"nodePoolRollingUpdatePolicy": fields}})

    def hv_image(self, image):
        return self.pool_patch({"componentConfig": {"hypervisor": {"image": image}}})

    def knobs(self, **knobs):
        tf.set_knobs(self.api, namespace=NS, **knobs)

    def kubelet_knobs(self, **data):
        body = {"data": {k: (None if v is None else str(v)) for k, v in data.items()}}
        try:
            self.core.patch_namespaced_config_map("tfops-lab-kubelet", "kube-system", body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            self.core.create_namespaced_config_map("kube-system", {
                "metadata": {"name": "tfops-lab-kubelet"},
                "data": {k: v for k, v in body["data"].items() if v is not None}})

    # waits
    def wait_pool(self, pred, timeout=60.0, name=POOL, record=None):
        """Watch the pool until ``pred(pool)``; ``record`` (a list) gets every state seen."""
        deadline = time.monotonic() + timeout

        def exists():
            try:
                return self.pool(name)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                return None
        obj = self.until(exists, timeout, what=f"pool {name}")
        while True:
            if record is not None:
                record.append(obj)
            if pred(obj):
                return obj
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"pool {name} condition not met in {timeout}s; last: "
                                     f"{obj.get('status', {}).get('componentStatus')} "
                                     f"{obj['metadata'].get('annotations')}")
            w = watch.Watch()
            for ev in w.stream(self.co.list_cluster_custom_object, G, V, "gpupools",
                               field_selector=f"metadata.name={name}",
                               resource_version=obj["metadata"]["resourceVersion"],
                               timeout_seconds=max(1, int(left))):
                obj = ev["object"]
                if record is not None:
                    record.append(obj)
                if pred(obj):
                    w.stop()
                    return obj
            obj = self.pool(name)

    def wait_synced(self, component="hypervisor", timeout=90.0, record=None, differs_from=None):
        def done(p):
            cs = (p.get("status") or {}).get("componentStatus") or {}
            return cs.get(f"{component}ConfigSynced") is True and \
                cs.get(f"{component}UpdateProgress") == 100 and \
                (differs_from is None or cs.get(component) != differs_from)
        return self.wait_pool(done, timeout, record=record)

    @staticmethod
    def until(fn, timeout=30.0, interval=0.25, what="condition"):
        deadline = time.monotonic() + timeout
        while True:
            value = fn()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} not reached in {timeout}s")
            time.sleep(interval)


@pytest.fixture(scope="package")
def tfx(tf_lab):
    helper = TF(tf_lab)
    yield helper
    helper.api.close()


@pytest.fixture
def fast_gaps(tfx):
    """Lowers the double's batch-gap floor from 3 s to 1 s (knob batchGapFloorSeconds) for tests
    that only need the order of batches, not upstream's pacing; restored afterwards."""
    tfx.knobs(batchGapFloorSeconds="1")
    yield
    tfx.knobs(batchGapFloorSeconds=None)
