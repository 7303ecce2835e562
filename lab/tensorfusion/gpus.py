"""The GPU objects a hypervisor writes, for the lab's simulated GPU nodes when TensorFusion's own
operator runs (lab/tensorfusion/upstream.py): ``python -m lab.tensorfusion.gpus --kubeconfig K``.

In a cluster the hypervisor process on each GPU node discovers its devices and writes one GPU
object per device (named by the device, labelled with its GPUNode and pool, owned by the
GPUNode, with capacity and available, the isolation policy and mode its own arguments say) and
the GPUNode's totals; the operator's GPUNode and pool stay Pending until then. The lab has no
devices: once a node's hypervisor Pod runs, its GPUNode gets ``--gpus-per-node`` GPUs of the
model the chart's gpu-info lists first, and they follow that Pod's ``--isolation-policy`` and
``--isolation-mode`` as the process would after a restart; the Node advertises the resources of
the hypervisor's device plugin. The double writes its own
(controllers.py); this runs only beside upstream's operator."""
import argparse
import json
import logging
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from . import hashes
from .controllers import GPU_MODEL, GPU_TFLOPS, GPU_VRAM, L_OWNER, L_POOL, _flag_value, owner_ref

GROUP, VERSION = "tensor-fusion.ai", "v1"
log = logging.getLogger("tf-gpus")


def hypervisor_args(pod: dict) -> dict:
    """{"isolation-policy": ..., "isolation-mode": ...} of a hypervisor Pod's first container."""
    args = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("args")
    return dict((name, _flag_value(args, "--" + name)) for name in ("isolation-policy", "isolation-mode"))


def gpu_objects(gpunode: dict, count: int, args: dict):
    """(GPU object, its status) for each device of ``gpunode`` (a dict), as a hypervisor started
    with ``args`` (hypervisor_args) writes them."""
    name = gpunode["metadata"]["name"]
    pool = (gpunode["metadata"].get("ownerReferences") or [{}])[0].get("name")
    out = []
    for index in range(count):
        uuid = "gpu-" + hashes.fnv64a(f"{name}-{index}".encode())
        capacity = {"tflops": str(GPU_TFLOPS), "vram": f"{GPU_VRAM}Gi"}
        obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GPU", "metadata": {
            "name": uuid, "labels": {L_OWNER: name, L_POOL: pool},
            "ownerReferences": [owner_ref(gpunode, "GPUNode")]}}
        status = {"capacity": capacity, "available": dict(capacity), "uuid": uuid.upper(),
                  "gpuModel": GPU_MODEL, "vendor": "NVIDIA", "index": index, "numaNode": 0,
                  "nodeSelector": {"kubernetes.io/hostname": name}, "usedBy": "tensor-fusion",
                  "phase": "Pending", "message": "managed",
                  "isolationPolicy": (args.get("isolation-policy") or "static").capitalize(),
                  "isolationMode": args.get("isolation-mode") or "soft"}
        out.append((obj, status))
    return out


def node_totals(count: int) -> dict:
    return {"totalTFlops": str(GPU_TFLOPS * count), "totalVRAM": f"{GPU_VRAM * count}Gi",
            "totalGPUs": count, "managedGPUs": count}


# The device plugin a hypervisor serves: 16 resources tensor-fusion.ai/index_<0..f> of 36 devices
# each (8 * 9 / 2), which the webhook's index limit on a worker Pod asks for (the scheduler needs
# them on the node).
INDEX_RESOURCES = dict(("tensor-fusion.ai/index_%x" % i, "36") for i in range(16))


def advertise_index_resources(core, node_name: str) -> None:
    node = core.read_node(node_name)
    have = node.status.allocatable or {}
    if all(have.get(k) == v for k, v in INDEX_RESOURCES.items()):
        return
    core.patch_node_status(node_name, {"status": {"capacity": INDEX_RESOURCES, "allocatable": INDEX_RESOURCES}})
    log.info("Node %s advertises the hypervisor's device plugin resources", node_name)


# What a hypervisor that restarts with other arguments rewrites of its GPUs' status.
FROM_ARGS = ("isolationPolicy", "isolationMode")


def ensure(co, core, pod: dict, count: int) -> None:
    """The GPUs of the node whose hypervisor Pod is ``pod``, once it runs, and its device plugin."""
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name or (pod.get("status") or {}).get("phase") != "Running" or \
            pod["metadata"].get("deletionTimestamp"):
        return
    try:
        gpunode = co.get_cluster_custom_object(GROUP, VERSION, "gpunodes", node_name)
    except ApiException as exc:
        if exc.status == 404:
            return
        raise
    if not gpunode["metadata"].get("ownerReferences"):
        return  # not in a pool yet
    advertise_index_resources(core, node_name)
    ids = []
    for obj, status in gpu_objects(gpunode, count, hypervisor_args(pod)):
        name = obj["metadata"]["name"]
        ids.append(status["uuid"])
        try:
            co.create_cluster_custom_object(GROUP, VERSION, "gpus", obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
            current = (co.get_cluster_custom_object(GROUP, VERSION, "gpus", name).get("status") or {})
            changed = dict((k, status[k]) for k in FROM_ARGS if current.get(k) != status[k])
            if changed:
                co.patch_cluster_custom_object_status(GROUP, VERSION, "gpus", name, {"status": changed})
                log.info("GPU %s now %s", name, changed)
            continue
        co.patch_cluster_custom_object_status(GROUP, VERSION, "gpus", name, {"status": status})
        log.info("GPU %s written for GPUNode %s", name, node_name)
    current = gpunode.get("status") or {}
    totals = dict(node_totals(count), managedGPUDeviceIDs=ids)
    if any(current.get(k) != v for k, v in totals.items()):
        patch = dict(totals, phase=current.get("phase") or "Pending")
        co.patch_cluster_custom_object_status(GROUP, VERSION, "gpunodes", node_name, {"status": patch})


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--namespace", required=True, help="the operator's, where hypervisor Pods run")
    parser.add_argument("--gpus-per-node", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config.load_kube_config(args.kubeconfig)
    co, core = client.CustomObjectsApi(), client.CoreV1Api()
    selector = "tensor-fusion.ai/component=hypervisor"
    while True:
        try:
            listing = core.list_namespaced_pod(args.namespace, label_selector=selector, _preload_content=False)
            listing = json.loads(listing.data)
            for pod in listing["items"]:
                ensure(co, core, pod, args.gpus_per_node)
            for event in watch.Watch().stream(core.list_namespaced_pod, args.namespace, label_selector=selector,
                                              resource_version=listing["metadata"]["resourceVersion"],
                                              timeout_seconds=120, _preload_content=False):
                if event["type"] in ("ADDED", "MODIFIED"):
                    ensure(co, core, event["raw_object"], args.gpus_per_node)
        except Exception as exc:  # an API server away: list again shortly, as an informer would
            log.warning("watching hypervisor Pods failed (%s); listing again", exc)
            time.sleep(2)


if __name__ == "__main__":
    main()
