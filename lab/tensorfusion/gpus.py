"""The GPU objects a hypervisor writes, for the lab's simulated GPU nodes when TensorFusion's own
operator runs (lab/tensorfusion/upstream.py): ``python -m lab.tensorfusion.gpus --kubeconfig K``.

In a cluster the hypervisor process on each GPU node discovers its devices and writes one GPU
object per device (named by the device, labelled with its GPUNode and pool, owned by the
GPUNode, with capacity and available) and the GPUNode's totals; the operator's GPUNode and pool
stay Pending until then. The lab has no devices: each GPUNode that belongs to a pool gets
``--gpus-per-node`` GPUs of the model the chart's gpu-info lists first. The double writes its own
(controllers.py); this runs only beside upstream's operator."""
import argparse
import logging
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from . import hashes
from .controllers import GPU_MODEL, GPU_TFLOPS, GPU_VRAM, L_OWNER, L_POOL, owner_ref

GROUP, VERSION = "tensor-fusion.ai", "v1"
log = logging.getLogger("tf-gpus")


def gpu_objects(gpunode: dict, count: int):
    """(GPU object, its status) for each device of ``gpunode`` (a dict), as a hypervisor writes them."""
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
                  "phase": "Pending", "message": "managed"}
        out.append((obj, status))
    return out


def node_totals(count: int) -> dict:
    return {"totalTFlops": str(GPU_TFLOPS * count), "totalVRAM": f"{GPU_VRAM * count}Gi",
            "totalGPUs": count, "managedGPUs": count}


def ensure(co, gpunode: dict, count: int) -> None:
    if not gpunode["metadata"].get("ownerReferences") or gpunode["metadata"].get("deletionTimestamp"):
        return  # not in a pool yet, or going away
    ids = []
    for obj, status in gpu_objects(gpunode, count):
        ids.append(status["uuid"])
        try:
            co.create_cluster_custom_object(GROUP, VERSION, "gpus", obj)
        except ApiException as exc:
            if exc.status != 409:
                raise
            continue  # written before: its status is the operator's now
        co.patch_cluster_custom_object_status(GROUP, VERSION, "gpus", obj["metadata"]["name"], {"status": status})
        log.info("GPU %s written for GPUNode %s", obj["metadata"]["name"], gpunode["metadata"]["name"])
    current = gpunode.get("status") or {}
    totals = dict(node_totals(count), managedGPUDeviceIDs=ids)
    if any(current.get(k) != v for k, v in totals.items()):
        patch = dict(totals, phase=current.get("phase") or "Pending")
        co.patch_cluster_custom_object_status(GROUP, VERSION, "gpunodes", gpunode["metadata"]["name"],
                                              {"status": patch})


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--gpus-per-node", type=int, default=1)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config.load_kube_config(args.kubeconfig)
    co = client.CustomObjectsApi()
    while True:
        try:
            listing = co.list_cluster_custom_object(GROUP, VERSION, "gpunodes")
            for node in listing["items"]:
                ensure(co, node, args.gpus_per_node)
            for event in watch.Watch().stream(co.list_cluster_custom_object, GROUP, VERSION, "gpunodes",
                                              resource_version=listing["metadata"]["resourceVersion"],
                                              timeout_seconds=120):
                if event["type"] in ("ADDED", "MODIFIED"):
                    ensure(co, event["object"], args.gpus_per_node)
        except Exception as exc:  # an API server away: list again shortly, as an informer would
            log.warning("watching GPUNodes failed (%s); listing again", exc)
            time.sleep(2)


if __name__ == "__main__":
    main()
