# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tf_acceptance's body: run the acceptance Pod - create, wait (watch, deadline), check
(cluster/acceptance.py), always clean up."""

from __future__ import annotations

import uuid

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import acceptance
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    AcceptanceFailed,
    ApiError,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher

POD_NAME = "tfops-acceptance"


def _run_pod(kube, params, check_mode, deadline):
    namespace = params.get("namespace") or "tfops-acceptance-%s" % uuid.uuid4().hex[:6]
    body = acceptance.test_pod(POD_NAME, params.get("pool"), params["image"], params["tflops_request"],
                               params["vram_request"], params["isolation"], params["is_local_gpu"])
    result = {"changed": False, "namespace": namespace, "pod": body, "checks": [], "passed": False}
    if check_mode:
        result["checks"] = [{"check": "create test Pod", "ok": True, "detail": "skipped in check mode"}]
        return result
    namespaces = kube.resource("Namespace", api_version="v1")
    pods = kube.resource("Pod", api_version="v1")
    kube.call("create", "namespaces/%s" % namespace, namespaces.create,
              body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace, "labels": {
                  "app.kubernetes.io/managed-by": "tensorfusion.ops"}}})
    try:
        # Pods are admitted only once the namespace's default ServiceAccount exists.
        ObjectWatcher(kube, kube.resource("ServiceAccount", api_version="v1"), namespace=namespace,
                      name="default").wait(lambda objs: (bool(objs), "default ServiceAccount"), deadline)
        try:
            created = kube.call("create", "pods/%s" % POD_NAME, pods.create, body=body,
                                namespace=namespace).to_dict()
        except ApiError as exc:
            result["checks"] = [{"check": "admission", "ok": False,
                                 "detail": "the Pod was refused: %s" % exc.msg}]
            return result
        result["checks"] = acceptance.injection_checks(created, params.get("pool"))
        if all(c["ok"] for c in result["checks"]):
            result["checks"].append(_wait_ready(kube, pods, namespace, deadline))
            created = kube.call("get", "pods/%s" % POD_NAME, pods.get, name=POD_NAME,
                                namespace=namespace).to_dict()
        else:
            # Not waited for: Ready or not, a Pod the webhook did not mutate fails acceptance
            # (waiting would only hold a failure back until the deadline).
            result["checks"] += [
                {"check": "webhook", "ok": False, "detail": (
                    "the Pod was not mutated as TensorFusion's webhook does: is the webhook registered "
                    "and its controller running?")},
                {"check": "Pod Ready", "ok": False, "detail": "not waited for: the Pod was not mutated"}]
        result["pod"] = _summary(created)
        result["passed"] = all(c["ok"] for c in result["checks"])
        return result
    finally:
        if not params["keep"]:
            kube.call("delete", "namespaces/%s" % namespace, namespaces.delete, name=namespace,
                      body={"propagationPolicy": "Background", "gracePeriodSeconds": 0})


def _wait_ready(kube, pods, namespace, deadline):
    watcher = ObjectWatcher(kube, pods, namespace=namespace, name=POD_NAME)

    def check(objects):
        pod = objects.get((namespace, POD_NAME))
        if pod is None:
            return False, "the Pod is gone"
        ready, failure = acceptance.ready_state(pod)
        if failure:
            raise WaitTimeout("the test Pod cannot start: %s" % failure)
        return ready, "Pod %s/%s %s" % (namespace, POD_NAME, "Ready" if ready else "not Ready yet")
    try:
        detail = watcher.wait(check, deadline)
        return {"check": "Pod Ready", "ok": True, "detail": detail}
    except WaitTimeout as exc:
        return {"check": "Pod Ready", "ok": False, "detail": exc.msg}


def _summary(pod):
    meta, spec = pod["metadata"], pod.get("spec") or {}
    return {"name": meta["name"], "namespace": meta["namespace"], "labels": meta.get("labels"),
            "annotations": meta.get("annotations"), "node": spec.get("nodeName"),
            "env": [{"name": e.get("name"), "value": e.get("value")} for c in spec.get("containers") or []
                    for e in c.get("env") or []],
            "phase": (pod.get("status") or {}).get("phase")}


def run(ctx):
    """tf_acceptance's body (core/module.py's contract): a failed check fails the task."""
    with ctx.connected() as kube:
        result = _run_pod(kube, ctx.params, ctx.check_mode, ctx.deadline)
    if not result["passed"] and not ctx.check_mode:
        failed = [c for c in result["checks"] if not c["ok"]]
        raise AcceptanceFailed("acceptance failed: %s" % "; ".join(
            "%s (%s)" % (c["check"], c["detail"]) for c in failed), api_server=kube.server, **result)
    return result
