# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A batch's health gate against the cluster: the bake (a watch on the batch's GPUs, with the
Pods and Warning Events read again at intervals), the optional HTTP and Prometheus checks."""

from __future__ import annotations

import json
import time
from urllib.parse import urlencode

from ansible.module_utils.urls import open_url

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import live
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import gates
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import event_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import GateFailed
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher

# The Pods and Events are read again this often during a bake (the GPUs are watched).
SAMPLE_SECONDS = 5.0


class BatchGate:
    """Bakes one batch of nodes and says whether it passed (see gates.failures for the rules)."""

    def __init__(self, kube, observer, spec):
        self.kube = kube
        self.observer = observer
        self.spec = spec
        self.gpus = kube.resource("GPU", group=TF_GROUP)
        self.events = kube.resource("Event", api_version="v1")

    def bake(self, batch, nodes, since, deadline):
        """Watch ``nodes`` for the bake; returns the verdict {batch, nodes, passed, failures,
        bake_seconds, seconds, started}. ``since`` (a UTC datetime, the batch's start) is how far
        back Warning Events count."""
        started, t0 = utcnow(), time.monotonic()
        since = since.replace(microsecond=0)  # Events carry whole seconds
        end = t0 + self.spec["bake_seconds"]
        baseline = dict((p["metadata"].get("uid"), gates.restarts(p))
                        for p in self.observer.hypervisor_pods())
        state = {"sampled": None, "pods": [], "tf_pods": [], "events": [], "failures": []}
        watcher = ObjectWatcher(self.kube, self.gpus, label_selector="tensor-fusion.ai/managed-by in (%s)"
                                % ",".join(nodes))

        def sample():
            state["pods"] = self.observer.hypervisor_pods()
            state["tf_pods"] = [p for p in list_pages(self.kube, self.observer.pods,
                                                      label_selector="tensor-fusion.ai/enabled=true")
                                if (p.get("spec") or {}).get("nodeName") in nodes]
            state["events"] = [e for e in list_pages(self.kube, self.events, field_selector="type=Warning")
                               if (event_time(e) or since) >= since]
            state["sampled"] = time.monotonic()

        def check(objects):
            now = time.monotonic()
            final = now >= end
            if final or state["sampled"] is None or now - state["sampled"] >= SAMPLE_SECONDS:
                sample()
            pic = gates.picture(nodes, list(objects.values()), state["pods"], state["tf_pods"],
                                state["events"], baseline)
            found = gates.failures(pic, self.spec, final)
            if final and not found:
                found = self.external_failures()
            state["failures"], state["picture"] = found, pic
            return bool(found) or final, "batch %d of nodes %s: %s" % (
                batch, ", ".join(nodes), "; ".join(f["evidence"] for f in found) or "baking")

        def wakeup():
            now = time.monotonic()
            next_sample = (state["sampled"] or now) + SAMPLE_SECONDS
            return max(0.2, min(next_sample, end) - now)
        watcher.wait(check, deadline, wakeup=wakeup)
        return {"batch": batch, "nodes": list(nodes), "passed": not state["failures"],
                "failures": state["failures"], "bake_seconds": self.spec["bake_seconds"],
                "seconds": round(time.monotonic() - t0, 3),
                "started": micro_time(started)}

    def external_failures(self):
        """The HTTP and Prometheus checks, once at the end of a bake."""
        out = []
        for check in self.spec["http"]:
            status, error = _get(check["url"], check)
            if error or not gates.status_ok(check, status):
                out.append({"check": "http", "node": None, "evidence": "GET %s answered %s" % (
                    check["url"], error or status)})
        for check in self.spec["prometheus"]:
            url = check["url"].rstrip("/") + "/api/v1/query?" + urlencode({"query": check["query"]})
            status, body = _get(url, check, want_body=True)
            if status != 200 or isinstance(body, str):
                out.append({"check": "prometheus", "node": None, "evidence": "GET %s answered %s" % (
                    check["url"], body if isinstance(body, str) else status)})
                continue
            ok, evidence = gates.prometheus_verdict(check, body)
            if not ok:
                out.append({"check": "prometheus", "node": None, "evidence": evidence})
        return out


def _get(url, check, want_body=False):
    """(status, error text or parsed JSON body); never raises for an HTTP or connection error."""
    try:
        resp = open_url(url, method="GET", timeout=check.get("timeout") or 10,
                        validate_certs=check.get("validate_certs", True),
                        headers=check.get("headers") or None)
        status = resp.getcode()
        if not want_body:
            return status, None
        try:
            return status, json.loads(resp.read().decode("utf-8"))
        except ValueError as exc:
            return status, "an answer that is not JSON (%s)" % exc
    except Exception as exc:  # HTTPError carries the status; anything else is an error
        code = getattr(exc, "code", None)
        if isinstance(code, int):
            return code, ("HTTP %s" % code) if want_body else None
        return None, "%s: %s" % (type(exc).__name__, exc)


class GatedBatches:
    """A hypervisor rollout judged batch by batch. Made before the change is written: the
    hypervisor Pods that exist then are the old ones, every later Pod belongs to a batch."""

    def __init__(self, kube, observer, spec, since):
        self.gate = BatchGate(kube, observer, spec)
        self.observer = observer
        self.before = set(p["metadata"]["uid"] for p in observer.hypervisor_pods())
        self.since = since
        self.verdicts = []

    def run_to_last(self, waiter, watcher, pct, deadline):
        """Every batch but the last: wait until the operator completes it, then bake its nodes
        while the held batchInterval keeps the next batch from starting."""
        for index in range(1, rollout.batches(pct)):
            waiter.until_progress = min(100, index * pct)
            waiter.run(watcher, deadline)
            self.bake_batch(waiter, deadline)
        waiter.until_progress = 100

    def bake_batch(self, waiter, deadline):
        """Bake the nodes updated since the last gate; raises GateFailed when the gate fails."""
        gated = set(n for v in self.verdicts for n in v["nodes"])
        nodes = sorted(set(p["spec"].get("nodeName") for p in self.observer.hypervisor_pods()
                           if p["metadata"]["uid"] not in self.before and p["spec"].get("nodeName")
                           and live(p)) - gated)
        if not nodes:
            return None  # a batch of no node: progress counts batches, not nodes
        verdict = self.gate.bake(len(self.verdicts) + 1, nodes, self.since, deadline)
        self.since = utcnow()
        self.verdicts.append(verdict)
        tracker = waiter.trackers[0] if waiter.trackers else None
        waiter.timeline.append({
            "time": verdict["started"], "seconds": round(time.monotonic() - waiter.started, 3),
            "component": "hypervisor", "campaign": tracker.campaign if tracker else None,
            "progress": (tracker.progress or 0) if tracker else 0, "synced": False,
            "gate": dict((k, verdict[k]) for k in ("batch", "nodes", "passed", "seconds", "failures"))})
        if not verdict["passed"]:
            raise GateFailed(
                "the health gate of batch %d (nodes %s) failed after %ss of its %ss bake; the pool "
                "was paused before any further node rolled: %s" % (
                    verdict["batch"], ", ".join(nodes), verdict["seconds"], verdict["bake_seconds"],
                    gates.describe(verdict["failures"])), gate=verdict)
        return verdict
