"""The reconcilers of the operator double: TensorFusionCluster -> GPUPool, Node -> GPUNode,
GPUNode -> hypervisor Pod and GPUs, GPUPool capacity and component rollouts (the state machine in
rollout.py), ProviderConfig revisions, TensorFusionWorkload hashes, and the scheduler's gpu-ids.

All of them read the cache only and return the delay after which their key should come back.
"""
import json
import logging
import math
import random
import time
from datetime import datetime, timezone

from . import hashes, rollout

log = logging.getLogger("tf-operator")
# The operator lives in the release namespace (env OPERATOR_NAMESPACE upstream); its hypervisor
# Pods go there. This is only the default.
DEFAULT_NAMESPACE = "tensor-fusion-sys"
POOL_RECHECK_SECONDS = 2.0  # a GPUNode whose pool is not (yet) in the cache
FINALIZER = "tensor-fusion.ai/finalizer"
L_OWNER = "tensor-fusion.ai/managed-by"
L_COMPONENT = "tensor-fusion.ai/component"
L_HASH = "tensor-fusion.ai/pod-template-hash"
L_POOL = "tensor-fusion.ai/gpupool"
A_DEFAULT_POOL = "tensor-fusion.ai/is-default-pool"
A_REVISIONS = "tensor-fusion.ai/provider-config-revisions"
A_PC_HASH = "tensor-fusion.ai/provider-config-hash"
A_GPU_IDS = "tensor-fusion.ai/gpu-ids"
GPU_TFLOPS, GPU_VRAM, GPU_MODEL = 312, 80, "A100_SXM4_80GB"
# Go struct fields that are RawExtensions / opaque: passed through as they are.
RAW_KEYS = {"podTemplate", "patchToPod", "patchToContainer", "patchToEmbeddedWorkerContainer",
            "patchEmbeddedWorkerToPod", "selector", "nodeSelector", "multiVendorNodeSelector",
            "nodeProvisioner", "nodeCompaction", "qosConfig"}


def pool_label(pool: str) -> str:
    return f"tensor-fusion.ai/pool-{pool}"


def now_iso() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(obj):
    return obj.get("metadata") or {}


def labels(obj):
    return meta(obj).get("labels") or {}


def annotations(obj):
    return meta(obj).get("annotations") or {}


def deleting(obj) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def oldest_first(objs):
    return sorted(objs, key=lambda o: (meta(o).get("creationTimestamp") or "", meta(o)["name"]))


def go_struct(value):
    """What a Go struct with ``omitempty`` fields makes of a spec: zero values vanish (so the CRD
    defaults them again), RawExtensions pass through untouched."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            v = v if k in RAW_KEYS else go_struct(v)
            if v not in (None, "", 0, {}, []):  # 0 == False == 0.0
                out[k] = v
        return out
    if isinstance(value, list):
        return [go_struct(v) for v in value]
    return value


def owner_ref(obj, kind, controller=True):
    return {"apiVersion": "tensor-fusion.ai/v1" if kind != "Node" else "v1", "kind": kind,
            "name": meta(obj)["name"], "uid": meta(obj)["uid"], "controller": controller,
            "blockOwnerDeletion": True}


def pod_ready(pod) -> bool:
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


def node_ready(node) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def selector_matches(selector, node_labels) -> bool:
    """corev1.NodeSelector: terms are ORed, expressions within a term ANDed."""
    for term in (selector or {}).get("nodeSelectorTerms") or []:
        ok = True
        for expr in term.get("matchExpressions") or []:
            key, op, vals = expr.get("key"), expr.get("operator"), expr.get("values") or []
            has, val = key in node_labels, node_labels.get(key)
            ok = {"In": has and val in vals, "NotIn": not has or val not in vals,
                  "Exists": has, "DoesNotExist": not has}.get(op, False)
            if not ok:
                break
        if ok and (term.get("matchExpressions") or term.get("matchFields")):
            return True
    return False


ISOLATION_FLAGS = ("--isolation-mode", "--isolation-policy")


def _flag_value(args, flag):
    """The value of ``flag`` in a container's args (``--flag=v`` or ``--flag v``), or None."""
    args = list(args or [])
    for i, arg in enumerate(args):
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1:]
        if arg == flag:
            return args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None
    return None


def isolation_args(args, mode, policy):
    """The hypervisor container's args with its isolation mode and policy set (replaced where
    the template has them, appended otherwise); the template's other args stay."""
    out, skip = [], False
    for i, arg in enumerate(args or []):
        if skip:
            skip = False
            continue
        flag = next((f for f in ISOLATION_FLAGS if arg == f or arg.startswith(f + "=")), None)
        if flag is None:
            out.append(arg)
        elif arg == flag:
            skip = i + 1 < len(args) and not args[i + 1].startswith("-")
    return out + [f"--isolation-mode={mode}", f"--isolation-policy={policy.lower()}"]


def isolation_configured(pod, mode, policy) -> bool:
    """Whether a hypervisor Pod runs with this isolation mode and policy (its first container's
    args); the GPUNode controller replaces one that does not (docs/operator-behaviour.md 4.1)."""
    containers = (pod.get("spec") or {}).get("containers") or [{}]
    args = containers[0].get("args")
    got = _flag_value(args, "--isolation-policy")
    return _flag_value(args, "--isolation-mode") == mode and got is not None and \
        got.lower() == policy.lower()


L_VENDOR = "tensor-fusion.ai/hardware-vendor"
DRIVER_UPGRADE = "nvidia.com/gpu-driver-upgrade-state"


def node_vendor(pool_spec, gpunode) -> str:
    """The vendor whose ProviderConfig revision a node's hypervisor hash takes: a single-vendor
    pool's defaultVendor wins (a node's vendor label may be stale after a vendor change), a
    multi-vendor pool goes by the node's label; NVIDIA when nothing says."""
    nm = (pool_spec or {}).get("nodeManagerConfig") or {}
    if not nm.get("multiVendorNodeSelector") and nm.get("defaultVendor"):
        return nm["defaultVendor"]
    return labels(gpunode).get(L_VENDOR) or nm.get("defaultVendor") or "NVIDIA"


def quantity_gi(n: float) -> str:
    return f"{int(n)}Gi"


def gibibytes(quantity) -> int:
    """The lab writes VRAM as whole ``<n>Gi`` (or the Go zero value ``0``)."""
    text = str(quantity or "0")
    return int(text[:-2] if text.endswith("Gi") else text or 0)


class Controllers:
    def __init__(self, store, api, queue, knobs, gpus_per_node=1, namespace=DEFAULT_NAMESPACE):
        self.store, self.api, self.queue, self.knobs = store, api, queue, knobs
        self.gpus_per_node = gpus_per_node
        self.ns = namespace
        # Both taken from the controller Pod (operator.refresh_activity): its image tag, and its
        # TF_ISOLATION_MODE_POLICY (the binary's default when unset is static).
        self.operator_version = ""
        self.isolation_policy = "static"
        # gpunode -> (the Pod hash it waits to create, monotonic time): slow nodes. Per hash, so
        # that a wait left over from an earlier Pod (its GPUNode gone meanwhile) delays no other.
        self.create_not_before = {}
        self.stale_after_write = {}  # tfc -> _pool_marks at its last pool write (knob staleClusterStatus)
        self.first_seen = {}          # (pool, component, hash) -> monotonic time (stale status)
        self.last_note = {}

    # ------------------------------------------------------------------ TensorFusionCluster
    def reconcile_tfc(self, name):
        tfc = self.store.get("tfc", name)
        if not tfc:
            return None
        owned = [p for p in self.store.values("pool") if labels(p).get(L_OWNER) == name and any(
            r.get("name") == name and r.get("kind") == "TensorFusionCluster"
            for r in meta(p).get("ownerReferences") or [])]
        status = tfc.get("status") or {}
        if deleting(tfc):
            self._tfc_status(tfc, {"phase": "Destroying"})
            for p in owned:
                if not deleting(p):
                    self.api.delete("pool", meta(p)["name"])
            if not owned:
                return self._drop_finalizer("tfc", tfc)
            return 3.0
        if FINALIZER not in (meta(tfc).get("finalizers") or []):
            self._add_finalizer("tfc", tfc)
        if not status.get("phase"):
            self._tfc_status(tfc, {"phase": "Pending", "conditions": [
                self._cond("Ready", False, "NewCreation")]})
        changed = False
        wanted = {}
        for gp in (tfc.get("spec") or {}).get("gpuPools") or []:
            pname = f"{name}-{gp.get('name', '')}"
            wanted[pname] = gp
            template = go_struct(gp.get("specTemplate") or {})
            is_default = "true" if gp.get("isDefault") else "false"
            pool = self.store.get("pool", pname)
            if pool is None:
                body = {"apiVersion": "tensor-fusion.ai/v1", "kind": "GPUPool", "metadata": {
                    "name": pname, "labels": {**labels(tfc), L_OWNER: name},
                    "annotations": {A_DEFAULT_POOL: is_default,
                                    **self._revisions_for(template, {})},
                    "ownerReferences": [owner_ref(tfc, "TensorFusionCluster")],
                    "finalizers": [FINALIZER]}, "spec": template}
                self.api.create("pool", body)
                changed = True
            elif go_struct(pool.get("spec") or {}) != template or \
                    annotations(pool).get(A_DEFAULT_POOL) != is_default:
                # A full overwrite: direct edits of a managed GPUPool are reverted.
                # Only this one annotation: the rollout and provider ones are kept (and may
                # be newer than our cache).
                self.api.patch("pool", pname, [
                    {"op": "replace", "path": "/spec", "value": template},
                    {"op": "add", "path": "/metadata/annotations/" +
                     A_DEFAULT_POOL.replace("~", "~0").replace("/", "~1"), "value": is_default}])
                changed = True
        for p in owned:
            if meta(p)["name"] not in wanted and not deleting(p):
                self.api.delete("pool", meta(p)["name"])
                changed = True
        if changed:
            # New or changed pools may select other Nodes: the pool's write-through (an event
            # like any other, see Operator.cache) enqueues them.
            self._tfc_status(tfc, {"phase": "Updating", "conditions": [
                self._cond("Ready", False, "ResourcesUpdated")]})
            if self.knobs.stale_cluster_status:
                self.stale_after_write[name] = self._pool_marks(wanted)
            return 3.0
        pools = [self.store.get("pool", n) for n in wanted]
        not_ready = [n for n, p in zip(wanted, pools)
                     if not p or (p.get("status") or {}).get("phase") != "Running"]
        if not_ready or len(owned) != len(wanted):
            retry = int(status.get("retryCount") or 0) + 1
            # As upstream: a reason but no message, and "StillChecking" for every checked
            # condition, the true ones too.
            self._tfc_status(tfc, {
                "phase": "Updating", "retryCount": retry, "conditions": [
                    self._cond("Ready", False, "ResourcesUpdated"),
                    self._cond("GPUPoolReady", False, "StillChecking"),
                    self._cond("TimeSeriesDatabaseReady", True, "StillChecking")]})
            # Jittered exponential backoff of 3-60 s; pool events come in earlier anyway.
            return min(60.0, 3.0 * 2 ** min(retry, 5)) * random.uniform(0.8, 1.2)
        if self._requeue_dropped(name, wanted):
            return None
        st = [p.get("status") or {} for p in pools]
        self._tfc_status(tfc, {
            "phase": "Running", "retryCount": 0, "conditions": [
                self._cond("Ready", True, "CheckPassed"),
                self._cond("GPUPoolReady", True, "CheckPassed"),
                self._cond("TimeSeriesDatabaseReady", True, "CheckPassed")],
            "totalPools": len(pools), "readyGPUPools": list(wanted), "notReadyGPUPools": [],
            "totalNodes": sum(s.get("totalNodes") or 0 for s in st),
            "totalGPUs": sum(s.get("totalGPUs") or 0 for s in st),
            "totalTFlops": str(sum(int(s.get("totalTFlops") or 0) for s in st)),
            "totalVRAM": quantity_gi(sum(gibibytes(s.get("totalVRAM")) for s in st)),
            "virtualTFlops": str(sum(int(s.get("virtualTFlops") or 0) for s in st)),
            "virtualVRAM": quantity_gi(sum(gibibytes(s.get("virtualVRAM")) for s in st)),
            "availableTFlops": str(sum(int(s.get("availableTFlops") or 0) for s in st)),
            "availableVRAM": quantity_gi(sum(gibibytes(s.get("availableVRAM")) for s in st))})
        return None

    def _pool_marks(self, names):
        """What tells a pool write that started no rollout from one that did, or from a later
        change: each pool's component hashes and the annotations that are not the operator's."""
        marks = {}
        for n in names:
            pool = self.store.get("pool", n) or {}
            marks[n] = (dict(((pool.get("status") or {}).get("componentStatus") or {})),
                        {k: v for k, v in annotations(pool).items() if not k.startswith("tensor-fusion.ai/")})
        return marks

    def _requeue_dropped(self, name, wanted):
        """Knob staleClusterStatus, upstream's behaviour (docs/operator-behaviour.md 1.4): after a
        pool write that started no rollout, the requeued reconcile reads a stale cluster and
        writes nothing, so the cluster stays Updating until one of its GPUPools changes (an
        annotation will do) or the operator restarts. Only the component hashes' status fields
        are compared: a rollout moves them, and with them the cluster gets Running again."""
        recorded = self.stale_after_write.get(name)
        if recorded is None:
            return False
        now = self._pool_marks(wanted)
        hashes_moved = any(now[n][0].get(c) != recorded[n][0].get(c)
                           for n in wanted if n in recorded for c in ("hypervisor", "worker", "client"))
        if hashes_moved or any(now[n][1] != recorded[n][1] for n in wanted if n in recorded) or \
                set(recorded) != set(now):
            del self.stale_after_write[name]
            return False
        self._note(f"tfc {name}", "stale: the requeue after a pool write that started no rollout is dropped")
        return True

    def _cond(self, typ, ok, reason, message=""):
        return {"type": typ, "status": "True" if ok else "False", "reason": reason,
                "message": message, "lastTransitionTime": now_iso()}

    def _tfc_status(self, tfc, fields):
        cur = tfc.get("status") or {}
        if "conditions" in fields:
            # As meta.SetStatusCondition: each given condition replaces the one of its type
            # (its lastTransitionTime kept unless its status changed); the others stay.
            old = {c.get("type"): c for c in cur.get("conditions") or []}
            given = {c["type"]: c for c in fields["conditions"]}
            for c in given.values():
                o = old.get(c["type"])
                if o and o.get("status") == c["status"]:
                    c["lastTransitionTime"] = o.get("lastTransitionTime", c["lastTransitionTime"])
            fields = {**fields, "conditions": [given.pop(c.get("type"), c) for c in
                                               cur.get("conditions") or []] + list(given.values())}
        if all(cur.get(k) == v for k, v in fields.items()):
            return
        self.api.patch("tfc", meta(tfc)["name"], {"status": fields}, status=True)

    # ------------------------------------------------------------------ finalizers
    def _add_finalizer(self, kind, obj):
        fins = list(meta(obj).get("finalizers") or []) + [FINALIZER]
        self.api.patch(kind, meta(obj)["name"], {"metadata": {
            "finalizers": fins, "resourceVersion": meta(obj)["resourceVersion"]}})

    def _drop_finalizer(self, kind, obj):
        """Drop our finalizer; return a requeue delay while it is still there.

        The caller's copy is usually stale (it has just written the status), so the write uses the
        cache's newest version; a conflict is swallowed by the client, hence the requeue: without
        it an object whose finalizer write lost a race stays Destroying for ever."""
        fresh = self.store.get(kind, meta(obj)["name"]) or obj
        if FINALIZER not in (meta(fresh).get("finalizers") or []):
            return None
        fins = [f for f in meta(fresh).get("finalizers") or [] if f != FINALIZER]
        self.api.patch(kind, meta(fresh)["name"], {"metadata": {
            "finalizers": fins, "resourceVersion": meta(fresh)["resourceVersion"]}})
        return 1.0

    # ------------------------------------------------------------------ Node -> GPUNode
    def reconcile_node(self, name):
        node = self.store.get("node", name)
        gpunode = self.store.get("gpunode", name)
        if node is not None and (node.get("spec") or {}).get("unschedulable"):
            return None  # a cordoned Node is left as it is: no GPUNode made or removed for it
        pool = None
        if node is not None and not deleting(node):
            for p in sorted(self.store.values("pool"), key=lambda p: meta(p)["name"]):
                sel = ((p.get("spec") or {}).get("nodeManagerConfig") or {}).get("nodeSelector")
                if not deleting(p) and selector_matches(sel, labels(node)):
                    pool = p
                    break
        if gpunode is None and pool is not None:
            pname = meta(pool)["name"]
            vendor = {L_VENDOR: labels(node)[L_VENDOR]} if labels(node).get(L_VENDOR) else {}
            body = {"apiVersion": "tensor-fusion.ai/v1", "kind": "GPUNode", "metadata": {
                "name": name, "labels": {L_OWNER: pname, pool_label(pname): "true", **vendor},
                "ownerReferences": [owner_ref(pool, "GPUPool")], "finalizers": [FINALIZER]},
                "spec": {"manageMode": "AutoSelect"}}
            # Born without status (the status subresource drops it on create); its first
            # reconcile writes phase Pending together with the GPU counts.
            self.api.create("gpunode", body)
        elif gpunode is not None and node is None and not deleting(gpunode):
            self.api.delete("gpunode", name)
        return None

    # ------------------------------------------------------------------ GPUNode -> hypervisor
    def _pool_of(self, gpunode):
        return self.store.get("pool", labels(gpunode).get(L_OWNER, ""))

    def node_hash(self, pool, gpunode, memo=None):
        """The per-node Pod hash; ``memo`` shares it between the nodes of one pool reconcile
        (it depends on the node only through its vendor and its resolved isolation mode)."""
        spec = pool.get("spec") or {}
        vendor = node_vendor(spec, gpunode)
        mode = self.isolation_mode(pool, meta(gpunode)["name"])
        if memo is not None and (vendor, mode) in memo:
            return memo[(vendor, mode)]
        h = hashes.hypervisor_node_hash(spec, annotations(pool).get(A_REVISIONS, ""),
                                        self.operator_version, vendor, mode)
        if memo is not None:
            memo[(vendor, mode)] = h
        return h

    def isolation_mode(self, pool, node_name):
        """The mode the hypervisor runs in: under the dynamic policy always soft (the scheduler
        picks each GPU's mode then, so node rules neither select nor roll hypervisors), else the
        node's first matching rule or the pool's default."""
        if self.isolation_policy == hashes.DYNAMIC:
            return "soft"
        node = self.store.get("node", node_name)
        return hashes.resolve_isolation_mode(pool.get("spec") or {}, labels(node) if node else {})

    def policy_update_pending(self, pool) -> bool:
        """Whether the pool's recorded hypervisor hash is not (yet) the static-policy hash of its
        spec, or not synced: a Running node with outdated isolation args then waits for the
        rollout instead of losing its Pod at once. Under the dynamic policy the recorded hash
        is the dynamic one, so this always holds there."""
        cs = (pool.get("status") or {}).get("componentStatus") or {}
        static = hashes.hypervisor_pool_hash(pool.get("spec") or {},
                                             annotations(pool).get(A_REVISIONS, ""),
                                             self.operator_version, "static")
        return cs.get("hypervisor") != static or not cs.get("hypervisorConfigSynced")

    def reconcile_gpunode(self, name):
        gn = self.store.get("gpunode", name)
        if gn is None:
            return None
        pod_key = f"{self.ns}/hypervisor-{name}"
        pod = self.store.get("pod", pod_key)
        gpus = [g for g in self.store.values("gpu") if labels(g).get(L_OWNER) == name]
        if deleting(gn):
            if (gn.get("status") or {}).get("phase") != "Destroying":
                self.api.patch("gpunode", name, {"status": {"phase": "Destroying"}}, status=True)
            if pod is not None and not deleting(pod):
                self.api.delete("pod", pod_key)
            for g in gpus:
                if not deleting(g):
                    self.api.delete("gpu", meta(g)["name"])
            if pod is None:
                return self._drop_finalizer("gpunode", gn)
            return 2.0
        if not labels(gn).get(L_OWNER):
            return None  # no pool named: upstream logs it and does not come back
        pool = self._pool_of(gn)
        if pool is None or not (pool.get("spec") or {}).get("componentConfig"):
            # Not in the cache yet (a restarted double's listings arrive kind by kind) or not
            # filled in yet: come back, as upstream's failed pool Get does. Nothing else would
            # bring a GPUNode without a Pod back (a pool event queues Nodes, not GPUNodes).
            self._note(f"gpunode {name}", "waiting for its pool %r" % labels(gn)[L_OWNER])
            return POOL_RECHECK_SECONDS
        pname = meta(pool)["name"]
        node = self.store.get("node", name)
        phase = (gn.get("status") or {}).get("phase") or "Pending"
        upgrading = node is not None and labels(node).get(DRIVER_UPGRADE) not in (
            None, "", "upgrade-done")
        if node is None or upgrading or not node_ready(node):
            # No hypervisor work on a NotReady node or during a driver upgrade, and no phase
            # change either: a Running GPUNode stays Running while its Node is NotReady (its
            # Pod may be marked not Ready meanwhile). Only a Pod that never got to Running on a
            # NotReady node is removed. The Node's next event brings the GPUNode back. Logged,
            # as an outage's aftermath is judged by what the double saw.
            if node is not None and not upgrading and pod is not None and not deleting(pod) \
                    and (pod.get("status") or {}).get("phase") != "Running":
                self.api.delete("pod", pod_key, uid=meta(pod).get("uid"))
            if not (gn.get("status") or {}).get("phase"):
                self._set_node_phase(gn, "Pending", gpus)  # never without a phase
            self._note(f"gpunode {name}", "hypervisor reconcile skipped: node %s" % (
                "absent" if node is None else "in a driver upgrade" if upgrading
                else "not Ready"))
            return None
        desired = self.node_hash(pool, gn)
        if pod is None:
            delay = self.knobs.slow_node_delay(name)
            if delay > 0:
                waited, nb = self.create_not_before.get(name, (None, 0.0))
                if waited != desired:
                    nb = time.monotonic() + delay
                    self.create_not_before[name] = (desired, nb)
                if time.monotonic() < nb:
                    return nb - time.monotonic()
            self.create_not_before.pop(name, None)
            self._note(f"gpunode {name}", "hypervisor Pod created")
            if len(gpus) < self.gpus_per_node:  # GPUs first: one status write less per node
                self._create_gpus(gn, pname, len(gpus))
                gpus = [g for g in self.store.values("gpu") if labels(g).get(L_OWNER) == name]
            self.api.create("pod", self.hypervisor_pod(pool, gn, node, desired))
            return self._set_node_phase(gn, "Pending", gpus)
        if not isolation_configured(pod, self.isolation_mode(pool, name), self.isolation_policy):
            # Isolation args from another mode or policy: a Running node waits for the pool's
            # rollout to select it while one is due, any other node loses its Pod now.
            if not (phase == "Running" and self.policy_update_pending(pool)):
                if not deleting(pod):
                    self.api.delete("pod", pod_key, uid=meta(pod).get("uid"))
                return None
        if deleting(pod):
            return None  # the kubelet confirms the deletion; its event brings us back
        stopped = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        if phase != "Running" and (labels(pod).get(L_HASH) != desired or stopped):
            # The rollout (or a not-Ready Pod) put the node out of Running: replace the Pod.
            self.api.delete("pod", pod_key, uid=meta(pod).get("uid"))
            return None
        if len(gpus) < self.gpus_per_node:
            self._create_gpus(gn, pname, len(gpus))
            return None  # the GPU events bring us back
        return self._set_node_phase(gn, "Running" if pod_ready(pod) else "Pending", gpus, pod)

    def _note(self, subject, note):
        """Log a reconcile's outcome when it differs from the last one for ``subject``."""
        if self.last_note.get(subject) != note:
            self.last_note[subject] = note
            log.info("%s: %s", subject, note)

    def _set_node_phase(self, gn, phase, gpus, pod=None):
        n = len(gpus)
        want = {"phase": phase, "totalGPUs": n, "managedGPUs": n,
                "totalTFlops": str(GPU_TFLOPS * n), "totalVRAM": quantity_gi(GPU_VRAM * n),
                "virtualTFlops": str(GPU_TFLOPS * n * 5), "virtualVRAM": quantity_gi(GPU_VRAM * n),
                "availableTFlops": str(GPU_TFLOPS * n), "availableVRAM": quantity_gi(GPU_VRAM * n),
                "managedGPUDeviceIDs": sorted((g.get("status") or {}).get("uuid", "") for g in gpus)}
        cur = gn.get("status") or {}
        if any(cur.get(k) != v for k, v in want.items()):
            self.api.patch("gpunode", meta(gn)["name"], {"status": want}, status=True)
        gpu_phase, message = ("Running" if phase == "Running" else "Pending"), ""
        image = ((pod or {}).get("spec") or {}).get("containers", [{}])[0].get("image", "")
        if phase == "Running" and self.knobs.fails_gpus(image):
            # Fault knob: the hypervisor is Ready and the node Running (the operator goes on with
            # its batches), yet GPU sharing broke on it.
            gpu_phase, message = "Unknown", "lab fault: GPU lost under hypervisor %s" % image
        for g in gpus:  # GPU phases follow the node
            if (g.get("status") or {}).get("phase") != gpu_phase:
                self.api.patch("gpu", meta(g)["name"], {"status": {
                    "phase": gpu_phase, "message": message}}, status=True)
        return None

    def _create_gpus(self, gn, pname, have):
        name = meta(gn)["name"]
        for i in range(have, self.gpus_per_node):
            gname = f"{name}-gpu-{i}"
            uuid = "GPU-" + hashes.fnv64a(gname.encode())
            if self.store.get("gpu", gname):
                continue
            created = self.api.create("gpu", {
                "apiVersion": "tensor-fusion.ai/v1", "kind": "GPU", "metadata": {
                    "name": gname, "labels": {L_OWNER: name, L_POOL: pname},
                    "ownerReferences": [owner_ref(gn, "GPUNode")]}})
            if created:
                cap = {"tflops": str(GPU_TFLOPS), "vram": quantity_gi(GPU_VRAM)}
                self.api.patch("gpu", gname, {"status": {
                    "phase": "Pending", "capacity": cap, "available": dict(cap), "uuid": uuid,
                    "gpuModel": GPU_MODEL, "vendor": "NVIDIA", "index": i,
                    "nodeSelector": {"kubernetes.io/hostname": name}, "usedBy": "tensor-fusion",
                    "isolationPolicy": "Static", "activeIsolationMode": "soft"}}, status=True)

    def hypervisor_pod(self, pool, gn, node, node_hash):
        spec = pool.get("spec") or {}
        hv = (spec.get("componentConfig") or {}).get("hypervisor") or {}
        tmpl = ((hv.get("podTemplate") or {}).get("template")) or {}
        # The template's containers, or bare ones when their count does not fit enableVector
        # (the same rule the hash follows, hashes.hypervisor_containers).
        tspec = json.loads(json.dumps(hashes.hypervisor_template_spec(hv)))
        containers = tspec["containers"]
        vector = bool(hv.get("enableVector"))
        if vector:
            # An empty vectorImage (or hypervisor image) leaves the template's own image.
            containers[1] = {**containers[1], "image": hv.get("vectorImage") or containers[1].get(
                "image") or "docker.io/timberio/vector:latest-alpine"}
        port = hv.get("portNumber", hashes.GO_DEFAULT_PORT)
        mode = self.isolation_mode(pool, meta(gn)["name"])
        c0 = dict(containers[0])
        c0.update({"image": hv.get("image") or c0.get("image") or
                   "tensorfusion/tensor-fusion-hypervisor:latest",
                   "args": isolation_args(c0.get("args"), mode, self.isolation_policy),
                   "ports": [{"name": "http", "containerPort": port}]})
        c0.setdefault("readinessProbe", {"httpGet": {"path": "/readyz", "port": port},
                                         "initialDelaySeconds": 5, "periodSeconds": 15})
        tspec.update({"nodeName": meta(gn)["name"], "hostNetwork": True, "hostPID": True,
                      "terminationGracePeriodSeconds": 5, "restartPolicy": "Always",
                      "containers": [c0] + containers[1:]})
        tspec.setdefault("initContainers", [{"name": "init-shm", "image": c0["image"]}])
        pname = meta(pool)["name"]
        owners = [owner_ref(gn, "GPUNode")]
        if node is not None:
            owners.append(owner_ref(node, "Node", controller=False))
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": f"hypervisor-{meta(gn)['name']}", "namespace": self.ns,
            "labels": {**((tmpl.get("metadata") or {}).get("labels") or {}),
                       L_COMPONENT: "hypervisor", pool_label(pname): "true", L_HASH: node_hash},
            "annotations": (tmpl.get("metadata") or {}).get("annotations") or {},
            "ownerReferences": owners}, "spec": tspec}

    # ------------------------------------------------------------------ GPUPool
    def reconcile_pool(self, name):
        pool = self.store.get("pool", name)
        if pool is None:
            return None
        nodes = [n for n in self.store.values("gpunode") if labels(n).get(pool_label(name)) == "true"]
        if deleting(pool):
            self._pool_status(pool, {"phase": "Destroying"})
            for n in nodes:
                if not deleting(n):
                    self.api.delete("gpunode", meta(n)["name"])
            if not nodes:
                return self._drop_finalizer("pool", pool)
            return 2.0
        if FINALIZER not in (meta(pool).get("finalizers") or []):
            self._add_finalizer("pool", pool)
        pool = self._ensure_revisions(pool)
        live = [n for n in nodes if not deleting(n)]
        # Capacity and phase count every GPUNode of the pool, one being deleted too (it is
        # Destroying, so the pool is Updating until it is gone); the rollouts only live ones.
        self._pool_capacity(pool, nodes)
        spec = pool.get("spec") or {}
        if not spec.get("componentConfig"):
            log.error("pool %s: missing componentconfig in pool spec", name)
            return 30.0
        waits = [w for w in (self._component(pool, c, live) for c in rollout.COMPONENTS)
                 if w is not None]
        return min(waits) if waits else None

    def _pool_capacity(self, pool, nodes):
        spec = pool.get("spec") or {}
        ready = [n for n in nodes if (n.get("status") or {}).get("phase") == "Running"]
        gpus = sum(int((n.get("status") or {}).get("totalGPUs") or 0) for n in ready)
        if nodes:
            phase = "Running" if len(ready) == len(nodes) else "Updating"
        else:
            mins = (spec.get("capacityConfig") or {}).get("minResources") or {}
            phase = "Running" if str(mins.get("tflops", 0)) in ("0", "") and \
                str(mins.get("vram", 0)) in ("0", "") else "Updating"
        self._pool_status(pool, {
            "phase": phase, "totalNodes": len(nodes), "totalGPUs": gpus,
            "readyNodes": len(ready), "notReadyNodes": len(nodes) - len(ready),
            "totalTFlops": str(GPU_TFLOPS * gpus), "totalVRAM": quantity_gi(GPU_VRAM * gpus),
            "virtualTFlops": str(GPU_TFLOPS * gpus * 5), "virtualVRAM": quantity_gi(GPU_VRAM * gpus),
            "availableTFlops": str(GPU_TFLOPS * gpus), "availableVRAM": quantity_gi(GPU_VRAM * gpus)})

    def _pool_status(self, pool, fields):
        cur = pool.get("status") or {}
        if all(cur.get(k) == v for k, v in fields.items()):
            return
        self.api.patch("pool", meta(pool)["name"], {"status": fields}, status=True)

    def _revisions_for(self, spec, current):
        """The revisions annotation for a pool spec: the recorded hash of every ProviderConfig of
        the pool's vendor that ``current`` (a revision map) lacks; {} when nothing is missing."""
        vendor = ((spec or {}).get("nodeManagerConfig") or {}).get("defaultVendor", "NVIDIA")
        revs = dict(current)
        for pc in self.store.values("pc"):
            h = annotations(pc).get(A_PC_HASH)
            v = (pc.get("spec") or {}).get("vendor", "")
            v = hashes.normalized_vendor(v)
            if h and v == hashes.normalized_vendor(vendor) and v not in revs:
                revs[v] = h
        if revs == current:
            return {}
        return {A_REVISIONS: json.dumps(revs, sort_keys=True, separators=(",", ":"))}

    def _ensure_revisions(self, pool):
        """A pool that can use a vendor whose ProviderConfig has been processed carries its
        revision (the ProviderConfig reconciler moves it on later changes)."""
        missing = self._revisions_for(pool.get("spec"),
                                      json.loads(annotations(pool).get(A_REVISIONS) or "{}"))
        if missing:
            return self.api.patch("pool", meta(pool)["name"],
                                  {"metadata": {"annotations": missing}}) or pool
        return pool

    def pool_hash(self, pool, component):
        spec = pool.get("spec") or {}
        if component == "hypervisor":
            return hashes.hypervisor_pool_hash(spec, annotations(pool).get(A_REVISIONS, ""),
                                               self.operator_version, self.isolation_policy)
        return hashes.worker_hash(spec) if component == "worker" else hashes.client_hash(spec)

    def _resources(self, pool, component, nodes):
        name = meta(pool)["name"]
        spec = pool.get("spec") or {}
        if component == "hypervisor":
            stale, updated, memo = [], 0, {}
            for n in oldest_first(nodes):
                pod = self.store.get("pod", f"{self.ns}/hypervisor-{meta(n)['name']}")
                if pod is not None and labels(pod).get(L_HASH) == self.node_hash(pool, n, memo):
                    updated += 1
                else:
                    stale.append(meta(n)["name"])
            recheck = any((n.get("status") or {}).get("phase", "Pending") == "Pending" for n in nodes)
            return rollout.Resources(len(nodes), updated, recheck, stale)
        if component == "worker":
            wls = [w for w in self.store.values("workload") if labels(w).get(L_POOL) == name]
            stale = [f"{meta(w)['namespace']}/{meta(w)['name']}" for w in oldest_first(wls)
                     if (w.get("status") or {}).get("podTemplateHash") !=
                     hashes.workload_hash(spec, w.get("spec"))]
            recheck = any(not (w.get("status") or {}).get("podTemplateHash") for w in wls)
            return rollout.Resources(len(wls), len(wls) - len(stale), recheck, stale)
        want = hashes.client_hash(spec)
        pods = [p for p in self.store.values("pod") if labels(p).get("tensor-fusion.ai/enabled") ==
                "true" and labels(p).get(L_POOL) == name]
        stale = [f"{meta(p)['namespace']}/{meta(p)['name']}" for p in oldest_first(pods)
                 if labels(p).get(L_HASH) != want]
        return rollout.Resources(len(pods), len(pods) - len(stale),
                                 any(deleting(p) for p in pods), stale)

    def _component(self, pool, component, nodes):
        name = meta(pool)["name"]
        h = self.pool_hash(pool, component)
        cur = rollout.state_from_pool(pool, component)
        stale_for = self.knobs.stale_status_seconds
        if cur.hash and h != cur.hash and stale_for > 0:
            # Fault knob: keep reporting the previous (possibly synced) status for a while.
            seen = self.first_seen.setdefault((name, component, h), time.monotonic())
            if time.monotonic() - seen < stale_for:
                return seen + stale_for - time.monotonic()
        d = rollout.manage_update(cur, h, rollout.policy_from_pool(pool.get("spec"), component),
                                  self._resources(pool, component, nodes), time.time(),
                                  gap_floor=self.knobs.gap_floor,
                                  recheck_after=self.knobs.pending_recheck)
        self._note(f"pool {name} {component}", d.note)
        if d.started is not None and d.annotations != d.started:
            k_prog, k_last = rollout.annotation_keys(component)
            pool = self.api.patch("pool", name, {"metadata": {"annotations": {
                k_prog: d.started["in_progress"], k_last: d.started["last_time"]}}}) or pool
        if d.annotations is not None:
            k_prog, k_last = rollout.annotation_keys(component)
            want = {k_prog: d.annotations["in_progress"], k_last: d.annotations["last_time"]}
            if any(annotations(pool).get(k) != v for k, v in want.items()):
                pool = self.api.patch("pool", name, {"metadata": {"annotations": want}}) or pool
        if d.status is not None:
            patch = rollout.component_status_patch(component, d.status)
            cs = (pool.get("status") or {}).get("componentStatus") or {}
            if any(cs.get(k) != v for k, v in patch.items()):
                sent = time.time()
                self.api.patch("pool", name, {"status": {"componentStatus": patch}}, status=True)
                # Benchmarks (bench/) time "done" from this line: epoch seconds of the status
                # write's request and of its acknowledgement.
                log.info("status-write pool=%s component=%s hash=%s progress=%d synced=%s "
                         "sent=%.6f acked=%.6f", name, component, d.status.hash, d.status.progress,
                         str(bool(d.status.synced)).lower(), sent, time.time())
        for key in d.update:
            if component == "hypervisor":
                self.api.patch("gpunode", key, {"status": {"phase": "Pending"}}, status=True)
            elif component == "worker":
                self.api.patch("workload", key, {"status": {"podTemplateHash": ""}}, status=True)
            else:
                self.api.delete("pod", key)
        if d.update and component != "hypervisor":
            return 3.0
        return d.requeue_after

    # ------------------------------------------------------------------ ProviderConfig
    def reconcile_pc(self, name):
        pc = self.store.get("pc", name)
        if pc is None or deleting(pc):
            return None
        spec = pc.get("spec") or {}
        h = hashes.provider_spec_hash(spec)
        if annotations(pc).get(A_PC_HASH) == h:
            return None  # recorded: a restart does not trigger a new rollout
        vendor = spec.get("vendor", "")
        for pool in self.store.values("pool"):
            pv = ((pool.get("spec") or {}).get("nodeManagerConfig") or {}).get("defaultVendor",
                                                                               "NVIDIA")
            if pv.lower() != vendor.lower():
                continue
            revs = json.loads(annotations(pool).get(A_REVISIONS) or "{}")
            revs[hashes.normalized_vendor(vendor)] = h
            self.api.patch("pool", meta(pool)["name"], {"metadata": {"annotations": {
                A_REVISIONS: json.dumps(revs, sort_keys=True, separators=(",", ":"))}}})
        self.api.patch("pc", name, {"metadata": {"annotations": {A_PC_HASH: h}}})
        return None

    # ------------------------------------------------------------------ TensorFusionWorkload
    def reconcile_workload(self, key):
        wl = self.store.get("workload", key)
        if wl is None or deleting(wl):
            return None
        pool = self.store.get("pool", (wl.get("spec") or {}).get("poolName") or
                              labels(wl).get(L_POOL, ""))
        if pool is None:
            return None
        want = hashes.workload_hash(pool.get("spec") or {}, wl.get("spec"))
        st = wl.get("status") or {}
        if st.get("podTemplateHash") != want:
            # Webhook-made workloads are dynamic: no Pod is restarted, the hash is just stored.
            self.api.patch("workload", key, {"status": {"podTemplateHash": want,
                                                        "phase": "Running"}}, status=True)
        return None

    # ------------------------------------------------------------------ scheduler stand-in
    def reconcile_tfpod(self, key):
        """What tensor-fusion-scheduler adds once a TF Pod is bound: the GPUs it got."""
        pod = self.store.get("pod", key)
        if pod is None or deleting(pod) or A_GPU_IDS in annotations(pod):
            return None
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            return None
        gpus = sorted(meta(g)["name"] for g in self.store.values("gpu")
                      if labels(g).get(L_OWNER) == node)
        if not gpus:
            return 2.0
        count = int(annotations(pod).get("tensor-fusion.ai/gpu-count") or 1)
        self.api.patch("pod", key, {"metadata": {"annotations": {
            A_GPU_IDS: ",".join(gpus[:max(1, math.ceil(count))])}}})
        return None
