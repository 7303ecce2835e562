"""Wait (watching, with a deadline) until the session lab's TensorFusion is back to a steady,
healthy state: tests that judge health must not see the aftermath of a test before them."""
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
