"""Wait (watching, with a deadline) until the session lab's TensorFusion is back to a steady,
healthy state: tests that judge health must not see the aftermath of a test before them."""
import contextlib
import json

from kubernetes import client

from lab.tensorfusion import hashes
from lab.tensorfusion.controllers import A_REVISIONS, go_struct
from lab.tensorfusion.operator import controller_identity
from lab.tensorfusion.rollout import COMPONENTS, annotation_keys, policy_from_pool

from .helpers import GROUP, NS, VERSION, wait_for


def _campaigns_unsettled(api_client, tfcs, pools):
    """A campaign still running (Running pools roll too), a TensorFusionCluster change the double
    has not copied to its pool yet, or a hypervisor configuration whose new hash the double has
    not picked up yet (a pool without nodes never writes one): the aftermath of a test that changed
    a pool, a restore in its finally or a chart upgrade that re-rendered the pool."""
    raw = client.CoreV1Api(api_client).list_namespaced_pod(
        NS, label_selector="tensor-fusion.ai/component=operator", _preload_content=False)
    active, version, policy = controller_identity(json.loads(raw.data)["items"], NS)
    templates = {f"{t['metadata']['name']}-{gp.get('name', '')}": gp.get("specTemplate") or {}
                 for t in tfcs for gp in (t.get("spec") or {}).get("gpuPools") or []}
    problems = []
    for pool in pools:
        name, spec = pool["metadata"]["name"], pool.get("spec") or {}
        annotations = pool["metadata"].get("annotations") or {}
        components = (pool.get("status") or {}).get("componentStatus") or {}
        if name in templates and go_struct(spec) != go_struct(templates[name]):
            problems.append(f"GPUPool {name} behind its TensorFusionCluster")
        for comp in COMPONENTS:
            # A campaign whose autoUpdate is off (paused) is a steady state: it never moves.
            if annotations.get(annotation_keys(comp)[0]) and not components.get(f"{comp}ConfigSynced") \
                    and policy_from_pool(spec, comp).auto:
                problems.append(f"GPUPool {name} {comp} campaign at "
                                f"{components.get(f'{comp}UpdateProgress') or 0}%")
        has_nodes = int((pool.get("status") or {}).get("totalNodes") or 0) > 0
        if active and has_nodes and components.get("hypervisor") != hashes.hypervisor_pool_hash(
                spec, annotations.get(A_REVISIONS, ""), version, policy):
            problems.append(f"GPUPool {name} hypervisor hash not yet recomputed")
    return problems


def _unsettled(api_client):
    co = client.CustomObjectsApi(api_client)
    problems = []
    tfcs = co.list_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters")["items"]
    for tfc in tfcs:
        phase = (tfc.get("status") or {}).get("phase")
        if tfc["metadata"].get("deletionTimestamp") or phase != "Running":
            problems.append(f"TensorFusionCluster {tfc['metadata']['name']} {phase}")
    pools = co.list_cluster_custom_object(GROUP, VERSION, "gpupools")["items"]
    for pool in pools:
        if (pool.get("status") or {}).get("phase") != "Running":
            problems.append(f"GPUPool {pool['metadata']['name']} {(pool.get('status') or {}).get('phase')}")
    for node in co.list_cluster_custom_object(GROUP, VERSION, "gpunodes")["items"]:
        if (node.get("status") or {}).get("phase") != "Running":
            problems.append(f"GPUNode {node['metadata']['name']} {(node.get('status') or {}).get('phase')}")
    problems += _campaigns_unsettled(api_client, tfcs, pools)
    apps = client.AppsV1Api(api_client)
    for dep in apps.list_namespaced_deployment(NS).items:
        if (dep.status.available_replicas or 0) < (dep.spec.replicas or 0):
            problems.append(f"Deployment {dep.metadata.name} not available")
    return problems


def settle(api_client, timeout=180):
    """Return once nothing is unsettled; fail naming what still is."""
    problems = []

    def settled(_pool):
        problems[:] = _unsettled(api_client)
        return not problems
    # Any change of a pool (a campaign's batches, its node counts) is a reason to look again, and
    # at least every 5 s (a Deployment that becomes available changes no pool).
    wait_for(client.CustomObjectsApi(api_client).list_cluster_custom_object, settled, GROUP, VERSION, "gpupools",
             timeout=timeout, every=5, what=lambda: f"the lab to settle; still unsettled: {problems}")


@contextlib.contextmanager
def controller_stopped(api_client):
    """TensorFusion's controller Deployment scaled to 0 (and seen so by the API) for the block,
    then back to 1 and available again."""
    apps = client.AppsV1Api(api_client)
    name = apps.list_namespaced_deployment(
        NS, label_selector="tensor-fusion.ai/component=operator").items[0].metadata.name
    apps.patch_namespaced_deployment_scale(name, NS, {"spec": {"replicas": 0}})
    try:
        # 180 s: after an API server outage kube-controller-manager's informers may be in their
        # back-off for over a minute (see the ns fixture).
        wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == name
                 and not d.status.available_replicas and d.status.observed_generation == d.metadata.generation,
                 namespace=NS, timeout=180)
        yield name
    finally:
        apps.patch_namespaced_deployment_scale(name, NS, {"spec": {"replicas": 1}})
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == name
             and (d.status.available_replicas or 0) == 1, namespace=NS, timeout=180)
