# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health gates between a pool's batches, the decisions: which checks a gate runs, how long the
operator is held for it, and what in the picture of a batch's nodes fails it. No I/O here."""

from __future__ import annotations

import math

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import live, pod_ready
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.rules import custom_findings, validate_rules
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

# The operator's gap after a batch is measured against a timestamp of 1 s precision, and the
# gate needs a moment after its bake to read the picture and, if it fails, to pause the pool:
# the batch interval is held this much longer than the bake.
HOLD_MARGIN_SECONDS = 5
# GPU phases that say sharing broke; other phases than Running (Pending, Provisioning) are a
# node still coming back, which only the end of the bake judges.
BROKEN_GPU_PHASES = ("Unknown", "Failed", "Destroying")
DEFAULTS = {"bake_seconds": 30, "gpu_phase": True, "hypervisor_ready": True,
            "max_hypervisor_restarts": 0, "workloads_ready": True, "max_warning_events": 0,
            "ignore_event_reasons": [], "rules": [], "http": [], "prometheus": []}


def normalize(gates, option="gates"):
    """The gate settings with defaults, or None when no gate is asked for; raises InvalidInput
    naming ``option`` (a runbook's tfops_gates)."""
    if not gates:
        return None
    spec = dict(DEFAULTS)
    spec.update(dict((k, v) for k, v in gates.items() if v is not None))
    if not isinstance(spec["bake_seconds"], int) or spec["bake_seconds"] <= 0:
        raise InvalidInput("%s.bake_seconds must be a positive number of seconds, not %r"
                           % (option, spec["bake_seconds"]))
    for key in ("max_hypervisor_restarts", "max_warning_events"):
        if spec[key] < 0:
            raise InvalidInput("%s.%s must be 0 or more, not %s" % (option, key, spec[key]))
    rules = [dict(rule, severity=rule.get("severity") or "blocking") for rule in spec["rules"]]
    for rule in rules:
        if not rule.get("code") or not rule.get("expression"):
            raise InvalidInput("every %s.rules item needs a code and an expression: %r" % (option, rule))
    try:
        validate_rules(rules)
    except InvalidInput as exc:
        raise InvalidInput("%s.rules: %s" % (option, exc.msg))
    spec["rules"] = rules
    for check in spec["http"]:
        if not str(check.get("url") or "").startswith(("http://", "https://")):
            raise InvalidInput("%s.http url must be an http:// or https:// URL, not %r"
                               % (option, check.get("url")))
    for check in spec["prometheus"]:
        if not check.get("url") or not check.get("query"):
            raise InvalidInput("every %s.prometheus item needs a url and a query" % option)
        if check.get("max") is None and check.get("min") is None:
            raise InvalidInput("%s.prometheus query %r needs a max or a min threshold"
                               % (option, check["query"]))
    return spec


def hold_seconds(interval_seconds, bake_seconds):
    """The batchInterval that holds the operator for a gate: the bake plus the margin, or the
    pool's own interval when that is longer already."""
    return max(int(math.ceil(interval_seconds)), bake_seconds + HOLD_MARGIN_SECONDS)


def restarts(pod):
    return sum(c.get("restartCount", 0) for c in (pod.get("status") or {}).get("containerStatuses") or [])


def picture(nodes, gpus, hypervisor_pods, workload_pods, events, since_restarts):
    """What a gate judges, one entry per node of the batch (also the data of user rules):
    ``{"nodes": [{name, gpus: [{name, phase, message}], hypervisor: {name, image, ready,
    restarts}, pods: [{namespace, name, ready, phase}], events: [{kind, name, reason, message}]}]}``.

    ``since_restarts`` ({pod uid: restarts when the bake began}) makes restarts count from then."""
    by_node = dict((n, {"name": n, "gpus": [], "hypervisor": None, "pods": [], "events": []})
                   for n in nodes)
    for gpu in gpus:
        node = ((gpu.get("metadata") or {}).get("labels") or {}).get("tensor-fusion.ai/managed-by")
        if node in by_node:
            status = gpu.get("status") or {}
            by_node[node]["gpus"].append({"name": gpu["metadata"]["name"], "phase": status.get("phase"),
                                          "message": status.get("message") or ""})
    pod_node = {}
    for pod in hypervisor_pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in by_node and live(pod):
            uid = pod["metadata"].get("uid")
            by_node[node]["hypervisor"] = {
                "name": pod["metadata"]["name"], "image": pod["spec"]["containers"][0].get("image"),
                "ready": pod_ready(pod), "restarts": restarts(pod) - since_restarts.get(uid, 0)}
            pod_node[pod["metadata"]["name"]] = node
    for pod in workload_pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node in by_node and live(pod):
            by_node[node]["pods"].append({"namespace": pod["metadata"].get("namespace"),
                                          "name": pod["metadata"]["name"], "ready": pod_ready(pod),
                                          "phase": (pod.get("status") or {}).get("phase")})
            pod_node["%s/%s" % (pod["metadata"].get("namespace"), pod["metadata"]["name"])] = node
    gpu_node = dict((g["name"], n) for n, entry in by_node.items() for g in entry["gpus"])
    for event in events:
        obj = event.get("involvedObject") or {}
        name, kind = obj.get("name"), obj.get("kind")
        node = None
        if kind in ("Node", "GPUNode") and name in by_node:
            node = name
        elif kind == "GPU":
            node = gpu_node.get(name)
        elif kind == "Pod":
            node = pod_node.get(name) or pod_node.get("%s/%s" % (obj.get("namespace"), name))
        if node:
            by_node[node]["events"].append({"kind": kind, "name": name, "reason": event.get("reason"),
                                            "message": event.get("message") or ""})
    return {"nodes": [by_node[n] for n in nodes]}


def failures(pic, spec, final):
    """What fails the gate in ``pic``: [{check, node, evidence}]. ``final`` is the end of the
    bake: only then must every GPU be Running and every Pod Ready (during the bake a node may
    still be coming back); a broken GPU, a restart or a Warning Event fails it at once."""
    out = []

    def fail(check, node, evidence):
        out.append({"check": check, "node": node, "evidence": evidence})
    for entry in pic["nodes"]:
        node = entry["name"]
        if spec["gpu_phase"]:
            bad = [g for g in entry["gpus"] if g["phase"] in BROKEN_GPU_PHASES or
                   (final and g["phase"] != "Running")]
            if bad:
                fail("gpu_phase", node, "; ".join("GPU %s is %s%s" % (
                    g["name"], g["phase"], ": %s" % g["message"] if g["message"] else "") for g in bad))
        hv = entry["hypervisor"]
        if spec["hypervisor_ready"] and final and not (hv and hv["ready"]):
            fail("hypervisor_ready", node, "hypervisor Pod %s" % (
                "%s is not Ready" % hv["name"] if hv else "is missing"))
        if hv and hv["restarts"] > spec["max_hypervisor_restarts"]:
            fail("hypervisor_restarts", node, "hypervisor Pod %s restarted %d times during the bake "
                 "(at most %d allowed)" % (hv["name"], hv["restarts"], spec["max_hypervisor_restarts"]))
        if spec["workloads_ready"] and final:
            not_ready = [p for p in entry["pods"] if not p["ready"]]
            if not_ready:
                fail("workloads_ready", node, "TensorFusion Pods not Ready: %s" % ", ".join(
                    "%s/%s (%s)" % (p["namespace"], p["name"], p["phase"]) for p in not_ready))
        events = [e for e in entry["events"] if e["reason"] not in spec["ignore_event_reasons"]]
        if len(events) > spec["max_warning_events"]:
            fail("warning_events", node, "%d Warning Events (at most %d allowed): %s" % (
                len(events), spec["max_warning_events"], "; ".join(
                    "%s %s %s: %s" % (e["kind"], e["name"], e["reason"], e["message"])
                    for e in events[:5])))
    for item in custom_findings(pic, [r for r in spec["rules"] if r["severity"] == "blocking"]):
        fail("rule:%s" % item["code"], item["object"], item["message"])
    return out


def prometheus_verdict(check, body):
    """(ok, evidence) for a Prometheus-compatible instant query's JSON answer: every sample's value
    within ``min``/``max``; an empty answer or an error status fails (no data is no proof)."""
    if not isinstance(body, dict) or body.get("status") != "success":
        return False, "query %r answered %s" % (check["query"], (body or {}).get("error") or "no success status")
    data = body.get("data") or {}
    result = data.get("result")
    if data.get("resultType") == "scalar":
        values = [result[1]]
    else:
        values = [sample.get("value", [None, None])[1] for sample in result or []]
    if not values:
        return False, "query %r returned no samples" % check["query"]
    bad = []
    for value in values:
        try:
            number = float(value)
        except (TypeError, ValueError):
            bad.append(str(value))
            continue
        if (check.get("max") is not None and number > check["max"]) or \
                (check.get("min") is not None and number < check["min"]) or math.isnan(number):
            bad.append(value)
    if bad:
        return False, "query %r returned %s (min %s, max %s)" % (
            check["query"], ", ".join(bad[:5]), check.get("min"), check.get("max"))
    return True, "query %r within bounds" % check["query"]


def status_ok(check, status):
    allowed = check.get("status_codes") or []
    return status in allowed if allowed else 200 <= status < 300


def describe(found):
    return "; ".join("%s%s: %s" % (f["check"], " on %s" % f["node"] if f["node"] else "", f["evidence"])
                     for f in found)
