"""The Pod mutating webhook of the lab (docs/operator-behaviour.md 6):
``python -m lab.tensorfusion.webhook --kubeconfig K --port P --cert C --key K``. HTTPS on
loopback; the chart registers it with ``clientConfig.url`` because the API server here cannot
reach in-cluster Services.

``mutate`` is pure (the pool, the ProviderConfig images and the workload name are handed in), the
HTTP part only fetches those and answers the AdmissionReview.
"""
import argparse
import base64
import copy
import json
import logging
import re
import ssl
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from kubernetes import client, config
from kubernetes.client.rest import ApiException

from . import hashes

P = "tensor-fusion.ai/"
NATIVE_GPU = re.compile(r"^(nvidia\.com|amd\.com|intel\.com|habana\.ai)/")
LIMITER = {"NVIDIA": "libcuda_limiter.so"}
log = logging.getLogger("tf-webhook")


class Denied(Exception):
    """The Pod is rejected with this message, as the upstream webhook errors."""


_SUFFIX = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50,
           "Ei": 2 ** 60, "m": Decimal("0.001"), "": 1, "k": 10 ** 3, "M": 10 ** 6,
           "G": 10 ** 9, "T": 10 ** 12, "P": 10 ** 15, "E": 10 ** 18}


def parse_quantity(text: str) -> Decimal:
    m = re.fullmatch(r"\s*([0-9.]+)\s*(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E|)\s*", str(text))
    if not m:
        raise Denied(f"invalid quantity {text!r}")
    return Decimal(m.group(1)) * Decimal(_SUFFIX[m.group(2)])


def normalise_quantity(text: str) -> str:
    """resource.Quantity's canonical form: ``1024Mi`` -> ``1Gi``, ``1000m`` -> ``1``."""
    value = parse_quantity(text)
    binary = re.search(r"[KMGTPE]i\s*$", str(text))
    if value != value.to_integral_value():
        return f"{int(value * 1000)}m"
    value = int(value)
    order = ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"] if binary else ["E", "P", "T", "G", "M", "k"]
    for suf in order:
        if value and value % _SUFFIX[suf] == 0:
            return f"{value // _SUFFIX[suf]}{suf}"
    return str(value)


def _env(name, value=None, field=None):
    if field:
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": field}}}
    return {"name": name, "value": str(value)}


def mutate(pod: dict, pool: dict, workload: str, middleware_image: str = "") -> dict:
    """Returns the mutated Pod. Raises Denied like the upstream webhook's errors."""
    pod = copy.deepcopy(pod)
    meta = pod.setdefault("metadata", {})
    ann = dict(meta.get("annotations") or {})
    labels = dict(meta.get("labels") or {})
    spec = pod.setdefault("spec", {})
    pool_name = pool["metadata"]["name"]
    pool_spec = pool.get("spec") or {}
    cc = pool_spec.get("componentConfig") or {}
    isolation = ann.get(P + "isolation", "soft")
    if isolation not in ("shared", "soft", "hard", "partitioned"):
        raise Denied(f"invalid isolation mode {isolation!r}")
    has_request = any(ann.get(P + k) for k in ("tflops-request", "compute-percent-request",
                                               "vram-request"))
    if not has_request and not (isolation == "shared" and ann.get(P + "gpu-count")) and \
            not (isolation == "partitioned" and ann.get(P + "partition-id")):
        raise Denied("tensor-fusion.ai/tflops-request, compute-percent-request or vram-request "
                     "annotation is required")
    containers = spec.get("containers") or []
    inject = ann.get(P + "inject-container")
    if not inject:
        if len(containers) != 1:
            raise Denied("tensor-fusion.ai/inject-container is required for a Pod with more than "
                         "one container")
        inject = containers[0]["name"]
    if inject not in {c["name"] for c in containers}:
        raise Denied(f"inject-container {inject!r} is not a container of the Pod")
    local_default = pool_spec.get("defaultUsingLocalGPU")
    is_local = ann.get(P + "is-local-gpu", "true" if local_default in (None, True) else "false")
    is_local = is_local == "true"
    # Normalised resource annotations (only the non-zero ones), limits default to requests.
    for kind in ("tflops", "vram", "compute-percent"):
        req = ann.get(f"{P}{kind}-request")
        lim = ann.get(f"{P}{kind}-limit") or req
        for key, val in ((f"{P}{kind}-request", req), (f"{P}{kind}-limit", lim)):
            if val and parse_quantity(val) != 0:
                ann[key] = normalise_quantity(val)
            else:
                ann.pop(key, None)
    vendor = ann.get(P + "vendor") or (pool_spec.get("nodeManagerConfig") or {}).get(
        "defaultVendor", "NVIDIA")
    ann.update({P + "qos": ann.get(P + "qos", "medium"),
                P + "gpu-count": ann.get(P + "gpu-count", "1"), P + "gpupool": pool_name,
                P + "is-local-gpu": "true" if is_local else "false",
                P + "sidecar-worker": ann.get(P + "sidecar-worker", "false"),
                P + "inject-container": inject, P + "isolation": isolation})
    if is_local:
        ann[P + "embedded-worker"] = "true"
        labels[P + "workload"] = workload
        spec["schedulerName"] = "tensor-fusion-scheduler"
    else:
        ann[P + "selected-workload"] = workload
    labels.update({P + "component": "worker" if is_local else "client",
                   P + "gpupool": pool_name,
                   P + "pod-template-hash": hashes.client_hash(pool_spec)})
    port = (cc.get("hypervisor") or {}).get("portNumber", 8001)
    init = list(spec.get("initContainers") or [])
    for ctr in containers:
        for section in ("limits", "requests"):
            res = (ctr.get("resources") or {}).get(section)
            if res:
                for k in [k for k in res if NATIVE_GPU.match(k)]:
                    del res[k]  # removeNativeGPULimits
        if ctr["name"] != inject:
            continue
        env = [e for e in ctr.get("env") or [] if not e.get("name", "").startswith(
            ("HYPERVISOR_", "TF_", "TENSOR_FUSION_"))]
        env += [_env("HYPERVISOR_IP", field="status.hostIP"), _env("HYPERVISOR_PORT", port),
                _env("POD_NAME", field="metadata.name"),
                _env("POD_NAMESPACE", field="metadata.namespace"),
                _env("CONTAINER_NAME", ctr["name"]), _env("TF_ISOLATION_MODE", isolation)]
        if is_local and isolation == "soft":
            env += [_env("LD_PRELOAD", f"/tensor-fusion-limiter/{LIMITER.get(vendor, 'limiter.so')}"),
                    _env("TF_SHM_PATH", "/run/tensor-fusion/shm/shm")]
            if not any(i.get("name") == "init-soft-limiter" for i in init):
                init.append({"name": "init-soft-limiter", "image": middleware_image or
                             (cc.get("hypervisor") or {}).get("image", "")})
        if not is_local:
            endpoint = (cc.get("client") or {}).get("operatorEndpoint", "")
            name, ns = meta.get("name") or meta.get("generateName", ""), meta.get("namespace", "")
            env += [_env("TF_PREPEND_PATH", "/tensor-fusion"),
                    _env("TF_LD_LIBRARY_PATH", "/tensor-fusion"),
                    _env("TENSOR_FUSION_CONNECTION_NAME", name),
                    _env("TENSOR_FUSION_CONNECTION_NAMESPACE", ns),
                    _env("TENSOR_FUSION_OPERATOR_GET_CONNECTION_URL",
                         f"{endpoint}/api/connection?name={name}&namespace={ns}")]
            if not any(i.get("name") == "inject-lib" for i in init):
                init.append({"name": "inject-lib",
                             "image": (cc.get("client") or {}).get("image", "")})
        if isolation == "hard":
            vram = ann.get(P + "vram-limit")
            if vram:
                mib = str(int(parse_quantity(vram) / 2 ** 20))
                env += [_env("TF_GPU_MEMORY_LIMIT", mib), _env("TF_CUDA_MEMORY_LIMIT", mib)]
            if ann.get(P + "compute-percent-limit"):
                env.append(_env("TF_CUDA_SM_PERCENT_LIMIT", ann[P + "compute-percent-limit"]))
        ctr["env"] = env
    if init:
        spec["initContainers"] = init
    # Lab only: tensor-fusion-scheduler places the Pod on a GPU node of its pool; in the lab that
    # scheduler is a plain profile of kube-scheduler, which knows no pools, so the pool's
    # single-value In terms become a nodeSelector it honours.
    for term in ((pool_spec.get("nodeManagerConfig") or {}).get("nodeSelector") or {}).get(
            "nodeSelectorTerms") or []:
        for expr in term.get("matchExpressions") or []:
            if expr.get("operator") == "In" and len(expr.get("values") or []) == 1:
                spec.setdefault("nodeSelector", {}).setdefault(expr["key"], expr["values"][0])
        break
    meta["labels"], meta["annotations"] = labels, ann
    return pod


def workload_spec(pod: dict, pool_name: str) -> dict:
    """The TensorFusionWorkload spec the webhook creates. Its resource quantities are Go structs
    without omitempty (the CRD requires tflops and vram on both sides, ``compute`` is optional);
    a limit not given is the request, as the webhook's parser does."""
    ann = (pod.get("metadata") or {}).get("annotations") or {}
    res = {"requests": {}, "limits": {}}
    for kind, key in (("tflops", "tflops"), ("vram", "vram"), ("compute-percent", "compute")):
        request = ann.get(f"{P}{kind}-request")
        limit = ann.get(f"{P}{kind}-limit") or request
        for section, value in (("requests", request), ("limits", limit)):
            if value:
                res[section][key] = value
            elif key != "compute":
                res[section][key] = "0"
    return {"poolName": pool_name, "resources": res, "qos": ann.get(P + "qos", "medium"),
            "gpuCount": int(ann.get(P + "gpu-count", "1")),
            "isLocalGPU": ann.get(P + "is-local-gpu") == "true",
            "isolation": ann.get(P + "isolation", "soft")}


class Backend:
    """The API reads and writes around ``mutate``."""

    def __init__(self):
        self.co = client.CustomObjectsApi()
        self.apps = client.AppsV1Api()

    def pool_for(self, pod):
        want = ((pod.get("metadata") or {}).get("annotations") or {}).get(P + "gpupool")
        pools = self.co.list_cluster_custom_object("tensor-fusion.ai", "v1", "gpupools")["items"]
        for pool in pools:
            name = pool["metadata"]["name"]
            if want == name or (not want and (pool["metadata"].get("annotations") or {}).get(
                    P + "is-default-pool") == "true"):
                return pool
        raise Denied(f"GPU pool {want!r} not found" if want else "no default GPU pool")

    def middleware_image(self, vendor):
        for pc in self.co.list_cluster_custom_object("tensor-fusion.ai", "v1",
                                                     "providerconfigs")["items"]:
            if (pc.get("spec") or {}).get("vendor", "").lower() == vendor.lower():
                return ((pc.get("spec") or {}).get("images") or {}).get("middleware", "")
        return ""

    def workload_name(self, pod, namespace):
        """Named after the top owner (a Deployment through its ReplicaSet), else the Pod."""
        meta = pod.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("controller"):
                if ref.get("kind") == "ReplicaSet":
                    try:
                        rs = self.apps.read_namespaced_replica_set(ref["name"], namespace)
                        for up in rs.metadata.owner_references or []:
                            if up.controller:
                                return up.name
                    except ApiException:
                        pass
                return ref["name"]
        return meta.get("name") or (meta.get("generateName") or "pod").rstrip("-")

    def ensure_workload(self, pod, namespace, name, pool_name):
        body = {"apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionWorkload",
                "metadata": {"name": name, "namespace": namespace,
                             "labels": {P + "gpupool": pool_name}},
                "spec": workload_spec(pod, pool_name)}
        try:
            self.co.create_namespaced_custom_object("tensor-fusion.ai", "v1", namespace,
                                                    "tensorfusionworkloads", body)
        except ApiException as exc:
            if exc.status != 409:
                raise

    def review(self, request: dict) -> dict:
        pod = request["object"]
        namespace = request.get("namespace") or pod.get("metadata", {}).get("namespace", "default")
        pod.setdefault("metadata", {}).setdefault("namespace", namespace)
        pool = self.pool_for(pod)
        vendor = (pool.get("spec", {}).get("nodeManagerConfig") or {}).get("defaultVendor", "NVIDIA")
        workload = self.workload_name(pod, namespace)
        mutated = mutate(pod, pool, workload, self.middleware_image(vendor))
        if request.get("dryRun") is not True:
            self.ensure_workload(mutated, namespace, workload, pool["metadata"]["name"])
        return mutated


def answer(review: dict, backend: Backend) -> dict:
    request = review.get("request") or {}
    resp = {"uid": request.get("uid", ""), "allowed": True}
    try:
        mutated = backend.review(request)
        patch = [{"op": "replace" if k in request["object"] else "add", "path": f"/{k}",
                  "value": mutated[k]} for k in ("metadata", "spec")]
        resp.update({"patchType": "JSONPatch",
                     "patch": base64.b64encode(json.dumps(patch).encode()).decode()})
    except Denied as exc:
        resp.update({"allowed": False, "status": {"code": 400, "message": str(exc)}})
    except Exception as exc:  # an internal error fails the request (failurePolicy decides)
        log.exception("webhook error")
        resp.update({"allowed": False, "status": {"code": 500, "message": str(exc)}})
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp}


class Handler(BaseHTTPRequestHandler):
    backend: Backend = None

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        out = json.dumps(answer(json.loads(body or b"{}"), self.backend)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    def do_GET(self):  # /healthz for start-up checks
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, fmt, *args):
        log.info("%s %s", self.address_string(), fmt % args)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    config.load_kube_config(args.kubeconfig)
    Handler.backend = Backend()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    log.info("webhook listening on https://127.0.0.1:%d", args.port)
    server.serve_forever()


if __name__ == "__main__":
    main()
