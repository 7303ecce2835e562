# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``kubectl rollout restart`` plus ``kubectl rollout status`` for Deployments, StatefulSets and
DaemonSets, idempotent through a "restarted after" time."""

from __future__ import annotations

import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads import decisions
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    InvalidInput,
    RolloutFailed,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher

# The TensorFusion controller Deployment carries this label in the chart, whatever its name
# (the docs say tensor-fusion-sys-controller-manager, the chart tensor-fusion-sys-controller).
TF_CONTROLLER_SELECTOR = "tensor-fusion.ai/component=operator"
# How often a rollout wait looks at the new Pods (two requests: the ReplicaSets and the Pods).
POD_CHECK_SECONDS = 10.0


def is_operator(workload):
    """The TensorFusion controller Deployment, by its label (whatever its name)."""
    return ((workload.get("metadata") or {}).get("labels") or {}).get(
        "tensor-fusion.ai/component") == "operator"


def selector_string(label_selector):
    """A LabelSelector dict as the string the list API takes (matchLabels and matchExpressions)."""
    parts = ["%s=%s" % (k, v) for k, v in sorted((label_selector.get("matchLabels") or {}).items())]
    for expr in label_selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        if op == "In":
            parts.append("%s in (%s)" % (key, ",".join(values)))
        elif op == "NotIn":
            parts.append("%s notin (%s)" % (key, ",".join(values)))
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append("!" + key)
    return ",".join(parts)


class Restarter:
    def __init__(self, kube, kind):
        if kind not in decisions.KINDS:
            raise InvalidInput("kind must be one of %s, not %s" % (", ".join(decisions.KINDS), kind))
        self.kube = kube
        self.kind = kind
        self.api = kube.resource(kind, api_version="apps/v1")
        self.pods = kube.resource("Pod", api_version="v1")

    def find(self, namespace, name=None, label_selectors=None):
        """The workloads to restart; with neither name nor selector, TensorFusion's controller."""
        if name:
            try:
                obj = self.kube.call("get", "%ss/%s" % (self.kind.lower(), name), self.api.get,
                                     name=name, namespace=namespace)
            except ApiError as exc:
                if exc.status == 404 and not exc.details.get("route_missing"):
                    raise InvalidInput("%s %s/%s does not exist" % (self.kind, namespace, name))
                raise
            return [obj.to_dict()]
        selector = ",".join(label_selectors or []) or TF_CONTROLLER_SELECTOR
        items = self.kube.call("list", self.api.name, self.api.get, namespace=namespace,
                               label_selector=selector).to_dict()["items"]
        if not items:
            raise InvalidInput("no %s in namespace %s matches %s" % (self.kind, namespace, selector))
        return sorted(items, key=lambda o: o["metadata"]["name"])

    def pods_of(self, obj):
        selector = selector_string(obj["spec"]["selector"])
        return self.kube.call("list", "pods", self.pods.get, namespace=obj["metadata"]["namespace"],
                              label_selector=selector).to_dict()["items"]

    def revision(self, obj):
        """A name for what runs now: the ReplicaSet, the StatefulSet revision, or the generation."""
        if self.kind == "StatefulSet":
            return (obj.get("status") or {}).get("updateRevision")
        if self.kind == "DaemonSet":
            return "generation-%s" % obj["metadata"].get("generation")
        rs_api = self.kube.resource("ReplicaSet", api_version="apps/v1")
        want = (obj["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/revision")
        owned = self.kube.call("list", "replicasets", rs_api.get,
                               namespace=obj["metadata"]["namespace"],
                               label_selector=selector_string(obj["spec"]["selector"])).to_dict()
        for rs in owned["items"]:
            owners = [o["uid"] for o in rs["metadata"].get("ownerReferences") or []]
            rev = (rs["metadata"].get("annotations") or {}).get("deployment.kubernetes.io/revision")
            if obj["metadata"]["uid"] in owners and rev == want:
                return rs["metadata"]["name"]
        return None

    def restart(self, obj, check_mode, wait, deadline, restarted_after=None, secret=None, restart=True):
        """Restart one workload unless every Pod already started after ``restarted_after``, or the
        Pod template already records a restart for this version of ``secret``, or ``restart`` is
        false (``kubectl rollout status`` only). Either way, with ``wait``, return only once its
        rollout is complete."""
        meta = obj["metadata"]
        annotations = decisions.template_annotations(obj)
        item = {"kind": self.kind, "namespace": meta["namespace"], "name": meta["name"],
                "old_revision": self.revision(obj), "restarted": False,
                "previous_restarted_at": annotations.get(decisions.RESTARTED_AT)}
        extra = {}
        if not restart:
            skip, reason = True, "no restart requested: rollout status only"
        elif secret is not None:
            key, version = decisions.secret_annotation(secret)
            extra[key] = version
            skip = annotations.get(key) == version
            reason = "the Pod template already records a restart for this version of Secret %s" \
                % secret["metadata"]["name"] if skip else \
                "Secret %s changed since the last restart" % secret["metadata"]["name"]
        elif restarted_after is not None:
            skip = decisions.all_started_after(self.pods_of(obj), restarted_after)
            reason = "every Pod started after %s" % restarted_after.isoformat() if skip else \
                "some Pods started before %s" % restarted_after.isoformat()
        else:
            skip, reason = False, "restart requested"
        item["reason"] = reason
        started = time.monotonic()
        if skip:
            if wait and not check_mode:
                self.wait(obj, deadline)  # an earlier run may have stopped mid-rollout
            item["new_revision"] = item["old_revision"]
            return item
        item["restarted"] = True
        if check_mode:
            item["new_revision"] = None
            return item
        stamp = utcnow().strftime("%Y-%m-%dT%H:%M:%SZ")
        patched = self.kube.call("patch", "%ss/%s" % (self.kind.lower(), meta["name"]), self.api.patch,
                                 body=decisions.restart_patch(stamp, extra), name=meta["name"],
                                 namespace=meta["namespace"],
                                 content_type="application/merge-patch+json").to_dict()
        item["restarted_at"] = stamp
        if wait:
            self.wait(patched, deadline)
            patched = self.kube.call("get", "%ss/%s" % (self.kind.lower(), meta["name"]),
                                     self.api.get, name=meta["name"],
                                     namespace=meta["namespace"]).to_dict()
        item["new_revision"] = self.revision(patched)
        item["seconds"] = round(time.monotonic() - started, 3)
        return item

    def wait(self, obj, deadline):
        meta = obj["metadata"]
        generation = int(meta.get("generation") or 0)
        watcher = ObjectWatcher(self.kube, self.api, namespace=meta["namespace"], name=meta["name"])
        first_seen = {}
        next_look = time.monotonic() + POD_CHECK_SECONDS

        def new_pods_fail(current):
            """Every POD_CHECK_SECONDS: the rollout's new Pods that keep failing to start (a
            crash loop, a pull that fails) end the wait with the cause."""
            nonlocal next_look
            if time.monotonic() < next_look:
                return
            next_look = time.monotonic() + POD_CHECK_SECONDS
            replica_set = self.revision(current) if self.kind == "Deployment" else None
            pods = decisions.current_pods(self.kind, current, self.pods_of(current), replica_set)
            lasting = decisions.lasting_failures(decisions.failing_pods(pods), first_seen, time.monotonic())
            if lasting:
                raise RolloutFailed("%s %s/%s cannot finish its rollout: its new Pods do not start: %s" % (
                    self.kind, meta["namespace"], meta["name"], "; ".join(lasting[:10])),
                    pods_not_ready=lasting)

        def check(objects):
            current = objects.get((meta["namespace"], meta["name"]))
            if current is None:
                raise InvalidInput("%s %s/%s was deleted during its rollout" % (
                    self.kind, meta["namespace"], meta["name"]))
            if int(current["metadata"].get("generation") or 0) < generation:
                return False, "%s %s/%s: waiting for generation %d" % (
                    self.kind, meta["namespace"], meta["name"], generation)
            failure = decisions.rollout_failure(self.kind, current)
            if failure:  # waiting longer cannot help: end now, with the cause
                problems = decisions.pod_problems(self.pods_of(current))
                raise RolloutFailed(failure + ("; Pods not Ready: " + "; ".join(problems[:10]) if problems else ""),
                                    pods_not_ready=problems)
            done, detail = decisions.rollout_state(self.kind, current)
            if not done:
                new_pods_fail(current)
            return done, detail

        try:
            return watcher.wait(check, deadline, wakeup=lambda: POD_CHECK_SECONDS)
        except WaitTimeout as exc:
            problems = decisions.pod_problems(self.pods_of(obj))
            if problems:
                exc.msg += "; Pods not Ready: " + "; ".join(problems[:10])
                exc.details["pods_not_ready"] = problems
            raise


def read_secret_metadata(kube, name, namespace):
    """A Secret's metadata only: the data is dropped at once so that no code path can leak it."""
    secrets = kube.resource("Secret", api_version="v1")
    secret = kube.call("get", "secrets/%s" % name, secrets.get, name=name, namespace=namespace).to_dict()
    return {"metadata": secret["metadata"]}
