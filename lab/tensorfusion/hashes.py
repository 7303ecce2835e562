"""Component hashes (section 3.1): FNV-64a over canonical JSON, printed as 16 hex characters.

They change if and only if the fields that upstream renders into the component change. The values
are the lab's own; nothing may compare them with upstream hashes. The pool-wide hypervisor hash and
the per-node Pod hash differ by construction, as upstream.
"""
import json

POOL_SALT, NODE_SALT = "pool", "node"


def fnv64a(data: bytes) -> str:
    h = 0xcbf29ce484222325
    for byte in data:
        h ^= byte
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def object_hash(*parts) -> str:
    return fnv64a(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode())


def _component(spec: dict, name: str) -> dict:
    return ((spec or {}).get("componentConfig") or {}).get(name) or {}


def _hypervisor_inputs(spec: dict, operator_version: str) -> dict:
    hv = _component(spec, "hypervisor")
    nm = (spec or {}).get("nodeManagerConfig") or {}
    return {
        # The rendered Pod depends on these; a nil port falls back to 8001 in the Go code.
        "image": hv.get("image", ""), "vectorImage": hv.get("vectorImage", ""),
        "port": hv.get("portNumber", 8001), "enableVector": bool(hv.get("enableVector")),
        "podTemplate": hv.get("podTemplate") or {},
        # The operator's own code and defaults shape the rendered spec (upstream #601).
        "operator": operator_version,
        "isolation": [nm.get("defaultIsolationMode", "soft"), nm.get("isolationModeRules") or []],
    }


def hypervisor_pool_hash(spec: dict, provider_revisions: str, operator_version: str) -> str:
    """status.componentStatus.hypervisor: rendered spec + ProviderConfig revision map."""
    return object_hash(POOL_SALT, _hypervisor_inputs(spec, operator_version),
                       provider_revisions or "")


def hypervisor_node_hash(spec: dict, provider_revisions: str, operator_version: str,
                         vendor: str, isolation_mode: str) -> str:
    """Label tensor-fusion.ai/pod-template-hash of hypervisor-<node>: per node, never equal to the
    pool hash."""
    return object_hash(NODE_SALT, _hypervisor_inputs(spec, operator_version),
                       provider_revisions or "", vendor, isolation_mode)


def worker_hash(spec: dict) -> str:
    """WorkerTemplateHash: worker image and podTemplate plus only the hypervisor port."""
    wk = _component(spec, "worker")
    return object_hash("worker", wk.get("image", ""), wk.get("podTemplate") or {},
                       _component(spec, "hypervisor").get("portNumber", 8001))


def workload_hash(spec: dict, workload_spec: dict) -> str:
    """The per-workload hash that TensorFusionWorkload.status.podTemplateHash is compared with."""
    return object_hash("workload", worker_hash(spec), workload_spec or {})


def client_hash(spec: dict) -> str:
    """ClientTemplateHash: client image, operatorEndpoint and the two patches; the hypervisor port
    is not part of it (existing Pods keep their old HYPERVISOR_PORT)."""
    cl = _component(spec, "client")
    return object_hash("client", cl.get("image", ""), cl.get("operatorEndpoint", ""),
                       cl.get("patchToPod") or {}, cl.get("patchToContainer") or {})


def provider_spec_hash(spec: dict) -> str:
    return object_hash("provider", spec or {})
