# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Acceptance with a real TensorFusion Pod: the Pod to create, and what the webhook must have
injected into it (docs/operator-behaviour.md 6), as pure functions."""

from __future__ import annotations

import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import pod_ready, waiting_containers

P = "tensor-fusion.ai/"
NATIVE_GPU = re.compile(r"^(nvidia\.com|amd\.com)/gpu")


def test_pod(name, pool, image, tflops, vram, isolation, is_local_gpu):
    annotations = {P + "tflops-request": str(tflops), P + "vram-request": str(vram),
                   P + "isolation": isolation, P + "is-local-gpu": "true" if is_local_gpu else "false"}
    if pool:
        annotations[P + "gpupool"] = pool
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": {P + "enabled": "true",
                                                  "app.kubernetes.io/managed-by": "tensorfusion.ops"},
                         "annotations": annotations},
            "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                     "automountServiceAccountToken": False,  # it needs no API access
                     "containers": [{"name": "probe", "image": image,
                                     "command": ["sh", "-c", "sleep 3600"],
                                     # A native GPU limit the webhook must remove.
                                     "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def _check(name, ok, detail):
    return {"check": name, "ok": bool(ok), "detail": detail}


def injection_checks(pod, pool=None):
    """What the webhook should have done; each check says what it saw."""
    meta, spec = pod["metadata"], pod.get("spec") or {}
    labels, ann = meta.get("labels") or {}, meta.get("annotations") or {}
    container = (spec.get("containers") or [{}])[0]
    env = dict((e.get("name"), e) for e in container.get("env") or [])
    resources = container.get("resources") or {}
    native = [k for section in ("limits", "requests") for k in (resources.get(section) or {})
              if NATIVE_GPU.match(k)]
    checks = [
        _check("component label", labels.get(P + "component") in ("client", "worker"),
               "tensor-fusion.ai/component=%s" % labels.get(P + "component")),
        _check("pool label", labels.get(P + "gpupool") and (not pool or labels.get(P + "gpupool") == pool),
               "tensor-fusion.ai/gpupool=%s%s" % (labels.get(P + "gpupool"), " (expected %s)" % pool if pool else "")),
        _check("template hash label", labels.get(P + "pod-template-hash"),
               "tensor-fusion.ai/pod-template-hash=%s" % labels.get(P + "pod-template-hash")),
        _check("normalised requests", ann.get(P + "tflops-request") and ann.get(P + "vram-request")
               and ann.get(P + "gpupool") and ann.get(P + "inject-container"),
               "tflops %s, vram %s, pool %s, inject-container %s" % (
                   ann.get(P + "tflops-request"), ann.get(P + "vram-request"), ann.get(P + "gpupool"),
                   ann.get(P + "inject-container"))),
        _check("hypervisor env", "HYPERVISOR_IP" in env and "HYPERVISOR_PORT" in env,
               "HYPERVISOR_IP %s, HYPERVISOR_PORT %s" % (
                   "set" if "HYPERVISOR_IP" in env else "missing",
                   (env.get("HYPERVISOR_PORT") or {}).get("value", "missing"))),
        _check("no native GPU resource", not native,
               "native GPU resources left: %s" % ", ".join(native) if native else "removed"),
    ]
    return checks


def ready_state(pod):
    """(ready, failed reason or None) for a Pod."""
    status = pod.get("status") or {}
    if pod_ready(pod):
        return True, None
    for name, reason in waiting_containers(pod):
        if reason in ("ImagePullBackOff", "ErrImagePull", "CrashLoopBackOff",
                      "CreateContainerConfigError", "InvalidImageName"):
            return False, "%s: %s" % (name, reason)
    if status.get("phase") in ("Failed", "Succeeded"):
        return False, "phase %s" % status["phase"]
    return False, None
