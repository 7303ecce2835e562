# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a check-mode run concluded, as a change plan (pure): per step what would happen, from
the steps' check-mode results - the lock and its holder, the RBAC preflight's answer, the
window, the restore point that would be taken, the chart from and to with the manifest's
changes by kind, per pool the components that would roll (and whether the chart or the user
asked for them), the nodes, batches and their estimated times against the window's deadline,
a Secret rotation and its consumers, a rollback's target. Names and numbers only, never values."""

from __future__ import annotations

import datetime

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time
# A pool's changes from and to in words (in core: a business workload's are said the same way).
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.values import describe_changes

# A runbook's steps around the pools (lock, precheck, snapshot, chart, verify, report), measured
# on the lab: the fixed part of a change run (bench/performance.md, part 2).
FIXED_SECONDS = 40.0
# Each pool in the pools step beyond its campaign: the lock's renewal and the task start-ups
# before the operator starts it, the last check that every hypervisor is Ready after it.
POOL_LEAD_SECONDS, POOL_TAIL_SECONDS = 1.0, 1.0
PLAN_STATUSES = ("planned", "blocked")


def _dict(value):
    return value if isinstance(value, dict) else {}


def _ok(result):
    return isinstance(result, dict) and not result.get("failed") and not result.get("skipped")


def blocking(steps, error, precheck):
    """What stops the plan: each failed step's message, and the precheck's blocking findings."""
    out = [{"step": s["name"], "code": None, "message": s["msg"] or "the step failed"}
           for s in steps if s["status"] == "failed"]
    if error and not any(b["step"] == error.get("step") for b in out):
        out.append({"step": error.get("step"), "code": None, "message": str(error.get("msg") or "failed")})
    if any(b["step"] == "precheck" for b in out):
        out += [{"step": "precheck", "code": f.get("code"), "message": f.get("message")}
                for f in _dict(precheck).get("findings") or [] if f.get("severity") == "blocking"]
    return out


def lock_plan(lock):
    if not isinstance(lock, dict) or lock.get("skipped"):
        return None
    previous = _dict(lock.get("previous"))
    held_by = previous.get("holder") if previous.get("holder") and not previous.get("stale") else None
    return {"name": _dict(lock.get("lease")).get("name") or previous.get("name"), "free": not lock.get("failed"),
            "holder": held_by, "held_until": previous.get("expires") if held_by else None,
            "msg": lock.get("msg") if lock.get("failed") else None}


def rbac_plan(preflight):
    if not isinstance(preflight, dict) or preflight.get("skipped"):
        return {"checked": False, "missing": []}
    return {"checked": True, "missing": list(preflight.get("missing") or [])}


def snapshot_plan(snapshot):
    if not _ok(snapshot):
        return None
    meta = _dict(snapshot.get("meta"))
    return {"would_write": snapshot.get("bundle"), "release": meta.get("release"), "revision": meta.get("revision"),
            "chart_version": meta.get("chart_version"), "app_version": meta.get("app_version")}


def chart_plan(upgrade, before):
    if not _ok(upgrade) or upgrade.get("chart_version") is None:
        return None
    manifest = _dict(upgrade.get("manifest_changes"))
    return {"release": upgrade.get("name"), "changes": bool(upgrade.get("reasons")),
            "from": {"chart_version": before.get("chart_version"), "app_version": before.get("app_version"),
                     "revision": upgrade.get("revision_before")},
            "to": {"chart_version": upgrade.get("chart_version"), "app_version": upgrade.get("app_version")},
            "reasons": list(upgrade.get("reasons") or []),
            "manifest": manifest,
            "images": [dict((k, i.get(k)) for k in ("object", "container", "from", "to"))
                       for i in upgrade.get("image_changes") or [] if isinstance(i, dict)],
            "counts": dict((k, sum(len(v) for v in _dict(manifest.get(k)).values())) for k in ("added", "changed", "removed")),
            "crds_changed": sorted(k for k, v in _dict(upgrade.get("crds")).items() if v),
            "pools_left_to_the_pools_step": sorted(
                "%s/%s" % (cluster, entry) for cluster, entries in _dict(upgrade.get("chart_pool_changes")).items()
                for entry in _dict(entries))}


def _origin(update, comp):
    origin = _dict(_dict(update).get("origin")).get(comp)
    return list(origin) if isinstance(origin, list) else ["user"]


def pools_plan(pool_results, pool_updates):
    """One entry per pool that a campaign would start in, in the order the pools step rolls them
    (one after another: each pool's batches start where the previous pool's end)."""
    updates = dict(((u.get("pool") or u.get("name")), u) for u in pool_updates or [] if isinstance(u, dict))
    last = {}  # a pool's last call: check mode makes one per pool, a resumed plan perhaps more
    for result in pool_results or []:
        if isinstance(result, dict) and not result.get("skipped"):
            last[result.get("task_pool") or result.get("pool")] = result
    out, offset = [], 0.0
    for name, result in last.items():
        schedule = _dict(result.get("schedule"))
        comps = list(result.get("waited_for") or [])
        rollout = (schedule.get("seconds") or 0.0) if comps else 0.0
        first_batch_at = offset + POOL_LEAD_SECONDS
        entry = {"cluster": result.get("cluster"), "pool": result.get("pool") or name, "gpupool": result.get("gpupool"),
                 "components": comps, "recorded_only": [c for c in result.get("changed_components") or [] if c not in comps],
                 "origin": dict((c, _origin(updates.get(name), c)) for c in result.get("changed_components") or []),
                 "nodes": schedule.get("nodes"), "batch_percentage": schedule.get("batch_percentage"),
                 "batch_interval": schedule.get("batch_interval"), "batch_count": schedule.get("batch_count") or 0,
                 "batch_sizes": schedule.get("batch_sizes") or [], "batch_seconds": schedule.get("batch_seconds"),
                 "rollout_seconds": rollout,
                 "gate_bake_seconds": schedule.get("gate_bake_seconds") or 0,
                 "gate_seconds": (schedule.get("gate_seconds") or 0) if comps else 0,
                 "estimated_seconds": round(rollout + POOL_LEAD_SECONDS + POOL_TAIL_SECONDS, 1) if comps else 0.0,
                 "starts_at": round(offset, 1),
                 "batches": [dict(b, start=round(b["start"] + first_batch_at, 1), end=round(b["end"] + first_batch_at, 1))
                             for b in schedule.get("batches") or []] if comps else [],
                 # What the pools step would write, from and to: images, ports, the rolling policy
                 # (batchPercentage, autoUpdate flags, ...); a Pod template only named.
                 "spec_changes": [dict(c) for c in result.get("spec_changes") or [] if isinstance(c, dict)],
                 "msg": result.get("msg") if result.get("failed") else None}
        offset += entry["estimated_seconds"]
        out.append(entry)
    return out


def rotation_would(rotate):
    """What a check-mode rotation would do, in the order it would do it (its result lists steps
    only once they ran): names only. Empty when nothing would change."""
    if not isinstance(rotate, dict) or not rotate.get("changed"):
        return []
    secret = _dict(rotate.get("secret")).get("name")
    would = []
    if rotate.get("strategy") == "versioned":
        repointed = [c for c in rotate.get("consumers") or [] if isinstance(c, dict) and c.get("repointed")]
        # changed with nothing to repoint: only the new version is missing
        would.append({"step": "create", "detail": secret if not repointed else "%s (unless it exists)" % secret})
        would += [{"step": "repoint", "consumer": _label(c),
                   "detail": "%s -> %s" % (", ".join(rotate.get("previous") or []) or "?", secret)} for c in repointed]
    else:
        for backup in rotate.get("previous") or []:
            would += [{"step": "backup", "detail": backup}, {"step": "update", "detail": secret}]
        would += [{"step": "restart", "consumer": label} for label in rotate.get("restarts") or []]
    if would:
        would.append({"step": "verify", "detail": "every consumer runs on the new content"})
    return would


def _label(consumer):
    where = consumer.get("namespace")
    name = consumer.get("name") or consumer.get("pool")
    return "%s %s%s" % (consumer.get("kind"), "%s/" % where if where else "", name)


def _gates_text(pool):
    if not pool.get("gate_bake_seconds"):
        return ""
    return " (health gates: %ss of bake per batch, %ss of it)" % (pool["gate_bake_seconds"], pool["gate_seconds"])


def rotation_plan(rotate):
    if not isinstance(rotate, dict) or rotate.get("skipped"):
        return None
    return {"secret": _dict(rotate.get("secret")).get("name"), "strategy": rotate.get("strategy"),
            "keys": list(_dict(rotate.get("secret")).get("keys") or []),
            "steps": [dict((k, s.get(k)) for k in ("step", "detail", "consumer") if s.get(k) is not None)
                      for s in rotate.get("steps") or rotation_would(rotate) if isinstance(s, dict)],
            "would_change": bool(rotate.get("changed")),
            "consumers": [dict((k, c.get(k)) for k in ("kind", "namespace", "name"))
                          for c in rotate.get("consumers") or [] if isinstance(c, dict)],
            "would_delete": list(rotate.get("deleted") or [])}


RESTORE_KEYS = ("cluster", "pool", "gpupool", "changed_components", "waited_for", "restored")


def rollback_plan(rollback):
    if not isinstance(rollback, dict) or rollback.get("skipped"):
        return None
    return {"snapshot": _dict(rollback.get("snapshot")).get("path"), "target_revision": rollback.get("target_revision"),
            "method": rollback.get("method"), "chart_version": rollback.get("chart_version"),
            "app_version": rollback.get("app_version"),
            "component_config": [dict((k, i.get(k)) for k in RESTORE_KEYS)
                                 for i in rollback.get("component_config") or [] if isinstance(i, dict)]}


def estimate(pools, window, ended):
    """How long the run would take and whether it ends before the window's deadline."""
    seconds = round(FIXED_SECONDS + sum(p["estimated_seconds"] for p in pools), 1)
    ends_by = parse_time(ended) + datetime.timedelta(seconds=seconds)
    deadline = _dict(window).get("deadline")
    fits = None if not deadline else ends_by <= parse_time(deadline)
    return {"seconds": seconds, "rollout_seconds": round(sum(p["estimated_seconds"] for p in pools), 1),
            "ends_by": ends_by.strftime("%Y-%m-%dT%H:%M:%SZ"), "deadline": deadline,
            "window_end": _dict(window).get("window_end"), "fits": fits}


def build_plan(record, results):
    """The plan of a check-mode run's record (see the module docs of run_report for its fields)."""
    blocks = blocking(record["steps"], record.get("error"), results.get("precheck"))
    pools = pools_plan(results.get("pools") if isinstance(results.get("pools"), list) else [results.get("pools")],
                       results.get("pool_updates"))
    plan = {"status": "blocked" if blocks else "planned", "blocking": blocks,
            "rbac": rbac_plan(results.get("preflight")), "lock": lock_plan(results.get("lock")),
            "window": record.get("window"), "snapshot": snapshot_plan(results.get("snapshot")),
            "chart": chart_plan(results.get("upgrade"), record["versions"]["before"]),
            "pools": pools, "rotation": rotation_plan(results.get("rotate")),
            "rollback": rollback_plan(results.get("rollback")),
            "estimate": estimate(pools, results.get("window"), record["ended"])}
    if plan["estimate"]["fits"] is False and not blocks:
        plan["blocking"].append({"step": "window", "code": "ESTIMATE_EXCEEDS_WINDOW", "message": (
            "the run is estimated to end at %s, after the window's deadline %s" % (
                plan["estimate"]["ends_by"], plan["estimate"]["deadline"]))})
        plan["status"] = "blocked"
    return plan


def planned_timeline(pool):
    """A pool's planned batches as the events of a run's timeline (progress steps at batch ends)."""
    events = []
    for comp in pool["components"]:
        before = 0
        for batch in pool["batches"]:
            events.append({"seconds": batch["start"], "component": comp, "progress": before, "time": "planned"})
            events.append({"seconds": batch["end"], "component": comp, "progress": batch["progress"], "time": "planned"})
            before = batch["progress"]
    return events


def summary(record):
    plan = record["plan"]
    if plan["status"] == "blocked":
        return "blocked: %s" % "; ".join("%s: %s" % (b["step"], b["message"]) for b in plan["blocking"][:5])
    parts = []
    chart = plan.get("chart")
    if chart and chart["changes"]:
        parts.append("would upgrade chart %s -> %s (%d added, %d changed, %d removed objects)" % (
            chart["from"]["chart_version"], chart["to"]["chart_version"], chart["counts"]["added"],
            chart["counts"]["changed"], chart["counts"]["removed"]))
    for pool in plan["pools"]:
        changes = " (%s)" % describe_changes(pool.get("spec_changes") or []) if pool.get("spec_changes") else ""
        if pool["components"]:
            parts.append("pool %s would roll %s%s on %s node(s) in %d batch(es)%s, about %ds%s" % (
                pool["pool"], ", ".join(pool["components"]), changes, pool["nodes"] if pool["nodes"] is not None else "?",
                pool["batch_count"], " of %s" % "/".join(str(n) for n in pool["batch_sizes"]) if pool["batch_sizes"] else "",
                pool["estimated_seconds"], _gates_text(pool)))
        elif changes:
            parts.append("pool %s would be set, no rollout%s" % (pool["pool"], changes))
    if plan.get("rotation"):
        parts.append("%s Secret %s (%d consumer(s))" % (
            "would rotate" if plan["rotation"].get("would_change") else "would leave (already rotated)",
            plan["rotation"]["secret"], len(plan["rotation"]["consumers"])))
    if plan.get("rollback"):
        parts.append("would roll back to revision %s of %s" % (plan["rollback"]["target_revision"], plan["rollback"]["snapshot"]))
    est = plan["estimate"]
    fits = "" if est["fits"] is None else (", ends by %s before the deadline %s" % (est["ends_by"], est["deadline"]))
    return "planned: %s; about %ds%s" % ("; ".join(parts) or "nothing to change", est["seconds"], fits)
