"""The lab's TensorFusion CRDs, written as Python so that the GPUPool spec is defined once and
shared by the TensorFusionCluster's ``specTemplate`` and the GPUPool's ``spec``.

``python -m lab.tensorfusion.crds`` writes ``lab/crds/*.yaml``; a unit test checks that the
committed files match. The schemas stay within what kube-apiserver v1.20 accepts: structural,
defaults, enums, bounds, no CEL rules, no ``default: null``. Field paths, defaults, enums and
bounds follow the upstream CRDs for everything the collection touches; RawExtensions keep
``x-kubernetes-preserve-unknown-fields`` so that unknown parts survive, while modelled objects
prune unknown keys (the retired ``autoUpdate`` flag disappears, as upstream).
"""
from pathlib import Path

import yaml

GROUP = "tensor-fusion.ai"
CRD_DIR = Path(__file__).resolve().parent.parent / "crds"


def s(**kw):
    return {"type": "string", **kw}


def i32(**kw):
    return {"type": "integer", "format": "int32", **kw}


def i64(**kw):
    return {"type": "integer", "format": "int64", **kw}


def b(**kw):
    return {"type": "boolean", **kw}


def obj(props=None, required=None, **kw):
    out = {"type": "object", **kw}
    if props:
        out["properties"] = props
    if required:
        out["required"] = required
    return out


def arr(items, **kw):
    return {"type": "array", "items": items, **kw}


def raw(**kw):
    """A RawExtension or a type the collection never touches: kept verbatim."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, **kw}


def qty(**kw):
    """resource.Quantity: an integer or a string such as ``10Gi``."""
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True,
            **kw}


def strmap():
    return {"type": "object", "additionalProperties": {"type": "string"}}


PHASES = ["Pending", "Running", "Updating", "Destroying", "Unknown"]
ISOLATION = ["shared", "soft", "hard", "partitioned"]
RESOURCES = obj({"tflops": qty(), "vram": qty(), "computePercent": qty()})

ROLLING_POLICY = obj({
    # No defaults for the three flags: absent means false (upstream #717).
    "autoUpdateHypervisor": b(), "autoUpdateWorker": b(), "autoUpdateClient": b(),
    "batchPercentage": i32(default=100, minimum=0, maximum=100),
    "batchInterval": s(default="1s"),
    "maxDuration": s(default="10m"),
    "maintenanceWindow": obj({"includes": arr(s(), description="crontab syntax (not honoured)")}),
})

NODE_MANAGER = obj({
    "provisioningMode": s(enum=["Provisioned", "AutoSelect", "Karpenter"], default="AutoSelect"),
    "defaultIsolationMode": s(enum=ISOLATION, default="soft"),
    "isolationModeRules": arr(obj({"mode": s(enum=ISOLATION), "selector": raw()})),
    "defaultVendor": s(default="NVIDIA"),
    "nodeSelector": raw(),
    "multiVendorNodeSelector": raw(),
    "nodeProvisioner": raw(),
    "nodeCompaction": raw(),
    "nodePoolRollingUpdatePolicy": ROLLING_POLICY,
})

COMPONENT_CONFIG = obj({
    "hypervisor": obj({
        "image": s(), "vectorImage": s(),
        "portNumber": i32(default=8000, minimum=0, maximum=65535),
        "podTemplate": raw(), "enableVector": b(),
    }),
    "worker": obj({"image": s(), "podTemplate": raw()}),
    "client": obj({
        "image": s(description="Deprecated upstream, yet the only client image the code reads"),
        "remoteModeImage": s(), "embeddedModeImage": s(), "operatorEndpoint": s(),
        "patchToPod": raw(), "patchToContainer": raw(),
        "patchToEmbeddedWorkerContainer": raw(), "patchEmbeddedWorkerToPod": raw(),
    }),
    "nodeDiscovery": obj({"image": s(), "podTemplate": raw()}),
})

GPUPOOL_SPEC = obj({
    "capacityConfig": obj({
        "minResources": RESOURCES, "maxResources": RESOURCES, "warmResources": RESOURCES,
        "oversubscription": obj({"tflopsOversellRatio": i32(default=500),
                                 "vramExpandToHostMem": i32(default=50),
                                 "vramExpandToHostDisk": i32(default=70)}),
    }),
    "nodeManagerConfig": NODE_MANAGER,
    "componentConfig": COMPONENT_CONFIG,
    "qosConfig": raw(),
    "schedulingConfigTemplate": s(),
    "defaultUsingLocalGPU": b(),
}, required=["nodeManagerConfig"])

COMPONENT_STATUS = obj({  # every field omitempty upstream
    "hypervisor": s(), "hypervisorConfigSynced": b(), "hypervisorUpdateProgress": i32(),
    "worker": s(), "workerConfigSynced": b(), "workerUpdateProgress": i32(),
    "client": s(), "clientConfigSynced": b(), "clientUpdateProgress": i32(),
})

CONDITIONS = arr(raw())

GPUPOOL_STATUS = obj({
    "phase": s(enum=PHASES, default="Pending"),
    "conditions": CONDITIONS, "cluster": s(),
    "componentStatus": COMPONENT_STATUS,
    "totalNodes": i32(), "totalGPUs": i32(), "readyNodes": i32(), "notReadyNodes": i32(),
    "totalTFlops": qty(), "totalVRAM": qty(), "virtualTFlops": qty(), "virtualVRAM": qty(),
    "availableTFlops": qty(), "availableVRAM": qty(),
    "runningAppsCnt": i32(),
    "provisioningPhase": s(enum=["None", "Initializing", "Provisioning", "Completed"], default="None"),
    "lastCompactionTime": s(format="date-time"), "lastDefragTime": s(format="date-time"),
    "budgetExceeded": b(), "savedCostsPerMonth": s(), "potentialSavingsPerMonth": s(),
}, required=["phase", "componentStatus", "readyNodes", "notReadyNodes", "totalTFlops",
             "totalVRAM", "virtualTFlops", "virtualVRAM", "availableTFlops", "availableVRAM"])

TFC_SPEC = obj({
    "gpuPools": arr(obj({"name": s(), "isDefault": b(), "specTemplate": GPUPOOL_SPEC},
                        required=["specTemplate"])),
    "computingVendor": raw(), "storageVendor": raw(), "dataPipelines": raw(),
})

TFC_STATUS = obj({
    "phase": s(enum=PHASES, default="Pending"),
    "conditions": CONDITIONS, "retryCount": i64(),
    "totalPools": i32(), "totalNodes": i32(), "totalGPUs": i32(),
    "totalTFlops": qty(), "totalVRAM": qty(), "virtualTFlops": qty(), "virtualVRAM": qty(),
    "availableTFlops": qty(), "availableVRAM": qty(),
    "readyGPUPools": arr(s()), "notReadyGPUPools": arr(s()),
    "cloudVendorConfigHash": s(),
})

GPUNODE_STATUS = obj({
    "phase": s(enum=["Pending", "Provisioning", "Migrating", "Running", "Succeeded", "Failed",
                     "Unknown", "Destroying"], default="Pending"),
    "conditions": CONDITIONS,
    "totalTFlops": qty(), "totalVRAM": qty(), "virtualTFlops": qty(), "virtualVRAM": qty(),
    "availableTFlops": qty(), "availableVRAM": qty(),
    "totalGPUs": i32(), "managedGPUs": i32(), "managedGPUDeviceIDs": arr(s()),
    "nodeInfo": raw(), "allocationInfo": arr(raw()), "message": s(),
    # In the schema upstream, but nothing writes it.
    "hypervisorStatus": obj({"hypervisorState": s(), "hypervisorVersion": s(),
                             "lastHeartbeatTime": s(format="date-time")}),
})

GPU_STATUS = obj({
    "phase": s(enum=["Pending", "Provisioning", "Running", "Unknown", "Destroying", "Migrating"],
               default="Pending"),
    "capacity": RESOURCES, "available": RESOURCES, "uuid": s(), "gpuModel": s(), "vendor": s(),
    "nodeSelector": strmap(), "usedBy": s(), "message": s(), "index": i32(),
    "isolationPolicy": s(enum=["Static", "Dynamic"]), "activeIsolationMode": s(enum=ISOLATION),
    "runningApps": arr(raw()),
})

WORKLOAD_SPEC = obj({
    "poolName": s(), "replicas": i32(), "isLocalGPU": b(), "gpuCount": i32(), "gpuModel": s(),
    "qos": s(enum=["low", "medium", "high", "critical"]),
    "resources": obj({"requests": RESOURCES, "limits": RESOURCES}),
    "isolation": s(enum=ISOLATION), "sidecarWorker": b(),
    "autoScalingConfig": raw(), "workerPodTemplate": raw(),
})

WORKLOAD_STATUS = obj({
    "phase": s(enum=["Pending", "Running", "Failed", "Unknown"], default="Pending"),
    "podTemplateHash": s(), "workerCount": i32(), "readyWorkers": i32(), "conditions": CONDITIONS,
})

PROVIDER_SPEC = obj({
    "vendor": s(),
    "images": obj({"middleware": s(), "remoteClient": s(), "remoteWorker": s(),
                   "hypervisor": s(), "nodeDiscovery": s()},
                  **{"x-kubernetes-preserve-unknown-fields": True}),
    "hardwareMetadata": arr(raw()), "inUseResourceNames": arr(s()),
    "hypervisorConfig": raw(),
}, required=["vendor"])


def col(name, path, typ="string", **kw):
    return {"name": name, "type": typ, "jsonPath": path, **kw}


AGE = col("Age", ".metadata.creationTimestamp", "date")
CAPACITY_COLS = [col("Total Tflops", ".status.totalTFlops"), col("Total VRAM", ".status.totalVRAM"),
                 col("Available Tflops", ".status.availableTFlops"),
                 col("Available VRAM", ".status.availableVRAM")]


def crd(kind, plural, spec, status, columns, scope="Cluster"):
    schema = {"type": "object", "properties": {
        "apiVersion": s(), "kind": s(), "metadata": {"type": "object"}, "status": status}}
    if spec is not None:
        schema["properties"]["spec"] = spec
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": scope,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower()},
            "versions": [{"name": "v1", "served": True, "storage": True,
                          "subresources": {"status": {}},
                          "additionalPrinterColumns": columns,
                          "schema": {"openAPIV3Schema": schema}}],
        },
    }


def all_crds():
    return {
        "tensorfusionclusters": crd("TensorFusionCluster", "tensorfusionclusters", TFC_SPEC,
                                    TFC_STATUS, [
                                        col("Phase", ".status.phase"),
                                        col("Total Pools", ".status.totalPools"),
                                        col("Total Nodes", ".status.totalNodes"),
                                        col("Total GPU", ".status.totalGPUs"), *CAPACITY_COLS, AGE]),
        "gpupools": crd("GPUPool", "gpupools", GPUPOOL_SPEC, GPUPOOL_STATUS, [
            col("Phase", ".status.phase"),
            col("TFlops Oversubscription",
                ".spec.capacityConfig.oversubscription.tflopsOversellRatio"),
            col("Mode", ".status.mode"),  # no such field upstream either: always empty
            col("Default Scheduling Strategy", ".spec.schedulingConfigTemplate"),
            col("Total Nodes", ".status.totalNodes"), col("Total GPU", ".status.totalGPUs"),
            *CAPACITY_COLS, AGE]),
        "gpunodes": crd("GPUNode", "gpunodes", raw(), GPUNODE_STATUS, [
            col("Phase", ".status.phase"), col("Total TFlops", ".status.totalTFlops"),
            col("Total VRAM", ".status.totalVRAM"),
            col("Virtual TFlops", ".status.virtualTFlops"),
            col("Virtual VRAM", ".status.virtualVRAM"),
            col("Available TFlops", ".status.availableTFlops"),
            col("Available VRAM", ".status.availableVRAM"),
            col("GPU Count", ".status.totalGPUs", "integer"), AGE]),
        "gpus": crd("GPU", "gpus", None, GPU_STATUS, [
            col("GPU Model", ".status.gpuModel"), col("Phase", ".status.phase"),
            col("Total TFlops", ".status.capacity.tflops"),
            col("Total VRAM", ".status.capacity.vram"),
            col("Available TFlops", ".status.available.tflops"),
            col("Available VRAM", ".status.available.vram"),
            col("Device UUID", ".status.uuid"), col("Used By", ".status.usedBy"),
            col("Node", ".status.nodeSelector"), AGE]),
        # Namespaced: the webhook creates it in the Pod's namespace (section 6).
        "tensorfusionworkloads": crd("TensorFusionWorkload", "tensorfusionworkloads",
                                     WORKLOAD_SPEC, WORKLOAD_STATUS, [
                                         col("Phase", ".status.phase"),
                                         col("Pool", ".spec.poolName"), AGE], scope="Namespaced"),
        "providerconfigs": crd("ProviderConfig", "providerconfigs", PROVIDER_SPEC, raw(), [
            col("Vendor", ".spec.vendor"), AGE]),
    }


def write(dest: Path = CRD_DIR) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for plural, body in all_crds().items():
        text = ("# Generated by `python -m lab.tensorfusion.crds`; edit lab/tensorfusion/crds.py.\n"
                + yaml.safe_dump(body, sort_keys=False, width=100))
        (dest / f"{GROUP}_{plural}.yaml").write_text(text)


if __name__ == "__main__":
    write()
