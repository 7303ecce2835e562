"""Component hashes (docs/operator-behaviour.md 3.1): FNV-64a over canonical JSON, printed as 16
hex characters.

They change if and only if what upstream hashes changes (``internal/utils/compose.go``):
- hypervisor, pool-wide: the rendered Pod *spec* (the podTemplate's ``template.spec`` plus what the
  operator adds: image, port, ``vectorImage`` only when ``enableVector``, its own code version),
  every ProviderConfig revision, and the node isolation policy, except under the dynamic isolation
  policy (the chart's default);
- hypervisor, per node: the same rendered spec, the revision of that node's vendor only, and the
  node's resolved isolation mode;
- worker: the worker Pod spec with the worker image, plus only the hypervisor port;
- client: the injection (client image), ``operatorEndpoint``, ``patchToPod``, ``patchToContainer``.
``template.metadata`` (labels, annotations) enters no hash, so changing it starts no rollout.

The hypervisor's rendered spec starts from the template's spec, except its container list: the
operator expects exactly two containers with ``enableVector`` (the hypervisor and the vector
sidecar) and exactly one without, and when the template has another number it throws the
template's containers away and starts from bare, named ones (``hypervisor_containers``). Their
environment, resources and probes are then neither rendered nor hashed, so a change made only
there starts no rollout (docs/operator-behaviour.md 3.1).

The values are the lab's own; nothing may compare them with upstream hashes. The pool-wide
hypervisor hash and the per-node Pod hash differ by construction, as upstream.
"""
import importlib.util
import json
from pathlib import Path


def _load_quantity():
    """Go's canonical quantity text: the collection's reading of it, shared (it is checked against
    Kubernetes' own canonical forms in tests/unit/plugins/module_utils/_tfops/core/test_quantity.py).
    Loaded from its file (a pure module of the standard library only): the collection's package
    is not on the double's path."""
    path = Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "_tfops" / "core" / "quantity.py"
    spec = importlib.util.spec_from_file_location("tfops_lab_quantity", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


canonical_pod_spec = _load_quantity().canonical_pod_spec

POOL_SALT, NODE_SALT = "pool", "node"
DYNAMIC = "dynamic"
# A nil hypervisor portNumber falls back to this in the Go code (the CRD defaults it to 8000).
GO_DEFAULT_PORT = 8001


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


def template_spec(component: dict) -> dict:
    """``podTemplate.template.spec``: the only part of a component's podTemplate that is hashed,
    as upstream reads it into Go's types first: its quantities in their canonical form
    (``1000m`` is ``1``), so a quantity written another way changes no hash."""
    return canonical_pod_spec((((component or {}).get("podTemplate") or {}).get("template") or {}).get("spec") or {})


# The container names the operator gives the list it builds itself (its code defaults).
HYPERVISOR_CONTAINER, VECTOR_CONTAINER = "tensorfusion-hypervisor", "vector"


def hypervisor_containers(hv: dict) -> list:
    """The hypervisor Pod's container list before the operator fills it in: the template's own
    list when it has the count ``enableVector`` calls for (2 with the vector sidecar, 1
    without), else a list of bare containers with the code's default names, the template's
    containers dropped whole (their env, resources, probes, security context)."""
    containers = template_spec(hv).get("containers") or []
    vector = bool((hv or {}).get("enableVector"))
    if len(containers) == (2 if vector else 1):
        return containers
    return [{"name": HYPERVISOR_CONTAINER}] + ([{"name": VECTOR_CONTAINER}] if vector else [])


def hypervisor_template_spec(hv: dict) -> dict:
    """``podTemplate.template.spec`` with the container list the operator keeps
    (``hypervisor_containers``); the other fields of the spec (volumes, pull secrets,
    tolerations, ...) stay as the template has them."""
    return {**template_spec(hv), "containers": hypervisor_containers(hv)}


def hypervisor_rendered_spec(spec: dict, operator_version: str) -> dict:
    """What the operator renders into the hypervisor Pod spec (AddTFHypervisorConfAfterTemplate)."""
    hv = _component(spec, "hypervisor")
    vector = bool(hv.get("enableVector"))
    return {
        "podSpec": hypervisor_template_spec(hv),
        "image": hv.get("image", ""),
        "port": hv.get("portNumber", GO_DEFAULT_PORT),
        "enableVector": vector,
        # The vector sidecar exists only with enableVector; otherwise its image is not rendered.
        "vectorImage": hv.get("vectorImage", "") if vector else "",
        # The operator's own code and defaults shape the rendered spec (upstream #601).
        "operator": operator_version,
    }


def normalized_vendor(vendor: str) -> str:
    return (vendor or "").strip().lower()


def revisions_map(provider_revisions: str) -> dict:
    try:
        revs = json.loads(provider_revisions or "{}")
    except ValueError:
        return {}
    return {normalized_vendor(k): v for k, v in revs.items()} if isinstance(revs, dict) else {}


def node_isolation_policy(spec: dict) -> list:
    nm = (spec or {}).get("nodeManagerConfig") or {}
    return [nm.get("defaultIsolationMode") or "soft", nm.get("isolationModeRules") or []]


def hypervisor_pool_hash(spec: dict, provider_revisions: str, operator_version: str,
                         isolation_policy: str = DYNAMIC) -> str:
    """status.componentStatus.hypervisor."""
    isolation = node_isolation_policy(spec) if isolation_policy != DYNAMIC else ""
    return object_hash(POOL_SALT, hypervisor_rendered_spec(spec, operator_version),
                       revisions_map(provider_revisions), isolation)


def hypervisor_node_hash(spec: dict, provider_revisions: str, operator_version: str,
                         vendor: str, isolation_mode: str) -> str:
    """Label tensor-fusion.ai/pod-template-hash of hypervisor-<node>: per node, never equal to the
    pool hash; only the node's own vendor revision counts."""
    revision = revisions_map(provider_revisions).get(normalized_vendor(vendor), "")
    return object_hash(NODE_SALT, hypervisor_rendered_spec(spec, operator_version), revision,
                       isolation_mode)


def resolve_isolation_mode(spec: dict, node_labels: dict) -> str:
    """The first isolationModeRule whose label selector matches the node, else the default."""
    nm = (spec or {}).get("nodeManagerConfig") or {}
    for rule in nm.get("isolationModeRules") or []:
        if label_selector_matches(rule.get("selector") or {}, node_labels or {}):
            return rule.get("mode") or "soft"
    return nm.get("defaultIsolationMode") or "soft"


def label_selector_matches(selector: dict, node_labels: dict) -> bool:
    """metav1.LabelSelector semantics: matchLabels and matchExpressions all hold."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if node_labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        has = key in node_labels
        ok = {"In": has and node_labels.get(key) in values,
              "NotIn": not has or node_labels.get(key) not in values,
              "Exists": has, "DoesNotExist": not has}.get(op, False)
        if not ok:
            return False
    return True


def worker_hash(spec: dict) -> str:
    """WorkerTemplateHash: the worker Pod spec and image plus only the hypervisor port."""
    wk = _component(spec, "worker")
    return object_hash("worker", wk.get("image", ""), template_spec(wk),
                       _component(spec, "hypervisor").get("portNumber"))


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
