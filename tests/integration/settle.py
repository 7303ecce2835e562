"""Wait (watching, with a deadline) until the session lab's TensorFusion is back to a steady,
healthy state: tests that judge health must not see the aftermath of a test before them."""
import contextlib
import time

from kubernetes import client, watch

GROUP, VERSION = "tensor-fusion.ai", "v1"


def _unsettled(api_client):
    co = client.CustomObjectsApi(api_client)
    problems = []
    for tfc in co.list_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters")["items"]:
        phase = (tfc.get("status") or {}).get("phase")
        if tfc["metadata"].get("deletionTimestamp") or phase != "Running":
            problems.append(f"TensorFusionCluster {tfc['metadata']['name']} {phase}")
    for pool in co.list_cluster_custom_object(GROUP, VERSION, "gpupools")["items"]:
        if (pool.get("status") or {}).get("phase") != "Running":
            problems.append(f"GPUPool {pool['metadata']['name']} {(pool.get('status') or {}).get('phase')}")
    for node in co.list_cluster_custom_object(GROUP, VERSION, "gpunodes")["items"]:
        if (node.get("status") or {}).get("phase") != "Running":
            problems.append(f"GPUNode {node['metadata']['name']} {(node.get('status') or {}).get('phase')}")
    apps = client.AppsV1Api(api_client)
    for dep in apps.list_namespaced_deployment("tensor-fusion-sys").items:
        if (dep.status.available_replicas or 0) < (dep.spec.replicas or 0):
            problems.append(f"Deployment {dep.metadata.name} not available")
    return problems


def settle(api_client, timeout=180):
    """Return once nothing is unsettled; fail naming what still is."""
    deadline = time.monotonic() + timeout
    co = client.CustomObjectsApi(api_client)
    problems = _unsettled(api_client)
    while problems and time.monotonic() < deadline:
        # Any change of a pool or cluster is a reason to look again; the watch bounds the pause.
        w = watch.Watch()
        for _event in w.stream(co.list_cluster_custom_object, GROUP, VERSION, "gpunodes",
                               timeout_seconds=max(1, min(5, int(deadline - time.monotonic())))):
            w.stop()
        problems = _unsettled(api_client)
    assert not problems, f"the lab did not settle within {timeout}s: {problems}"


@contextlib.contextmanager
def controller_stopped(api_client):
    """TensorFusion's controller Deployment scaled to 0 (and seen so by the API) for the block,
    then back to 1 and available again."""
    from .test_lab import wait_for
    apps = client.AppsV1Api(api_client)
    name = apps.list_namespaced_deployment(
        "tensor-fusion-sys", label_selector="tensor-fusion.ai/component=operator").items[0].metadata.name
    apps.patch_namespaced_deployment_scale(name, "tensor-fusion-sys", {"spec": {"replicas": 0}})
    try:
        wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == name
                 and not d.status.available_replicas and d.status.observed_generation == d.metadata.generation,
                 namespace="tensor-fusion-sys")
        yield name
    finally:
        apps.patch_namespaced_deployment_scale(name, "tensor-fusion-sys", {"spec": {"replicas": 1}})
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == name
             and (d.status.available_replicas or 0) == 1, namespace="tensor-fusion-sys")
