# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health findings over the gathered picture of a TensorFusion installation, as pure functions.

Each finding: code, severity (blocking / warning / info), object, and a sentence a person can act on."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.isolation_policy import BINARY_DEFAULT
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.stale import stale
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.chart_drift import describe
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.rules import SEVERITIES, finding


def _cluster_findings(data):
    out = []
    for tfc in data["clusters"]:
        # A cluster whose pools tensorfusion.ops paused is not Running either: ROLLOUT_PAUSED says why,
        # and any other pool that is not Running still blocks through POOL_NOT_RUNNING.
        paused = [p for p in paused_by_us(data) if p.startswith(tfc["name"] + "-")]
        left_behind = stale(tfc, data["pools"]) if tfc["phase"] != "Running" else None
        if left_behind:
            out.append(finding("CLUSTER_STATUS_STALE", "warning", "tensorfusioncluster/%s" % tfc["name"], left_behind))
        elif tfc["phase"] != "Running" and not paused:
            out.append(dict(finding("CLUSTER_NOT_RUNNING", "blocking", "tensorfusioncluster/%s" % tfc["name"],
                                    "TensorFusionCluster %s is %s, not Running: wait for its pools, or "
                                    "look at the pools' findings" % (tfc["name"], tfc["phase"] or "without a phase")),
                            pools=["%s-%s" % (tfc["name"], pool) for pool in tfc.get("pools") or []]))
    return out


# A chart upgrade that keeps the live pools (helm_release keep_pools) reverts none of this.
UNLESS_KEPT = " unless it keeps the live pools (keep_pools, on by default in the runbooks)"


def _chart_findings(data):
    """What the next chart upgrade would revert (POOL_DRIFTS_FROM_CHART, one finding per pool
    entry), or that it could not be checked (POOL_DRIFT_UNCHECKED)."""
    out = []
    for tfc in data["clusters"]:
        drift, owner = tfc.get("chart_drift"), tfc.get("helm_release")
        if not drift:
            continue
        obj = "tensorfusioncluster/%s" % tfc["name"]
        release = "Helm release %s/%s" % (owner["namespace"], owner["name"])
        if drift["unchecked"]:
            out.append(finding("POOL_DRIFT_UNCHECKED", "info", obj,
                               "TensorFusionCluster %s is owned by %s, but what a chart upgrade would revert "
                               "of its live pools is unknown: %s" % (tfc["name"], release, drift["unchecked"])))
            continue
        rendering = "%s revision %s" % (release, drift["revision"])
        by_pool = {}
        for diff in drift["differences"]:
            by_pool.setdefault(diff["pool"], []).append(diff)
        for pool, diffs in by_pool.items():
            where = "TensorFusionCluster %s pool %s" % (tfc["name"], pool if pool is not None else "(unnamed)")
            if diffs[0].get("only") == "live":
                message = "%s is not in the rendering of %s: the next chart upgrade that changes the " \
                          "rendered pools removes it%s" % (where, rendering, UNLESS_KEPT)
            elif diffs[0].get("only") == "rendered":
                message = "%s is in the rendering of %s but not live: the next chart upgrade that " \
                          "changes the rendered pools adds it back%s" % (where, rendering, UNLESS_KEPT)
            else:
                message = "%s differs from the rendering of %s, which the next chart upgrade that changes " \
                          "the rendered pools puts back%s (set these in the chart's values to keep them): %s" % (
                              where, rendering, UNLESS_KEPT, "; ".join(describe(d) for d in diffs))
            out.append(finding("POOL_DRIFTS_FROM_CHART", "warning", obj, message))
    return out


def paused_by_us(data):
    """{GPUPool name: [components]} that tensorfusion.ops paused at a deadline and that are still
    paused (autoUpdate off): the clusters' marker alone may outlive a run that turned the flag on."""
    marked = dict(("%s-%s" % (tfc["name"], pool), comps)
                  for tfc in data["clusters"] for pool, comps in (tfc.get("paused") or {}).items())
    out = {}
    for pool in data["pools"]:
        comps = [c for c in marked.get(pool["name"], [])
                 if not (pool["components"].get(c) or {}).get("auto_update")]
        if comps:
            out[pool["name"]] = comps
    return out


def _pool_findings(data):
    out = []
    paused = paused_by_us(data)
    for pool in data["pools"]:
        name = "gpupool/%s" % pool["name"]
        if paused.get(pool["name"]):
            out.append(finding("ROLLOUT_PAUSED", "warning", name,
                               "GPUPool %s: the %s rollout was paused by tensorfusion.ops when a deadline "
                               "ended its wait; the next run of the same change resumes and finishes it" % (
                                   pool["name"], ", ".join(paused[pool["name"]]))))
        if pool["phase"] != "Running" and not paused.get(pool["name"]):
            out.append(dict(finding("POOL_NOT_RUNNING", "blocking", name,
                                    "GPUPool %s is %s: a pool is Running only when all its GPUNodes are; "
                                    "do not start a change before it is" % (pool["name"], pool["phase"] or "without a phase")),
                            pool=pool["name"]))
        for comp, state in sorted(pool["components"].items()):
            # An in-progress hash next to a synced status is a campaign the operator abandoned
            # (its hash went back before it started); only an unsynced one is running.
            if comp in paused.get(pool["name"], []):
                continue  # reported once above as ROLLOUT_PAUSED
            if state["in_progress"] and not state["synced"]:
                # The component and the image the pool's spec has: a run that asks for exactly
                # that adopts the campaign (runbook/decisions.split_findings).
                out.append(dict(finding("ROLLOUT_IN_PROGRESS", "blocking", name,
                                        "GPUPool %s: a %s rollout (campaign %s) is in progress at %d%%; "
                                        "let it finish or roll it back first" % (
                                            pool["name"], comp, state["in_progress"], state["progress"])),
                                pool=pool["name"], component=comp, image=(pool.get("images") or {}).get(comp)))
            elif state["hash"] and not state["synced"] and state["auto_update"]:
                out.append(finding("COMPONENT_NOT_SYNCED", "blocking", name,
                                   "GPUPool %s: %s is not synced (progress %d%%) although autoUpdate is on"
                                   % (pool["name"], comp, state["progress"])))
            elif state["hash"] and not state["synced"] and comp == "hypervisor":
                out.append(finding("COMPONENT_FROZEN", "info", name,
                                   "GPUPool %s: hypervisor configuration changed with autoUpdate off; "
                                   "it is not rolled until autoUpdateHypervisor is turned on" % pool["name"]))
    return out


def _node_findings(data):
    out = []
    pool_of = dict((node["name"], node.get("pool")) for node in data["gpunodes"])
    paused = paused_by_us(data)

    def judged(code, obj, message, pool):
        # A rollout tensorfusion.ops paused stops after the batch under way: that batch's nodes
        # are Pending for a while, which the run that resumes it waits out (and judges).
        if pool in paused:
            return dict(finding(code, "warning", obj, message + "; of the %s rollout of GPUPool %s that "
                                "tensorfusion.ops paused: the same change run again resumes it and waits for "
                                "it" % (", ".join(paused[pool]), pool)), pool=pool)
        return dict(finding(code, "blocking", obj, message), pool=pool)

    for node in data["gpunodes"]:
        if node["phase"] != "Running":
            out.append(judged("GPUNODE_NOT_RUNNING", "gpunode/%s" % node["name"],
                              "GPUNode %s is %s: a node that does not return to Running blocks every "
                              "hypervisor rollout of its pool forever" % (node["name"], node["phase"] or "Pending"),
                              node.get("pool")))
    for pod in data["hypervisors"]:
        if not pod["ready"]:
            out.append(judged("HYPERVISOR_NOT_READY", "pod/%s/%s" % (pod["namespace"], pod["name"]),
                              "hypervisor Pod %s on %s is not Ready (%s)" % (
                                  pod["name"], pod["node"], pod["reason"] or "no reason given"),
                              pool_of.get(pod["node"])))
    out += _isolation_policy_findings(data, pool_of)
    return out


def operator_isolation_policy(data):
    """The isolation policy the operator runs with (its controller's TF_ISOLATION_MODE_POLICY;
    without it the binary's own default, static), or None when the controllers disagree or none
    is seen."""
    policies = set((c.get("isolation_policy") or BINARY_DEFAULT).lower() for c in data["controller"])
    return policies.pop() if len(policies) == 1 else None


def _isolation_policy_findings(data, pool_of):
    """Hypervisor Pods started with another isolation policy than the operator's: the operator
    records a switch of policy but upstream's did not roll its hypervisors to it (#47); under the
    dynamic policy its scheduler then uses no GPU whose hypervisor reports another."""
    want = operator_isolation_policy(data)
    out = []
    for pod in data["hypervisors"] if want else []:
        have = (pod.get("isolation_policy") or "").lower()
        if have and have != want:
            out.append(dict(finding(
                "HYPERVISOR_POLICY_STALE", "blocking", "pod/%s/%s" % (pod["namespace"], pod["name"]),
                "hypervisor Pod %s on %s runs with --isolation-policy=%s while the operator's policy is %s: "
                "the operator recorded the switch but does not roll its hypervisors to it, and GPUs on this "
                "node are not scheduled as the policy says; delete the Pod, one node at a time, and the "
                "operator creates it again with the new policy" % (pod["name"], pod["node"], have, want)),
                pool=pool_of.get(pod["node"])))
    return out


def _operator_findings(data):
    out = []
    controllers = data["controller"]
    if not controllers:
        out.append(finding("CONTROLLER_MISSING", "blocking", "deployment/%s" % data["namespace"],
                           "no TensorFusion controller Deployment (label tensor-fusion.ai/component="
                           "operator) in namespace %s" % data["namespace"]))
    for ctl in controllers:
        if ctl["available"] < max(ctl["replicas"], 1):
            out.append(finding("CONTROLLER_NOT_READY", "blocking", "deployment/%s/%s" % (ctl["namespace"], ctl["name"]),
                               "controller Deployment %s has %d of %d replicas available" % (
                                   ctl["name"], ctl["available"], ctl["replicas"])))
    for am in data["alert_manager"]:
        if am["ready"] < am["replicas"]:
            out.append(finding("ALERT_MANAGER_NOT_READY", "warning", "pod-set/%s" % am["name"],
                               "alert-manager %s has %d of %d replicas ready" % (am["name"], am["ready"], am["replicas"])))
    release = data["release"]
    if release is None:
        out.append(finding("RELEASE_MISSING", "warning", "helm/%s" % data["namespace"],
                           "no Helm release found in namespace %s" % data["namespace"]))
    elif release["status"].startswith("pending-"):
        out.append(finding("RELEASE_PENDING", "blocking", "helm/%s" % release["name"],
                           "Helm release %s revision %d is stuck %s: recover it (roll back to the last "
                           "deployed revision) before upgrading" % (release["name"], release["revision"], release["status"])))
    elif release["status"] == "failed":
        out.append(finding("RELEASE_FAILED", "blocking", "helm/%s" % release["name"],
                           "Helm release %s revision %d failed: fix or roll back before upgrading" % (
                               release["name"], release["revision"])))
    return out


def _workload_findings(data):
    out = []
    for wl in data["workloads"]:
        obj = "%s/%s/%s" % (wl["kind"].lower(), wl["namespace"], wl["name"])
        if wl.get("rollout"):
            # Not blocking: a business rollout is the team's own, and one that never finishes
            # would hold every maintenance window; but upgrade and scheduling problems would mix.
            out.append(finding("WORKLOAD_ROLLOUT_IN_PROGRESS", "warning", obj,
                               "%s %s/%s is in the middle of its own rollout (%s): while TensorFusion's "
                               "components roll, its scheduling problems and the upgrade's would mix; "
                               "let it finish first" % (wl["kind"], wl["namespace"], wl["name"], wl["rollout"])))
        if wl["kind"] == "DaemonSet":
            continue  # a Pod per node: replicas and disruption budgets are not its kind's
        if wl["replicas"] < 2:
            out.append(finding("WORKLOAD_SINGLE_REPLICA", "warning", obj,
                               "%s %s/%s runs %d replica: a client rollout deletes its Pod and it is down "
                               "until the new one is Ready" % (wl["kind"], wl["namespace"], wl["name"], wl["replicas"])))
        if not wl["readiness_probe"]:
            out.append(finding("WORKLOAD_NO_READINESS_PROBE", "warning", obj,
                               "%s %s/%s has no readinessProbe: traffic reaches new Pods before they serve"
                               % (wl["kind"], wl["namespace"], wl["name"])))
        if not wl["pdb"]:
            out.append(finding("WORKLOAD_NO_PDB", "warning", obj,
                               "%s %s/%s is not covered by a PodDisruptionBudget" % (wl["kind"], wl["namespace"], wl["name"])))
    return out


def _event_findings(data):
    if not data["warning_events"]:
        return []
    return [finding("WARNING_EVENTS", "info", "events",
                    "%d recent warning Events; the newest: %s" % (
                        len(data["warning_events"]), data["warning_events"][0]["message"]))]


def _lock_findings(data, own_holder=None):
    """A maintenance lock held by someone (another runbook running, or one that died) is worth a
    line; the run's own lock is not."""
    lock = data.get("lock")
    if not lock or not lock.get("holder") or lock["holder"] == own_holder:
        return []
    where = "lease/%s/%s" % (lock["namespace"], lock["name"])
    if lock.get("stale"):
        return [finding("MAINTENANCE_LOCK_HELD", "info", where,
                        "the maintenance lock %s/%s is held by %s, who stopped renewing it (expired %s): "
                        "the next runbook takes it over with a warning" % (
                            lock["namespace"], lock["name"], lock["holder"], lock.get("expires")))]
    return [finding("MAINTENANCE_LOCK_HELD", "info", where,
                    "the maintenance lock %s/%s is held by %s since %s (expires %s unless renewed): a "
                    "runbook started now fails at its lock" % (
                        lock["namespace"], lock["name"], lock["holder"], lock.get("acquire_time"),
                        lock.get("expires")))]


def builtin_findings(data, own_lock_holder=None):
    out = _lock_findings(data, own_lock_holder)
    for rule in (_cluster_findings, _chart_findings, _pool_findings, _node_findings, _operator_findings,
                 _workload_findings, _event_findings):
        out.extend(rule(data))
    return out


def cap_per_code(findings, limit):
    """At most ``limit`` findings of each code (0: no limit); the rest of a code become one finding
    that counts them, with the code's severity, so a blocking code still blocks. Returns
    (findings, {code: number left out}). Thousands of identical warnings help nobody read a
    result, and a result of megabytes costs Ansible seconds to handle."""
    if not limit:
        return list(findings), {}
    kept, omitted, first_omitted = [], {}, {}
    seen = {}
    for item in findings:
        seen[item["code"]] = seen.get(item["code"], 0) + 1
        if seen[item["code"]] <= limit:
            kept.append(item)
        else:
            omitted[item["code"]] = omitted.get(item["code"], 0) + 1
            first_omitted.setdefault(item["code"], item)
    for code, count in omitted.items():
        kept.append(finding(code, first_omitted[code]["severity"], "%d more" % count,
                            "%d more %s findings like the ones above (findings_per_code is %d)" % (
                                count, code, limit)))
    return kept, omitted


def summarize(findings):
    counts = dict((s, 0) for s in SEVERITIES)
    for item in findings:
        counts[item["severity"]] += 1
    return counts
