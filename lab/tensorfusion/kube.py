"""API writes of the double. Every successful write goes into the cache at once (write-through);
404 and 409 are expected races (a watch is always a little behind) and are not errors."""
import json
import logging

from kubernetes import client
from kubernetes.client.rest import ApiException

GROUP, VERSION = "tensor-fusion.ai", "v1"
PLURALS = {"tfc": "tensorfusionclusters", "pool": "gpupools", "gpunode": "gpunodes", "gpu": "gpus",
           "pc": "providerconfigs", "workload": "tensorfusionworkloads"}
log = logging.getLogger("tf-operator")
# Every write gives up after this long (then it fails and its reconcile is retried): a call left
# waiting on a connection the API server dropped while it restarted would hold a worker forever.
REQUEST_TIMEOUT = 30

ZERO = "0"
# The status fields that upstream's Go types serialise without omitempty, with their zero values:
# a status write always carries them (Status().Update sends the whole struct), and the CRDs
# require them, so a write without one is refused (422) and every later write of the object too.
REQUIRED_STATUS = {
    "tfc": {"retryCount": 0, "totalPools": 0, "totalNodes": 0, "totalGPUs": 0,
            "totalTFlops": ZERO, "totalVRAM": ZERO, "virtualTFlops": ZERO, "virtualVRAM": ZERO,
            "availableTFlops": ZERO, "availableVRAM": ZERO},
    "pool": {"phase": "Pending", "componentStatus": {}, "readyNodes": 0, "notReadyNodes": 0,
             "totalTFlops": ZERO, "totalVRAM": ZERO, "virtualTFlops": ZERO, "virtualVRAM": ZERO,
             "availableTFlops": ZERO, "availableVRAM": ZERO},
    "gpunode": {"phase": "Pending", "totalGPUs": 0, "managedGPUs": 0, "totalTFlops": ZERO,
                "totalVRAM": ZERO},
    "gpu": {"phase": "Pending", "capacity": {"tflops": ZERO, "vram": ZERO},
            "available": {"tflops": ZERO, "vram": ZERO}, "uuid": "", "gpuModel": "",
            "vendor": "", "nodeSelector": {}, "message": ""},
    "workload": {"workerCount": 0},
}


def complete_status(kind: str, current: dict, patch: dict) -> dict:
    """``patch`` (a merge patch of ``{"status": ...}``) plus every required status field that
    neither it nor the object's current status holds, at its Go zero value."""
    required = REQUIRED_STATUS.get(kind)
    if not required:
        return patch
    have = dict(((current or {}).get("status") or {}))
    fields = dict(patch.get("status") or {})
    missing = {k: v for k, v in required.items() if k not in fields and have.get(k) is None}
    if not missing:
        return patch
    return {**patch, "status": {**missing, **fields}}


def key_of(obj: dict) -> str:
    meta = obj["metadata"]
    return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]


class Api:
    """``keep(kind, key, obj)`` takes every write's response into the cache (the operator's
    ``cache``, which treats it as a watch event; by default only the store)."""

    def __init__(self, store, keep=None):
        self.store = store
        self.keep = keep or store.put
        self.co = client.CustomObjectsApi()
        self.core = client.CoreV1Api()

    def _keep(self, kind, obj):
        if isinstance(obj, dict) and obj.get("metadata"):
            self.keep(kind, key_of(obj), obj)
        return obj

    @staticmethod
    def _expected(exc: ApiException) -> bool:
        if exc.status in (404, 409):
            log.debug("expected race: %s %s", exc.status, exc.reason)
            return True
        return False

    def create(self, kind: str, body: dict):
        ns = body["metadata"].get("namespace")
        try:
            if kind == "pod":
                resp = self.core.create_namespaced_pod(ns, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
                return self._keep(kind, json.loads(resp.data))
            if ns:
                return self._keep(kind, self.co.create_namespaced_custom_object(
                    GROUP, VERSION, ns, PLURALS[kind], body, _request_timeout=REQUEST_TIMEOUT))
            return self._keep(kind, self.co.create_cluster_custom_object(
                GROUP, VERSION, PLURALS[kind], body, _request_timeout=REQUEST_TIMEOUT))
        except ApiException as exc:
            if exc.status == 409:  # already there: the cache will show it
                return None
            raise

    def patch(self, kind: str, key: str, body, status: bool = False):
        """JSON merge patch for a dict body, JSON patch for a list (the content type is set
        explicitly: the generated client would send a list as a merge patch)."""
        ns, _, name = key.rpartition("/")
        ctype = "application/json-patch+json" if isinstance(body, list) else \
            "application/merge-patch+json"
        try:
            if kind == "pod":
                resp = self.core.patch_namespaced_pod(name, ns, body, _content_type=ctype,
                                                      _preload_content=False, _request_timeout=REQUEST_TIMEOUT)
                return self._keep(kind, json.loads(resp.data))
            plural = PLURALS[kind]
            if status and isinstance(body, dict):
                body = complete_status(kind, self.store.get(kind, key), body)
            if ns:
                fn = (self.co.patch_namespaced_custom_object_status if status
                      else self.co.patch_namespaced_custom_object)
                return self._keep(kind, fn(GROUP, VERSION, ns, plural, name, body,
                                           _content_type=ctype, _request_timeout=REQUEST_TIMEOUT))
            fn = (self.co.patch_cluster_custom_object_status if status
                  else self.co.patch_cluster_custom_object)
            return self._keep(kind, fn(GROUP, VERSION, plural, name, body, _content_type=ctype,
                                       _request_timeout=REQUEST_TIMEOUT))
        except ApiException as exc:
            if self._expected(exc):
                return None
            raise

    def delete(self, kind: str, key: str, uid: str = None) -> None:
        ns, _, name = key.rpartition("/")
        opts = client.V1DeleteOptions(preconditions=client.V1Preconditions(uid=uid) if uid else None)
        try:
            if kind == "pod":
                self.core.delete_namespaced_pod(name, ns, body=opts, _preload_content=False,
                                                _request_timeout=REQUEST_TIMEOUT)
            elif ns:
                self.co.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURALS[kind], name,
                                                        body=opts, _request_timeout=REQUEST_TIMEOUT)
            else:
                self.co.delete_cluster_custom_object(GROUP, VERSION, PLURALS[kind], name, body=opts,
                                                     _request_timeout=REQUEST_TIMEOUT)
        except ApiException as exc:
            if not self._expected(exc):
                raise
