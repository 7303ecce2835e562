"""The lab's TensorFusion CRDs, written as Python: each shared Go type (a GPUPool spec, a
TensorFusionWorkload spec, a node selector, a metav1.Condition, a resource.Quantity) is defined
once and used wherever upstream embeds it.

``python -m lab.tensorfusion.crds`` writes ``lab/crds/*.yaml``; a unit test checks that the
committed files match. ``python -m lab.tensorfusion.crds --compare DIR`` compares the generated
CRDs with upstream's (the YAML files in DIR) and exits non-zero on any difference that is not in
``ALLOWED`` below.

All 12 kinds of tensor-fusion.ai/v1 have upstream's names, scope, subresources, printer columns
and, at every level of spec and status, its fields, types, required lists, defaults, enums,
bounds, patterns, formats and CEL rules; ``ALLOWED`` is empty (an entry would name what the lab's
Kubernetes could not take, with the reason). RawExtensions keep ``x-kubernetes-preserve-unknown-fields``, so
that the parts nobody models survive; modelled objects prune unknown keys, as upstream.
"""
import argparse
import json
import sys
from pathlib import Path
from typing import Dict, List, NamedTuple

import yaml

GROUP = "tensor-fusion.ai"
VERSION = "v1"
CRD_DIR = Path(__file__).resolve().parent.parent / "crds"


# ---------------------------------------------------------------------------- building blocks
def s(**kw):
    return {"type": "string", **kw}


def integer(**kw):
    """A Go ``int``: no format."""
    return {"type": "integer", **kw}


def i32(**kw):
    return {"type": "integer", "format": "int32", **kw}


def i64(**kw):
    return {"type": "integer", "format": "int64", **kw}


def b(**kw):
    return {"type": "boolean", **kw}


def date_time(**kw):
    return s(format="date-time", **kw)


def obj(props=None, required=None, **kw):
    out = {"type": "object", **kw}
    if props:
        out["properties"] = props
    if required:
        out["required"] = sorted(required)
    return out


def arr(items, **kw):
    return {"type": "array", "items": items, **kw}


def mapof(values, **kw):
    """A Go map from string to ``values``."""
    return {"type": "object", "additionalProperties": values, **kw}


def strmap():
    return mapof(s())


def strs(*names):
    """Properties that are all plain strings."""
    return {name: s() for name in names}


def raw(**kw):
    """A RawExtension (or an opaque object): kept verbatim, unknown fields and all."""
    return {"type": "object", "x-kubernetes-preserve-unknown-fields": True, **kw}


def cel(*rules):
    """CEL validation rules, each (rule, message): the API server evaluates them on every write."""
    return {"x-kubernetes-validations": [{"rule": rule, "message": message}
                                         for rule, message in rules]}


def atomic_list(items, **kw):
    return arr(items, **{"x-kubernetes-list-type": "atomic", **kw})


def atomic_map(schema):
    return {**schema, "x-kubernetes-map-type": "atomic"}


# resource.Quantity's string form: a signed decimal number, then a binary (Ki..Ei) or decimal
# (n..E) suffix or a decimal exponent.
_DECIMAL = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
QUANTITY_PATTERN = rf"^(\+|-)?{_DECIMAL}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_DECIMAL}))?$"


def qty(**kw):
    """resource.Quantity: an integer or a string such as ``10Gi``."""
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": True, **kw}


def qtys(*names):
    return {name: qty() for name in names}


# metav1.Condition: a qualified name as type (an optional DNS-subdomain prefix and a slash, then a
# name), a CamelCase reason, and all of type/status/reason/message/lastTransitionTime required.
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
CONDITION_TYPE_PATTERN = (rf"^({_DNS_LABEL}(\.{_DNS_LABEL})*/)?"
                          r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$")
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
CONDITIONS = arr(obj({
    "type": s(maxLength=316, pattern=CONDITION_TYPE_PATTERN),
    "status": s(enum=["True", "False", "Unknown"]),
    "observedGeneration": i64(minimum=0),
    "lastTransitionTime": date_time(),
    "reason": s(minLength=1, maxLength=1024, pattern=CONDITION_REASON_PATTERN),
    "message": s(maxLength=32768),
}, required=["type", "status", "lastTransitionTime", "reason", "message"]))


# ---------------------------------------------------------------------------- Kubernetes types
def selector_requirement():
    """A label/field selector requirement (metav1 and corev1 have the same shape)."""
    return obj({"key": s(), "operator": s(), "values": atomic_list(s())},
               required=["key", "operator"])


LABEL_SELECTOR = atomic_map(obj({"matchExpressions": atomic_list(selector_requirement()),
                                 "matchLabels": strmap()}))
NODE_SELECTOR_TERM = atomic_map(obj({"matchExpressions": atomic_list(selector_requirement()),
                                     "matchFields": atomic_list(selector_requirement())}))
NODE_SELECTOR = atomic_map(obj({"nodeSelectorTerms": atomic_list(NODE_SELECTOR_TERM)},
                               required=["nodeSelectorTerms"]))
NODE_AFFINITY = obj({
    "requiredDuringSchedulingIgnoredDuringExecution": NODE_SELECTOR,
    "preferredDuringSchedulingIgnoredDuringExecution": atomic_list(obj(
        {"weight": i32(), "preference": NODE_SELECTOR_TERM}, required=["weight", "preference"])),
})
# A reference to an object of another API (Karpenter's node class, a GPUNodeClass).
GROUP_KIND_REF = obj(strs("group", "kind", "name", "version"),
                     required=["group", "kind", "name", "version"])


# ---------------------------------------------------------------------------- shared TF types
PHASES = ["Pending", "Running", "Updating", "Destroying", "Unknown"]
ISOLATION = ["shared", "soft", "hard", "partitioned"]
QOS = ["low", "medium", "high", "critical"]

# GPU capacity of a pod, a GPU or a quota: tflops and vram must both be given.
GPU_RESOURCE = obj(qtys("tflops", "vram", "compute"), required=["tflops", "vram"])
REQUESTS_LIMITS = obj({"requests": GPU_RESOURCE, "limits": GPU_RESOURCE},
                      required=["requests", "limits"])
# One pod's share of a GPU (GPUNode.status.allocatedPods, GPU.status.runningApps[].pods).
POD_GPU_INFO = obj({
    **strs("name", "namespace", "uid"), "requests": GPU_RESOURCE, "limits": GPU_RESOURCE,
    "qos": s(enum=QOS), "isExternal": b()})

CRON_SCALING_RULE = obj({"enable": b(), **strs("name", "start", "end"),
                         "desiredResources": REQUESTS_LIMITS})
AUTO_SCALING = obj({
    "autoSetResources": obj({"enable": b(), **strs(
        "targetResource", "interval", "initialDelayPeriod", "historyDataPeriod", "marginFraction",
        "updateThreshold", "targetComputePercentile", "lowerBoundComputePercentile",
        "upperBoundComputePercentile", "targetVRAMPercentile", "lowerBoundVRAMPercentile",
        "upperBoundVRAMPercentile", "minComputeResourcesRatio", "maxComputeResourcesRatio",
        "minVRAMResourcesRatio", "maxVRAMResourcesRatio")}),
    "cronScalingRules": arr(CRON_SCALING_RULE),
    "externalScaler": obj({
        "enable": b(), **strs("url", "interval", "initialDelayPeriod"),
        "apiKeySecretRef": atomic_map(obj(strs("name", "namespace")))}),
})


# ---------------------------------------------------------------------------- GPUPool
POOL_RESOURCES = obj(qtys("tflops", "vram", "cpu", "memory"))

ROLLING_POLICY = obj({
    # No defaults for the three flags: absent means false (upstream #717).
    "autoUpdateHypervisor": b(), "autoUpdateWorker": b(), "autoUpdateClient": b(),
    "batchPercentage": i32(default=100, minimum=0, maximum=100),
    "batchInterval": s(default="1s"),
    "maxDuration": s(default="10m"),
    "maintenanceWindow": obj({"includes": arr(s(), description="crontab syntax (not honoured)")}),
})

NODE_REQUIREMENT = obj({
    "key": s(enum=["node.kubernetes.io/instance-type", "kubernetes.io/arch", "kubernetes.io/os",
                   "topology.kubernetes.io/region", "topology.kubernetes.io/zone",
                   "karpenter.sh/capacity-type", "tensor-fusion.ai/gpu-vendor",
                   "tensor-fusion.ai/gpu-instance-family", "tensor-fusion.ai/gpu-instance-size"]),
    "operator": s(default="In", enum=["In", "Exists", "DoesNotExist", "Gt", "Lt"]),
    "values": arr(s()),
})
NODE_TAINT = obj({"key": s(), "value": s(),
                  "effect": s(default="NoSchedule",
                              enum=["NoSchedule", "NoExecute", "PreferNoSchedule"])})

NODE_PROVISIONER = obj({
    "nodeClass": s(), "karpenterNodeClassRef": GROUP_KIND_REF,
    "gpuRequirements": arr(NODE_REQUIREMENT), "gpuTaints": arr(NODE_TAINT),
    "gpuNodeLabels": strmap(), "gpuNodeAnnotations": strmap(),
    "cpuRequirements": arr(NODE_REQUIREMENT), "cpuTaints": arr(NODE_TAINT),
    "cpuNodeLabels": strmap(),
    "budget": obj({
        "budgetPerDay": s(default="100"), "budgetPerMonth": s(default="1000"),
        "budgetPerQuarter": s(default="3000"),
        "budgetExceedStrategy": s(default="AlertOnly",
                                  enum=["AlertOnly", "AlertAndTerminateVM"])}),
})

NODE_COMPACTION = obj({
    "period": s(default="5m"),
    "defrag": obj({
        "enabled": b(default=False),
        "schedule": s(default="0 3 * * *", pattern="^[^=]+$"),
        "timezone": s(minLength=1),
        "maxDuration": s(default="2h"),
        "utilizationThresholdPercent": i32(default=40, minimum=0, maximum=100),
        "sourceNodeMarkerTTL": s(default="30m"),
        "evictedPodMarkerTTL": s(default="never"),
    }, required=["timezone"]),
})

NODE_MANAGER = obj({
    "provisioningMode": s(enum=["Provisioned", "AutoSelect", "Karpenter"], default="AutoSelect"),
    "defaultIsolationMode": s(enum=ISOLATION, default="soft"),
    "isolationModeRules": arr(obj({"mode": s(enum=ISOLATION), "selector": LABEL_SELECTOR},
                                  required=["mode", "selector"])),
    "defaultVendor": s(default="NVIDIA"),
    "nodeSelector": NODE_SELECTOR,
    "multiVendorNodeSelector": mapof(NODE_SELECTOR),
    "nodeProvisioner": NODE_PROVISIONER,
    "nodeCompaction": NODE_COMPACTION,
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

QOS_CONFIG = obj({
    "defaultQoS": s(enum=QOS),
    "definitions": arr(obj({"name": s(enum=QOS), "description": s(), "priority": integer()})),
    "pricing": arr(obj({
        "qos": s(enum=QOS),
        "requests": obj({"perFP16TFlopsPerHour": s(default="$0.0069228"),
                         "perGBOfVRAMPerHour": s(default="$0.01548")}),
        "limitsOverRequests": s(default="1")})),
    "evictionProtectionPriceRatio": s(default="1.2"),
})

GPUPOOL_SPEC = obj({
    "capacityConfig": obj({
        "minResources": POOL_RESOURCES, "maxResources": POOL_RESOURCES,
        "warmResources": POOL_RESOURCES,
        "oversubscription": obj({
            "tflopsOversellRatio": i32(default=500, minimum=100, maximum=100000),
            "vramExpandToHostMem": i32(default=50, minimum=0, maximum=100),
            "vramExpandToHostDisk": i32(default=70, minimum=0, maximum=100)}),
    }),
    "nodeManagerConfig": NODE_MANAGER,
    "componentConfig": COMPONENT_CONFIG,
    "qosConfig": QOS_CONFIG,
    "schedulingConfigTemplate": s(),
    "defaultUsingLocalGPU": b(),
}, required=["nodeManagerConfig"])

COMPONENT_STATUS = obj({  # every field omitempty upstream
    "hypervisor": s(), "hypervisorConfigSynced": b(), "hypervisorUpdateProgress": i32(),
    "worker": s(), "workerConfigSynced": b(), "workerUpdateProgress": i32(),
    "client": s(), "clientConfigSynced": b(), "clientUpdateProgress": i32(),
})

CAPACITY_STATUS = qtys("totalTFlops", "totalVRAM", "virtualTFlops", "virtualVRAM",
                       "availableTFlops", "availableVRAM", "virtualAvailableTFlops",
                       "virtualAvailableVRAM")
CAPACITY_REQUIRED = ["totalTFlops", "totalVRAM", "virtualTFlops", "virtualVRAM",
                     "availableTFlops", "availableVRAM"]

GPUPOOL_STATUS = obj({
    "cluster": s(),
    "phase": s(enum=PHASES, default="Pending"),
    "conditions": CONDITIONS,
    "componentStatus": COMPONENT_STATUS,
    "totalNodes": i32(), "totalGPUs": i32(), "readyNodes": i32(), "notReadyNodes": i32(),
    **CAPACITY_STATUS,
    "runningAppsCnt": i32(),
    "provisioningPhase": s(enum=["None", "Initializing", "Provisioning", "Completed"],
                           default="None"),
    "lastCompactionTime": date_time(), "lastDefragTime": date_time(),
    "budgetExceeded": s(default=""),
    "savedCostsPerMonth": s(), "potentialSavingsPerMonth": s(),
}, required=["phase", "componentStatus", "readyNodes", "notReadyNodes", *CAPACITY_REQUIRED])


# ---------------------------------------------------------------------------- TensorFusionCluster
CLOUD_VENDORS = ["aws", "lambda-labs", "gcp", "azure", "oracle-oci", "ibm", "openshift", "vultr",
                 "together-ai", "alibaba", "nvidia", "tencent", "runpod", "karpenter", "mock"]

TFC_SPEC = obj({
    "gpuPools": arr(obj({"name": s(), "isDefault": b(), "specTemplate": GPUPOOL_SPEC},
                        required=["specTemplate"])),
    "computingVendor": obj({
        "name": s(), "type": s(enum=CLOUD_VENDORS),
        "authType": s(enum=["accessKey", "serviceAccountRole"]),
        "enable": b(default=True),
        "params": obj({**strs("defaultRegion", "accessKeyPath", "secretKeyPath", "iamRole",
                              "configFile"), "extraParams": strmap()}),
    }),
})

TFC_STATUS = obj({
    "phase": s(enum=PHASES, default="Pending"),
    "conditions": CONDITIONS,
    "totalPools": i32(), "totalNodes": i32(), "totalGPUs": i32(),
    **CAPACITY_STATUS,
    **strs("allocatedTFlopsPercent", "allocatedVRAMPercent", "utilizedTFlopsPercent",
           "utilizedVRAMPercent", "savedCostsPerMonth", "potentialSavingsPerMonth"),
    "readyGPUPools": arr(s()), "notReadyGPUPools": arr(s()),
    "retryCount": i64(default=0),
    "cloudVendorConfigHash": s(),
}, required=["totalPools", "totalNodes", "totalGPUs", "retryCount", *CAPACITY_REQUIRED])


# ---------------------------------------------------------------------------- GPUNode and GPU
GPUNODE_SPEC = obj({
    "manageMode": s(enum=["Manual", "AutoSelect", "Provisioned"], default="AutoSelect"),
    "costPerHour": s(), "cloudVendorParam": s(), "gpuCardIndices": arr(integer()),
})

GPUNODE_STATUS = obj({
    "phase": s(enum=["Pending", "Provisioning", "Migrating", "Running", "Succeeded", "Failed",
                     "Unknown", "Destroying"], default="Pending"),
    "conditions": CONDITIONS,
    **CAPACITY_STATUS,
    "totalGPUs": i32(), "managedGPUs": i32(), "totalGPUPods": i32(),
    "managedGPUDeviceIDs": arr(s()),
    "nodeInfo": obj(qtys("ramSize", "dataDiskSize")),
    "loadedModels": arr(s()),
    "allocatedPods": mapof(arr(POD_GPU_INFO)),  # GPU id -> pods
    "hypervisorStatus": obj({"hypervisorState": s(), "hypervisorVersion": s(),
                             "lastHeartbeatTime": date_time()}),
    "observedGeneration": i64(),
}, required=["phase", "totalTFlops", "totalVRAM", "totalGPUs", "managedGPUs"])

GPU_STATUS = obj({
    "phase": s(enum=["Pending", "Provisioning", "Running", "Unknown", "Destroying", "Migrating"],
               default="Pending"),
    "capacity": GPU_RESOURCE, "available": GPU_RESOURCE,
    "uuid": s(), "gpuModel": s(), "model": s(), "vendor": s(default="NVIDIA"),
    "index": i32(), "numaNode": i32(),
    "nodeSelector": strmap(),
    "usedBy": s(enum=["tensor-fusion", "nvidia-device-plugin"]),
    "message": s(),
    "isolationMode": s(enum=ISOLATION, default="soft"),
    "isolationPolicy": s(enum=["Static", "Dynamic"]),
    # Two enums upstream, both must hold: partitioned is never an active mode.
    "activeIsolationMode": {"type": "string",
                            "allOf": [{"enum": ISOLATION}, {"enum": ISOLATION[:3]}]},
    "dynamicIsolationConflict": b(),
    "runningApps": arr(obj({**strs("name", "namespace"), "count": integer(),
                            "pods": arr(POD_GPU_INFO)}, required=["count"])),
    "allocatedPartitions": mapof(obj({  # partition id -> allocation
        **strs("templateId", "podUid", "podName", "namespace"),
        "allocatedAt": date_time(),
        "allocatedSlotStart": i32(), "allocatedSlotEnd": i32(), "isolationGroupId": i32(),
    }, required=["templateId", "podUid", "podName", "namespace", "allocatedAt"])),
    "topology": obj({"peers": arr(obj({
        "peerGPUUUID": s(), "tier": i32(), "linkType": s(), "bandwidth": i64()},
        required=["peerGPUUUID", "tier"]))}),
    "nvLink": obj({
        "peerCount": i32(), "totalLinkCount": i32(), "totalBandwidthMBps": i64(),
        "peers": arr(obj({"peerUUID": s(), "linkCount": i32(), "linkVersion": i32(),
                          "bandwidthMBps": i64()}, required=["peerUUID"]))}),
}, required=["phase", "capacity", "available", "uuid", "gpuModel", "vendor", "nodeSelector",
             "message"])


# ---------------------------------------------------------------------------- GPUNodeClaim/Class
GPUNODECLAIM_SPEC = obj({
    **strs("nodeName", "region", "zone", "instanceType", "capacityType"),
    "nodeClassRef": GROUP_KIND_REF,
    "tflopsOffered": qty(), "vramOffered": qty(), "gpuDeviceOffered": i32(),
    "extraParams": strmap(),
}, required=["tflopsOffered", "vramOffered", "gpuDeviceOffered"])
GPUNODECLAIM_STATUS = obj({"phase": s(default="Pending"), "instanceID": s()},
                          required=["phase"])


def selector_terms():
    """Cloud objects picked by id, by name or by tags."""
    return arr(obj({**strs("id", "name"), "tags": strmap()}))


GPUNODECLASS_SPEC = obj({
    "osImageType": s(enum=["Private", "Public", "System"], default="Private"),
    "osImageSelectorTerms": selector_terms(),
    "blockDeviceMappings": arr(obj({"deviceName": s(), "ebs": obj({
        **strs("volumeSize", "volumeType"),
        "deleteOnTermination": b(default=True), "encrypted": b(default=True)})})),
    "instanceProfile": s(),
    "metadataOptions": obj({
        "httpEndpoint": b(default=True), "httpProtocolIPv6": b(default=False),
        "httpPutResponseHopLimit": integer(default=1), "httpTokens": s(default="required")}),
    "securityGroupSelectorTerms": selector_terms(),
    "subnetSelectorTerms": selector_terms(),
    "tags": strmap(),
    "userData": s(),
    "launchTemplate": obj({**strs("id", "name"), "tags": strmap()}),
})


# ---------------------------------------------------------------------------- ProviderConfig
DEVICE_MOUNT = obj({"deviceMountRule": s(), "partitionedDeviceMountRule": s(),
                    "sharedDevices": arr(s())})

PROVIDER_SPEC = obj({
    "vendor": s(),
    "images": obj(strs("middleware", "remoteClient", "remoteWorker"), required=["middleware"]),
    "inUseResourceNames": arr(s()),
    "devicePluginDetection": obj({"resourceNamePrefixes": arr(s()), "usedBySystemName": s()}),
    "hardwareMetadata": arr(obj({
        **strs("model", "fullModelName", "costPerHour"), "fp16TFlops": qty(),
        "maxPartitions": i32(), "maxPlacementSlots": i32(), "maxIsolationGroups": i32(),
        "totalExtendedResources": mapof(i32()),
        "partitionTemplateRefs": arr(s()), "deviceMount": DEVICE_MOUNT,
    }, required=["model", "fullModelName", "fp16TFlops"])),
    "virtualizationTemplates": arr(obj({
        **strs("id", "name", "description", "computePercent"), "memoryGigabytes": i64(),
        "isolationGroupSharing": s(enum=["exclusive", "shared"], default="exclusive"),
        "isolationGroupSlots": i32(), "maxPartitionsPerIsolationGroup": i32(),
        "maxInstances": i32(), "nvmlProfileId": i32(), "placementOffset": i32(),
        "placementLimit": arr(i32()), "extendedResources": mapof(i32()),
    }, required=["id", "name", "computePercent", "memoryGigabytes"])),
    "hypervisor": obj({
        "ldLibraryPath": s(), "privilegedHypervisor": b(), "deviceMount": DEVICE_MOUNT,
        "extraEnv": arr(obj(strs("name", "value"), required=["name"])),
        "hostPathMounts": arr(obj({**strs("name", "hostPath", "mountPath"), "readOnly": b()},
                                  required=["name", "hostPath", "mountPath"])),
    }),
}, required=["vendor", "images"])


# ---------------------------------------------------------------------------- scheduling config
SCHEDULING_SPEC = obj({
    "placement": obj({
        "mode": s(enum=["CompactFirst", "LowLoadFirst", "NodeCompactGPULowLoad"],
                  default="NodeCompactGPULowLoad"),
        "allowUsingLocalGPU": b(default=True),
        "gpuFilters": arr(obj({"type": s(), "params": raw()})),
    }, required=["mode"]),
    "verticalScalingRules": arr(obj({"name": s(), "selector": LABEL_SELECTOR,
                                     "autoScaling": AUTO_SCALING})),
    "reBalancer": obj({"enable": b(), **strs("interval", "reBalanceCoolDownTime"),
                       "threshold": obj({"matchAny": raw()})}),
    "hypervisor": obj({
        "autoFreezeAndResume": obj({
            "autoFreeze": arr(obj({"qos": s(enum=QOS), "enable": b(),
                                   **strs("freezeToMemTTL", "freezeToDiskTTL")})),
            "intelligenceWarmup": obj({"enable": b(), **strs("model", "predictionPeriod",
                                                             "historyDataPeriod")}),
        }),
        "multiProcessQueuingParameters": obj(strs(
            "triggerPreemptDuration", "triggerResumeDuration", "computingThresholdForPreempt",
            "computingThresholdForResume", "coefficientLow", "coefficientMedium",
            "coefficientHigh", "slowStartRatio")),
        "elasticRateLimitParameters": obj(strs(
            "maxRefillRate", "minRefillRate", "filterAlpha", "kp", "ki", "kd",
            "integralDecayFactor", "burstWindow", "capacityMin", "capacityMax")),
    }),
}, required=["placement"])


# ---------------------------------------------------------------------------- quotas
GPUQUOTA_SPEC = obj({
    "total": obj({"requests": GPU_RESOURCE, "limits": GPU_RESOURCE,
                  "maxWorkers": i32(default=32768),
                  "alertThresholdPercent": i32(default=95, minimum=0, maximum=100)}),
    "single": obj({"maxRequests": GPU_RESOURCE, "maxLimits": GPU_RESOURCE,
                   "defaultRequests": GPU_RESOURCE, "defaultLimits": GPU_RESOURCE,
                   "maxGPUCount": i32()}),
})
GPUQUOTA_STATUS = obj({
    "used": obj({"requests": GPU_RESOURCE, "limits": GPU_RESOURCE, "workers": i32()}),
    "availablePercent": obj(strs("requests.tflops", "requests.vram", "limits.tflops",
                                 "limits.vram", "workers")),
    "conditions": CONDITIONS,
    "lastUpdateTime": date_time(),
})


# ---------------------------------------------------------------------------- workloads
# Shared by TensorFusionWorkload and WorkloadProfile (the first embeds the second upstream).
WORKLOAD_SPEC = obj({
    "replicas": i32(), "poolName": s(), "vendor": s(), "gpuModel": s(),
    "resources": REQUESTS_LIMITS,
    "qos": s(enum=QOS),
    "isLocalGPU": b(), "sidecarWorker": b(),
    "isolation": s(enum=ISOLATION, default="soft"),
    "partitionTemplateId": s(),
    "gpuCount": i32(minimum=1, maximum=128),
    "gpuIndices": arr(i32()),
    "autoScalingConfig": AUTO_SCALING,
    "nodeAffinity": NODE_AFFINITY,
    "workerPodTemplate": raw(),
    "gangScheduling": obj({"minMembers": i32(minimum=0), "timeout": s(),
                           "mode": s(enum=["Strict"], default="Strict")},
                          **cel(("self.minMembers == 0 || self.minMembers >= 2",
                                 "minMembers must be 0 (default to workload replicas) or >= 2"))),
}, **cel(("!has(self.gangScheduling) || self.gangScheduling.minMembers == 0 || "
          "!has(self.replicas) || self.gangScheduling.minMembers <= self.replicas",
          "gangScheduling.minMembers must be <= spec.replicas when both are set")))

WORKLOAD_STATUS = obj({
    "phase": s(enum=["Pending", "Running", "Failed", "Unknown"], default="Pending"),
    "conditions": CONDITIONS,
    "podTemplateHash": s(), "workerCount": i32(), "readyWorkers": i32(),
    "recommendation": REQUESTS_LIMITS,
    "appliedRecommendedReplicas": i32(),
    "activeCronScalingRule": CRON_SCALING_RULE,
    "gang": obj({
        "phase": s(enum=["Pending", "Waiting", "Scheduling", "Running", "TimedOut", "Failed"],
                   default="Pending"),
        **strs("groupKey", "message", "reason", "backoffUntil"),
        "desiredMembers": i32(), "scheduledMembers": i32(), "readyMembers": i32(),
        "waitingMembers": i32(), "lastTransitionTime": date_time()}),
}, required=["workerCount"])

CONNECTION_SPEC = obj(strs("workloadName", "clientPod"), required=["workloadName", "clientPod"])
CONNECTION_STATUS = obj(strs("phase", "connectionURL", "workerName"),
                        required=["phase", "connectionURL", "workerName"])


# ---------------------------------------------------------------------------- the CRDs
def col(name, path, typ="string", **kw):
    return {"name": name, "type": typ, "jsonPath": path, **kw}


def status_cols(*pairs):
    return [col(name, f".status.{field}") for name, field in pairs]


AGE = col("Age", ".metadata.creationTimestamp", "date")
CAPACITY_COLS = status_cols(("Total Tflops", "totalTFlops"), ("Total VRAM", "totalVRAM"),
                            ("Available Tflops", "availableTFlops"),
                            ("Available VRAM", "availableVRAM"))
WORKLOAD_COLS = [col("Pool Name", ".spec.poolName"), col("QoS", ".spec.qos"),
                 col("Is Local GPU", ".spec.isLocalGPU"), col("GPU Number", ".spec.gpuCount"),
                 col("Replicas", ".spec.replicas")]


def crd(kind, plural, spec, status, columns=(), scope="Cluster", status_subresource=True,
        root_required=None):
    props = {"apiVersion": s(), "kind": s(), "metadata": {"type": "object"}}
    if spec is not None:
        props["spec"] = spec
    props["status"] = status
    version = {"name": VERSION, "served": True, "storage": True,
               "subresources": {"status": {}} if status_subresource else {}}
    if columns:
        version["additionalPrinterColumns"] = list(columns)
    version["schema"] = {"openAPIV3Schema": obj(props, required=root_required)}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP, "scope": scope,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                      "singular": kind.lower()},
            "versions": [version],
        },
    }


def all_crds():
    """{plural: CustomResourceDefinition}, one per kind."""
    return {
        "tensorfusionclusters": crd("TensorFusionCluster", "tensorfusionclusters", TFC_SPEC,
                                    TFC_STATUS, [
                                        *status_cols(("Phase", "phase"),
                                                     ("Total Pools", "totalPools"),
                                                     ("Total Nodes", "totalNodes"),
                                                     ("Total GPU", "totalGPUs")),
                                        *CAPACITY_COLS]),
        "gpupools": crd("GPUPool", "gpupools", GPUPOOL_SPEC, GPUPOOL_STATUS, [
            col("Phase", ".status.phase"),
            col("TFlops Oversubscription",
                ".spec.capacityConfig.oversubscription.tflopsOversellRatio"),
            col("Mode", ".status.mode"),  # no such field upstream either: always empty
            col("Default Scheduling Strategy", ".spec.schedulingConfigTemplate"),
            col("Total Nodes", ".status.totalNodes"), col("Total GPU", ".status.totalGPUs"),
            *CAPACITY_COLS]),
        "gpunodes": crd("GPUNode", "gpunodes", GPUNODE_SPEC, GPUNODE_STATUS, [
            *status_cols(("Phase", "phase"), ("Total TFlops", "totalTFlops"),
                         ("Total VRAM", "totalVRAM"), ("Virtual TFlops", "virtualTFlops"),
                         ("Virtual VRAM", "virtualVRAM"),
                         ("Available TFlops", "availableTFlops"),
                         ("Available VRAM", "availableVRAM")),
            col("GPU Count", ".status.totalGPUs", "integer")]),
        "gpus": crd("GPU", "gpus", None, GPU_STATUS, [
            *status_cols(("GPU Model", "gpuModel"), ("Phase", "phase"),
                         ("Total TFlops", "capacity.tflops"), ("Total VRAM", "capacity.vram"),
                         ("Available TFlops", "available.tflops"),
                         ("Available VRAM", "available.vram"), ("Device UUID", "uuid"),
                         ("Used By", "usedBy"), ("Node", "nodeSelector"))]),
        "gpunodeclaims": crd("GPUNodeClaim", "gpunodeclaims", GPUNODECLAIM_SPEC,
                             GPUNODECLAIM_STATUS, [col("Phase", ".status.phase")],
                             root_required=["metadata"]),
        "gpunodeclasses": crd("GPUNodeClass", "gpunodeclasses", GPUNODECLASS_SPEC, obj()),
        "gpuresourcequotas": crd("GPUResourceQuota", "gpuresourcequotas", GPUQUOTA_SPEC,
                                 GPUQUOTA_STATUS, [
                                     # upstream: .status.used["requests.tflops"] (see ALLOWED)
                                     col("Requests TFlops Used", '.status.used["requests.tflops"]'),
                                     col("Requests VRAM Used", '.status.used["requests.vram"]'),
                                     col("Workers Used", ".status.used.workers", "integer"),
                                     col("Alert Threshold", ".spec.total.alertThresholdPercent",
                                         "integer"),
                                     AGE], scope="Namespaced"),
        # No status subresource upstream: status is written with the object itself.
        "providerconfigs": crd("ProviderConfig", "providerconfigs", PROVIDER_SPEC, obj(), [
            col("Vendor", ".spec.vendor"), AGE], status_subresource=False),
        "schedulingconfigtemplates": crd(
            "SchedulingConfigTemplate", "schedulingconfigtemplates", SCHEDULING_SPEC, obj(), [
                col("Mode", ".spec.placement.mode"),
                col("Allow Local GPU", ".spec.placement.allowLocalGPU"),
                col("AutoFreeze", ".spec.hypervisor.autoFreezeAndResume.autoFreeze.enable")]),
        # Namespaced: the webhook creates it in the Pod's namespace (docs/operator-behaviour.md 6).
        "tensorfusionworkloads": crd("TensorFusionWorkload", "tensorfusionworkloads",
                                     WORKLOAD_SPEC, WORKLOAD_STATUS, [
                                         *status_cols(("Phase", "phase"), ("Gang", "gang.phase"),
                                                      ("Worker Count", "workerCount"),
                                                      ("Ready Workers", "readyWorkers"),
                                                      ("Pod Template Hash", "podTemplateHash")),
                                         *WORKLOAD_COLS], scope="Namespaced"),
        "tensorfusionconnections": crd("TensorFusionConnection", "tensorfusionconnections",
                                       CONNECTION_SPEC, CONNECTION_STATUS, [
                                           *status_cols(("Phase", "phase"),
                                                        ("Connection URL", "connectionURL"),
                                                        ("Worker Name", "workerName")),
                                           col("Workload Name", ".spec.workloadName"),
                                           col("Client Pod", ".spec.clientPod")],
                                       scope="Namespaced"),
        "workloadprofiles": crd("WorkloadProfile", "workloadprofiles", WORKLOAD_SPEC, obj(),
                                WORKLOAD_COLS, scope="Namespaced"),
    }


class _Dumper(yaml.SafeDumper):
    """Writes a shared schema out in full wherever it is used (no YAML anchors)."""

    def ignore_aliases(self, data):
        return True


HEADER = "# Generated by `python -m lab.tensorfusion.crds`; edit lab/tensorfusion/crds.py.\n"


def write(dest: Path = CRD_DIR) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for plural, body in all_crds().items():
        text = HEADER + yaml.dump(body, Dumper=_Dumper, sort_keys=False, width=100)
        (dest / f"{GROUP}_{plural}.yaml").write_text(text)


# ---------------------------------------------------------------------------- --compare
class Allowed(NamedTuple):
    """A difference from upstream that is known and intended: ``kind`` ("*": any), a path (the
    entry covers it and everything below it), the keyword ("*": any) and why."""
    kind: str
    path: str
    what: str
    reason: str


# Empty: the lab's CRDs are upstream's, CEL rules and printer columns included. An entry names a
# difference the lab's Kubernetes could not take, with the reason.
ALLOWED: List[Allowed] = []


class Difference(NamedTuple):
    kind: str
    path: str      # "scope", "names.plural", "columns[Phase]", or a schema path such as ".spec.x"
    what: str      # the keyword that differs; "present" when one side lacks the path
    upstream: object
    lab: object


# Every keyword of a JSON schema that decides what the API server accepts, defaults or prunes.
SCHEMA_KEYS = ("type", "format", "nullable", "enum", "default", "minimum", "maximum",
               "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength",
               "pattern", "minItems", "maxItems", "uniqueItems", "minProperties",
               "maxProperties", "required", "x-kubernetes-preserve-unknown-fields",
               "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource",
               "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
               "x-kubernetes-validations")
ABSENT = "(absent)"


def _child(path, name):
    if name.replace("_", "").replace("-", "").isalnum():
        return f"{path}.{name}"
    return f"{path}[{json.dumps(name)}]"


def flatten(schema, path=""):
    """{path: {keyword: value}} for ``schema`` and every schema below it. Paths: ``.a.b`` for
    properties, ``[]`` for array items, ``{}`` for map values, ``<allOf0>`` for junctors."""
    out = {}

    def walk(node, p):
        keys = {k: node[k] for k in SCHEMA_KEYS if k in node}
        if "required" in keys:
            keys["required"] = sorted(keys["required"])
        if "enum" in keys:
            keys["enum"] = sorted(keys["enum"], key=json.dumps)
        if isinstance(node.get("additionalProperties"), bool):
            keys["additionalProperties"] = node["additionalProperties"]
        out[p or "."] = keys
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, _child(p, name))
        if isinstance(node.get("items"), dict):
            walk(node["items"], p + "[]")
        if isinstance(node.get("additionalProperties"), dict):
            walk(node["additionalProperties"], p + "{}")
        for junctor in ("allOf", "anyOf", "oneOf"):
            for i, sub in enumerate(node.get(junctor) or []):
                walk(sub, f"{p}<{junctor}{i}>")
        if isinstance(node.get("not"), dict):
            walk(node["not"], p + "<not>")

    walk(schema, path)
    return out


def _column_key(c):
    return {k: c[k] for k in ("type", "jsonPath", "format", "priority") if k in c}


def compare_crd(kind, upstream, lab) -> List[Difference]:
    out: List[Difference] = []

    def diff(path, what, up, mine):
        if up != mine:
            out.append(Difference(kind, path, what, up, mine))

    us, ls = upstream["spec"], lab["spec"]
    diff("metadata.name", "value", upstream["metadata"]["name"], lab["metadata"]["name"])
    diff("group", "value", us.get("group"), ls.get("group"))
    diff("scope", "value", us.get("scope"), ls.get("scope"))
    diff("preserveUnknownFields", "value", us.get("preserveUnknownFields", False),
         ls.get("preserveUnknownFields", False))
    for key in ("kind", "listKind", "plural", "singular", "shortNames", "categories"):
        diff(f"names.{key}", "value", us["names"].get(key, ABSENT), ls["names"].get(key, ABSENT))
    uv = {v["name"]: v for v in us.get("versions") or []}
    lv = {v["name"]: v for v in ls.get("versions") or []}
    diff("versions", "names", sorted(uv), sorted(lv))
    for name in sorted(set(uv) & set(lv)):
        u, m = uv[name], lv[name]
        where = "" if len(uv) == 1 else f"versions[{name}]."
        for key in ("served", "storage", "deprecated"):
            diff(where + key, "value", u.get(key, ABSENT), m.get(key, ABSENT))
        diff(where + "subresources", "value", u.get("subresources") or {},
             m.get("subresources") or {})
        ucols = {c["name"]: c for c in u.get("additionalPrinterColumns") or []}
        mcols = {c["name"]: c for c in m.get("additionalPrinterColumns") or []}
        for cname in sorted(set(ucols) | set(mcols)):
            diff(f"{where}columns[{cname}]", "value",
                 _column_key(ucols[cname]) if cname in ucols else ABSENT,
                 _column_key(mcols[cname]) if cname in mcols else ABSENT)
        if set(ucols) == set(mcols):
            diff(f"{where}columns", "order", list(ucols), list(mcols))
        uf = flatten(u["schema"]["openAPIV3Schema"])
        mf = flatten(m["schema"]["openAPIV3Schema"])
        only = {"upstream": set(uf) - set(mf), "lab": set(mf) - set(uf)}
        for path in sorted(set(uf) | set(mf)):
            side = next((v for v in only.values() if path in v), None)
            if side is not None:
                # The top of a missing or extra subtree, once: not every path below it.
                if not any(a in side for a in _ancestors(path)):
                    diff(where + path, "present", path in uf, path in mf)
                continue
            for key in sorted(set(uf[path]) | set(mf[path])):
                diff(where + path, key, uf[path].get(key, ABSENT), mf[path].get(key, ABSENT))
    return out


def _ancestors(path):
    """Every proper prefix of a schema path that is itself a path."""
    cuts = [i for i, ch in enumerate(path) if ch in ".[{<" and i > 0]
    return [path[:i] for i in cuts]


def load_crds(directory: Path) -> Dict[str, dict]:
    """{kind: CRD} from every YAML document of kind CustomResourceDefinition in ``directory``."""
    found = {}
    for path in sorted(directory.glob("*.y*ml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found[doc["spec"]["names"]["kind"]] = doc
    return found


def is_allowed(d: Difference, allowed=None):
    # The most specific entry first (an entry covers the paths below its own).
    for a in sorted(ALLOWED if allowed is None else allowed, key=lambda a: -len(a.path)):
        if a.kind not in ("*", d.kind) or a.what not in ("*", d.what):
            continue
        if d.path == a.path or (d.path.startswith(a.path) and d.path[len(a.path)] in ".[{<"):
            return a
    return None


def compare(upstream: Dict[str, dict], lab: Dict[str, dict]) -> List[Difference]:
    out: List[Difference] = []
    for kind in sorted(set(upstream) | set(lab)):
        if kind not in lab or kind not in upstream:
            out.append(Difference(kind, "kind", "present", kind in upstream, kind in lab))
        else:
            out.extend(compare_crd(kind, upstream[kind], lab[kind]))
    return out


def _show(value, limit=110):
    text = value if value == ABSENT else json.dumps(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def report(diffs: List[Difference], kinds, allowed=None, out=None) -> int:
    """Print every difference per kind; return how many are not allowed."""
    out = out or sys.stdout
    allowed = ALLOWED if allowed is None else allowed
    bad, used = 0, set()
    for kind in sorted(kinds):
        mine = [d for d in diffs if d.kind == kind]
        print(f"== {kind}: " + (f"{len(mine)} difference(s)" if mine else "same as upstream"),
              file=out)
        for d in mine:
            a = is_allowed(d, allowed)
            if a is None:
                bad += 1
            else:
                used.add(a)
            print(f"  {'allowed' if a else 'DIFFERS'} {d.path} {d.what}: upstream "
                  f"{_show(d.upstream)}, lab {_show(d.lab)}" + (f"  ({a.reason})" if a else ""),
                  file=out)
    for a in allowed:
        if a not in used:
            print(f"note: allow-list entry {a.kind} {a.path} {a.what} matched nothing", file=out)
    print(f"{len(diffs)} difference(s), {len(diffs) - bad} allowed, {bad} not allowed", file=out)
    return bad


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.tensorfusion.crds", description=(
        "Write lab/crds/*.yaml, or with --compare DIR compare them with upstream's CRDs."))
    parser.add_argument("--compare", metavar="DIR", nargs="?", const="", default=None,
                        help="a directory of upstream CRD YAMLs (for example extracted with "
                             "git show into /tmp); exits 1 on a difference not allowed")
    args = parser.parse_args(argv)
    if args.compare is None:
        write()
        return 0
    if not args.compare:
        parser.error("--compare needs DIR: a directory holding upstream's CRD YAML files "
                     "(e.g. charts/tensor-fusion/crds/ extracted with git show into /tmp)")
    directory = Path(args.compare)
    if not directory.is_dir():
        parser.error(f"--compare {directory}: not a directory")
    upstream = load_crds(directory)
    if not upstream:
        parser.error(f"--compare {directory}: no CustomResourceDefinition in its *.yaml files")
    lab = {body["spec"]["names"]["kind"]: body for body in all_crds().values()}
    diffs = compare(upstream, lab)
    return 1 if report(diffs, set(upstream) | set(lab)) else 0


if __name__ == "__main__":
    sys.exit(main())
