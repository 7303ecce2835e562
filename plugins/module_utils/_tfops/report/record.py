# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of a runbook run, built from the steps' registered results (pure functions).

Only named fields are copied out of the results (never values, diffs or manifests), so no Secret
value can reach the report."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import report as plan_report
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret.plan import what_changed
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report.interrupted import what_happened as interrupted_text

# Steps that only read, or keep the books of the run: their "changed" is not a change of TensorFusion.
BOOKKEEPING = frozenset(["preflight", "lock", "window", "precheck", "snapshot", "verify",
                         "verify_after_rollback", "unlock", "report"])
MAX_WARNINGS = 50
# Business workloads named per pool (the record is stored in a ConfigMap too): the rest counted.
MAX_BUSINESS_CHANGES = 50
NOT_RELEASED_YET = "not released yet"  # the report written before the lock's release
# interrupted: a run that ended without finishing, recorded in its stead (report/interrupted.py).
STATUSES = ("succeeded", "unchanged", "rolled_back", "rollback_failed", "resumable", "failed", "interrupted") + \
    plan_report.PLAN_STATUSES
# A blocked plan fails its job too: a workflow's approval node never shows a plan that cannot run.
FAILING = frozenset(["rolled_back", "rollback_failed", "resumable", "failed", "blocked", "interrupted"])


def _as_list(result):
    if result is None:
        return []
    return result if isinstance(result, list) else [result]


def step_status(results):
    """ok / changed / failed / skipped of one step from its result(s)."""
    items = [r for r in _as_list(results) if isinstance(r, dict)]
    if not items:
        return "ok"
    if any(r.get("failed") for r in items):
        return "failed"
    if all(r.get("skipped") for r in items):
        return "skipped"
    return "changed" if any(r.get("changed") for r in items) else "ok"


def step_changed(results):
    """Whether a step wrote anything: also a step that then failed (its result says changed)."""
    return any(isinstance(r, dict) and r.get("changed") and not r.get("skipped") for r in _as_list(results))


def _message(results):
    for r in _as_list(results):
        if isinstance(r, dict) and r.get("failed") and r.get("msg"):
            return str(r["msg"])
    return ""


def build_steps(marks, results, ended, failed_steps=(), step_errors=None):
    """Steps in the order they began; a step ends when the next one begins (the last at ``ended``).
    ``step_errors``: the message of a step whose failing task registered no result of the step's."""
    steps = []
    for i, mark in enumerate(marks):
        if not isinstance(mark, dict) or not mark.get("step") or not mark.get("at"):
            raise InvalidInput("every entry of steps needs a step name and an 'at' time, not %r" % (mark,))
        end = marks[i + 1]["at"] if i + 1 < len(marks) else ended
        started, finished = parse_time(mark["at"]), parse_time(end)
        status = step_status(results.get(mark["step"]))
        if mark["step"] in failed_steps:
            status = "failed"
        steps.append({"name": mark["step"], "started": mark["at"], "ended": end,
                      "seconds": round(max(0.0, (finished - started).total_seconds()), 3),
                      "status": status, "changed": step_changed(results.get(mark["step"])),
                      "msg": _message(results.get(mark["step"])) or
                      str((step_errors or {}).get(mark["step"]) or "")})
    return steps


def run_warnings(results):
    """The warnings the steps' modules gave (an API server outage ridden out, a lock taken over),
    once each, with the step; module warnings name objects and times, never values."""
    out, seen = [], set()
    for step, result in results.items():
        for r in _as_list(result):
            for text in (r.get("warnings") or []) if isinstance(r, dict) else []:
                if (step, text) not in seen and len(out) < MAX_WARNINGS:
                    seen.add((step, text))
                    out.append({"step": step, "msg": str(text)})
    return out


def paused_in_revision(upgrade, precheck):
    """The chart step's helm revision keeps the pools as they were while it ran (the post-renderer
    carries the live pools into its manifest), paused ones included: those this collection had
    paused (a window's end, the precheck's picture) and those the chart step held for a
    ProviderConfig change. The run lifts the pause afterwards; a plain ``helm rollback`` to that
    revision would bring it back. A warning of the upgrade step says so and what to do after it."""
    if not isinstance(upgrade, dict) or upgrade.get("failed") or not upgrade.get("changed") or \
            upgrade.get("revision_after") in (None, upgrade.get("revision_before")):
        return []
    paused = dict((pool, ["hypervisor"]) for pool in upgrade.get("held_for_provider_configs") or [])
    for cluster in ((precheck or {}).get("data") or {}).get("clusters") or []:
        for entry, components in (cluster.get("paused") or {}).items() if isinstance(cluster, dict) else []:
            key = "%s/%s" % (cluster.get("name"), entry)
            paused[key] = sorted(set(paused.get(key, [])) | set(components or []))
    if not paused:
        return []
    flags = sorted(set(c for comps in paused.values() for c in comps))
    return ["helm revision %s of release %s records %s with autoUpdate off for %s (paused while the chart "
            "step ran; this run lifts the pause afterwards): a plain `helm rollback %s %s` brings that pause "
            "back - follow it by setting %s back to true on those pools, or roll back with "
            "tensorfusion.ops.rollback, which restores the pools' rolling policy" % (
                upgrade.get("revision_after"), upgrade.get("name"), ", ".join(sorted(paused)),
                ", ".join(flags), upgrade.get("name"), upgrade.get("revision_after"),
                " and ".join("autoUpdate%s" % c.capitalize() for c in flags))]


def lock_state(taken, release):
    """What became of the maintenance lock: ``taken`` is the result that took it (None when this
    run never held it), ``release`` the release's result (None: not tried yet, for the report
    written before the release)."""
    if not isinstance(taken, dict) or taken.get("failed") or taken.get("skipped"):
        return {"held_by_this_run": False}
    lease = taken.get("lease") or {}
    state = {"held_by_this_run": True, "name": lease.get("name"), "holder": lease.get("holder") or taken.get("holder")}
    if isinstance(release, dict) and not release.get("failed") and not release.get("skipped"):
        return dict(state, released=True)
    warden = (taken.get("warden") or {}).get("pid") if isinstance(taken.get("warden"), dict) else None
    return dict(state, released=False, held_until=lease.get("expires"),
                msg=release.get("msg") if isinstance(release, dict) else NOT_RELEASED_YET,
                **({"warden": warden} if warden else {}))


def business_paused(pool_results):
    """Pools that the business changes gate paused (gpupool_rollout business_changes gate pause)."""
    return [r.get("task_pool") or r.get("pool") or r.get("invocation", {}).get("module_args", {}).get("pool")
            for r in _as_list(pool_results)
            if isinstance(r, dict) and r.get("failed") and r.get("error") == "BusinessChangesPaused"]


def business_record(summary):
    """A pool's business changes as the report keeps them (gpupool_rollout's business_changes
    without where its watch stopped); None when nothing was watched."""
    if not isinstance(summary, dict):
        return None
    kept = dict((k, summary.get(k)) for k in (
        "gate", "workloads", "percent", "started", "ended", "business_workloads", "changed", "share",
        "reached", "changes", "unseen"))
    changes = kept["changes"] or []
    kept["changes"], kept["changes_omitted"] = changes[:MAX_BUSINESS_CHANGES], max(0, len(changes) - MAX_BUSINESS_CHANGES)
    return kept


def paused_pools(pool_results):
    """Pools that a deadline paused mid-rollout (gpupool_rollout on_deadline=pause)."""
    return [r.get("pool") or r.get("task_pool") or r.get("invocation", {}).get("module_args", {}).get("pool")
            for r in _as_list(pool_results) if isinstance(r, dict) and r.get("failed") and r.get("paused")]


def decide_status(steps, error, paused, rollback_ran, rollback_ok):
    """The run's outcome (see STATUSES)."""
    if error or any(s["status"] == "failed" for s in steps):
        if paused:
            return "resumable"
        if rollback_ran:
            return "rolled_back" if rollback_ok else "rollback_failed"
        return "failed"
    changed = any(s["changed"] for s in steps if s["name"] not in BOOKKEEPING)
    return "succeeded" if changed else "unchanged"


def pool_versions(info):
    """{pool: {component: image}} from a tf_cluster_info result: the images the pools' templates name."""
    pools = ((info or {}).get("data") or {}).get("pools") or []
    return dict((p["name"], p.get("images") or {}) for p in pools if isinstance(p, dict) and p.get("name"))


def component_running(component):
    """Whether a component's Pods run what its template names, from tf_cluster_info's pool
    component ({hash, progress, synced, auto_update}): None when they do, else why not. Pure."""
    if component.get("synced"):
        return None
    if not component.get("auto_update"):
        return "not rolled: autoUpdate off, only new Pods get it"
    return "rolling, %s%%" % (component.get("progress") or 0)


def pool_running(info):
    """{pool: {component: why its Pods do not run the template's image}} of the components whose
    Pods do not (synced ones left out): the version table says what runs, not only what was written."""
    pools = ((info or {}).get("data") or {}).get("pools") or []
    out = {}
    for pool in pools:
        if isinstance(pool, dict) and pool.get("name"):
            notes = dict((comp, component_running(state)) for comp, state in (pool.get("components") or {}).items()
                         if isinstance(state, dict) and (pool.get("images") or {}).get(comp))
            notes = dict((comp, why) for comp, why in notes.items() if why)
            if notes:
                out[pool["name"]] = notes
    return out


def release_version(release=None, snapshot_meta=None):
    """Chart version, app version and revision from a helm_release result or a snapshot's meta."""
    for src, rev_key in ((release, "revision_after"), (snapshot_meta, "revision")):
        if isinstance(src, dict) and src.get("chart_version") and not src.get("failed"):
            return {"chart": src.get("chart"), "chart_version": src.get("chart_version"),
                    "app_version": src.get("app_version"), "revision": src.get(rev_key)}
    return {}


def release_before(rollback):
    """The release before a rollback (its helm_release result's *_before): what a rollback run,
    which takes no snapshot of its own, came from."""
    if not isinstance(rollback, dict) or not rollback.get("chart_version_before"):
        return {}
    return {"chart": rollback.get("chart"), "chart_version": rollback.get("chart_version_before"),
            "app_version": rollback.get("app_version_before"), "revision": rollback.get("revision_before")}


def restored_pools(rollback):
    """Each pool a rollback restored (helm_release's component_config): names, whether it was
    written, the components it waited for, what was restored field by field (Pod templates only
    named) and its timeline, for the report's pools."""
    out = []
    for item in (rollback or {}).get("component_config") or []:
        if not isinstance(item, dict):
            continue
        events = [e for e in item.get("timeline") or [] if isinstance(e, dict)]
        last = {}
        for event in events:
            last[event.get("component")] = event
        out.append({"task_pool": item.get("gpupool"), "pool": item.get("pool"), "gpupool": item.get("gpupool"),
                    "cluster": item.get("cluster"), "waited_for": list(item.get("waited_for") or []),
                    "written": bool(item.get("written")),
                    "restored": [dict((k, c.get(k)) for k in ("field", "from", "to", "hidden") if k in c)
                                 for c in item.get("restored") or [] if isinstance(c, dict)],
                    "components": dict((c, {"progress": (last.get(c) or {}).get("progress"),
                                            "synced": (last.get(c) or {}).get("synced")})
                                       for c in item.get("waited_for") or []),
                    "timeline": events})
    return out


def with_restored_pools(pools, restored):
    """The pools of the run's record with what a rollback restored in each: a pool the pools step
    rolled keeps its own timeline (the rollback's campaign is not drawn over it) and says what
    was restored; a pool only the rollback touched (the rollback runbook) is added with its own."""
    by_name = dict((p["gpupool"], p) for p in pools)
    added = []
    for item in restored:
        if item["gpupool"] in by_name:
            by_name[item["gpupool"]]["restored"] = item["restored"]
        else:
            added.append(item)
    return pools + pool_progress(added)


def _time_of(event):
    try:
        return parse_time(event["time"])
    except (KeyError, TypeError, ValueError):
        return None


def pool_progress(pool_results):
    """Per pool: the components rolled, the batches seen and the timeline (seconds from the first event)."""
    pools = {}
    for r in _as_list(pool_results):
        if not isinstance(r, dict) or r.get("skipped"):
            continue
        # A failed call's result has no pool keys: the pool as the task named it (task_pool, set by
        # the gpupool_update role, or the invocation's argument) joins the calls of one pool.
        name = r.get("task_pool") or ((r.get("invocation") or {}).get("module_args") or {}).get("pool") \
            or r.get("pool") or r.get("gpupool")
        if not name:
            continue
        entry = pools.setdefault(name, {"pool": r.get("pool"), "gpupool": r.get("gpupool"), "cluster": r.get("cluster"),
                                        "components": {}, "timeline": [], "nodes": {}, "paused": [],
                                        "gates": [], "business_changes": None})
        for key in ("pool", "gpupool", "cluster"):
            entry[key] = entry[key] or r.get(key)
        entry["gpupool"] = entry["gpupool"] or name
        # A component rolled in any call of the pool is followed to its state in the last call.
        tracked = set(entry["components"]) | set(r.get("waited_for") or []) | set(r.get("changed_components") or [])
        for comp, item in (r.get("components") or {}).items():
            if comp in tracked:
                first = entry["components"].get(comp) or {"before_hash": item.get("before_hash")}
                entry["components"][comp] = dict(first, **dict((k, item.get(k)) for k in (
                    "after_hash", "progress", "synced") if k in item))
        entry["timeline"].extend(e for e in r.get("timeline") or [] if isinstance(e, dict))
        entry["nodes"] = r.get("nodes") or entry["nodes"]
        entry["paused"] = sorted(set(entry["paused"]) | set(r.get("paused") or []) |
                                 set(r.get("gate_paused") or []))
        entry["gates"].extend(g for g in r.get("gates") or [] if isinstance(g, dict))
        # Each call's business changes count from the rollout's start: the last call's are all.
        entry["business_changes"] = business_record(r.get("business_changes")) or entry["business_changes"]
        if "restored" in r:  # a rollback's restore of the pool (restored_pools)
            entry["restored"] = r["restored"]
    out = []
    for entry in pools.values():
        events = sorted((e for e in entry["timeline"] if _time_of(e)), key=_time_of)
        start = _time_of(events[0]) if events else None
        entry["timeline"] = [dict({"time": e["time"], "seconds": round((_time_of(e) - start).total_seconds(), 3),
                                   "component": e.get("component"), "progress": e.get("progress"),
                                   "synced": e.get("synced")}, **({"gate": e["gate"]} if e.get("gate") else {}))
                             for e in events]
        out.append(entry)
    return out


def findings_of(info):
    return [dict((k, f.get(k)) for k in ("severity", "code", "message"))
            for f in ((info or {}).get("findings") or []) if isinstance(f, dict)]


def snapshot_summary(snapshot):
    """The bundle used: a helm_snapshot result (bundle, meta) or a helm_snapshot_info entry (path, ...)."""
    if not isinstance(snapshot, dict):
        return None
    source = dict(snapshot.get("meta") or {}, path=snapshot.get("bundle")) if snapshot.get("bundle") else snapshot
    if not source.get("path"):
        return None
    return dict((k, source.get(k)) for k in ("path", "revision", "chart_version", "app_version", "captured_at")
                if k in source)


def rollback_refused(rollback):
    """The rollback refused its snapshot before writing anything (helm_release's failed result
    says so in ``refused``, with ``changed`` false; the rollback role's result when it found no
    usable bundle too): the run is then ``failed``, as if no rollback had run."""
    return isinstance(rollback, dict) and bool(rollback.get("failed")) and rollback.get("refused") is True \
        and not rollback.get("changed")


def rollback_message(rollback, steps):
    """Why a rollback failed: its own result's message, else that of its failed step (a rollback
    that never started, such as one whose lock renewal found no API server)."""
    if rollback.get("failed") and rollback.get("msg"):
        return rollback["msg"]
    return next((s["msg"] for s in steps if s["name"] in ("rollback", "verify_after_rollback") and s["msg"]), None)


def rotation_summary(result):
    """What a rotation did, from its result (names only, never content): the Secret, what it
    created and modified, what it put back after a failure, and the old versions it deleted."""
    if not isinstance(result, dict) or result.get("skipped") or not isinstance(result.get("steps"), list):
        return None
    # A rotation that failed early returns no secret: its task's arguments still name it.
    name = (result.get("secret") or {}).get("name") or \
        ((result.get("invocation") or {}).get("module_args") or {}).get("name") or "the Secret (name not returned)"
    return dict(what_changed(result["steps"]), secret=name,
                failed_step=result.get("failed_step"), deleted=list(result.get("deleted") or []))


def unverified(error, verify):
    """The change completed but verify could not reach the API server within its deadline: an
    outage, not a finding, which the upgrade runbook does not roll back (the report says so)."""
    return bool(error) and error.get("step") == "verify" and isinstance(verify, dict) and \
        bool(verify.get("failed")) and bool(verify.get("unreachable"))


def build_record(params, ended):
    """The JSON record of a run from the run_report module's parameters."""
    results = params.get("results") or {}
    error = params.get("error") or None
    marks = params.get("steps") or []
    failed_steps = set((error or {}).get("failed_steps") or [])
    if (error or {}).get("step"):
        failed_steps.add(error["step"])
    steps = build_steps(marks, results, ended, failed_steps, (error or {}).get("step_errors"))
    paused = paused_pools(results.get("pools"))
    rollback = results.get("rollback") if isinstance(results.get("rollback"), dict) else {}
    refused = rollback_refused(rollback)
    rollback_ran = not refused and (
        any(s["name"] == "rollback" for s in steps) or bool(rollback and not rollback.get("skipped")))
    rollback_ok = rollback_ran and not rollback.get("failed") and \
        not failed_steps & set(["rollback", "verify_after_rollback"])
    status = decide_status(steps, error, paused, rollback_ran, rollback_ok)
    started = params.get("started") or (marks[0]["at"] if marks else ended)
    after_info = results.get("verify_after_rollback") if rollback_ran else results.get("verify")
    record = {
        "schema": 1,
        "playbook": params["playbook"],
        "check_mode": bool(params.get("check_run")),
        "host": params.get("host"),
        # The run's token: with the start time it names the run's report folder and ConfigMap.
        "run_id": params.get("run_id") or None,
        "status": status,
        "resumable": status == "resumable",
        "failed": status in FAILING,
        "changed": any(s["changed"] for s in steps if s["name"] not in BOOKKEEPING),
        "started": started,
        "ended": ended,
        "seconds": round(max(0.0, (parse_time(ended) - parse_time(started)).total_seconds()), 3),
        "api_server": next((r.get("api_server") for r in results.values()
                            if isinstance(r, dict) and r.get("api_server")), None),
        "steps": steps,
        "versions": {
            # A run's own restore point says what it started from; a rollback run (none of its
            # own) came from what its rollback found.
            "before": dict(release_version(snapshot_meta=(snapshot_summary(params.get("snapshot"))
                                                          if results.get("snapshot") else None)) or
                           (release_before(rollback) if rollback_ran else {}),
                           pools=pool_versions(results.get("precheck")),
                           not_running=pool_running(results.get("precheck"))),
            # A rollback that failed leaves the release where the upgrade put it.
            "after": dict(release_version(release=rollback if rollback_ok else None) or
                          release_version(release=results.get("upgrade")),
                          pools=pool_versions(after_info), not_running=pool_running(after_info)),
        },
        "findings": {"precheck": findings_of(results.get("precheck")), "verify": findings_of(after_info)},
        "snapshot": snapshot_summary(params.get("snapshot")),
        # The restore point this run took (none in check mode): a rollback skips one whose run
        # changed nothing (report/store.py labels it so).
        "restore_point": None if params.get("check_run") else snapshot_summary(results.get("snapshot")),
        "pools": with_restored_pools(pool_progress(results.get("pools")), restored_pools(rollback) if rollback_ran else []),
        "paused_pools": paused,
        # Of those, the pools the business changes gate paused (not a window's end).
        "business_paused": business_paused(results.get("pools")),
        "rollback": {"ok": False, "refused": True, "target_revision": None, "method": None,
                     "msg": rollback_message(rollback, steps)} if refused else None if not rollback_ran else {
            "ok": rollback_ok, "refused": False, "target_revision": rollback.get("target_revision"),
            "method": rollback.get("method"), "msg": None if rollback_ok else rollback_message(rollback, steps),
            "chart_version_before": rollback.get("chart_version_before"), "chart_version": rollback.get("chart_version"),
            "revision_before": rollback.get("revision_before"), "revision_after": rollback.get("revision_after"),
            "recovered": rollback.get("recovered"),
            "pools": [dict((k, p[k]) for k in ("gpupool", "written", "waited_for", "restored"))
                      for p in restored_pools(rollback)]},
        "error": None if not error else {"step": error.get("step"), "task": error.get("task"),
                                         "msg": str(error.get("msg") or "")},
        "window": dict((k, (results.get("window") or {}).get(k)) for k in (
            "window_start", "window_end", "deadline", "msg")) if isinstance(results.get("window"), dict) else None,
        "warnings": run_warnings(results) + [
            {"step": "upgrade", "msg": msg} for msg in paused_in_revision(results.get("upgrade"), results.get("precheck"))
            if status != "resumable"],
        "unverified": unverified(error, results.get("verify")) and not rollback_ran,
        "lock": lock_state(results.get("lock"), results.get("unlock")),
        "rotation": rotation_summary(results.get("rotate")),
    }
    if record["versions"]["after"].get("chart_version") is None:  # the release did not move
        record["versions"]["after"].update(dict((k, v) for k, v in record["versions"]["before"].items()
                                                if k not in ("pools", "not_running")))
    if record["check_mode"]:
        as_plan(record, results)
    return record


def as_plan(record, results):
    """A check-mode run's record is a plan: its status is planned or blocked (never succeeded),
    nothing is "after" yet, no snapshot was written, and its pools are the planned batches."""
    record["plan"] = plan_report.build_plan(record, results)
    for step in record["steps"]:  # nothing was written: a step that would write says so
        if step["status"] == "changed":
            step["status"] = "would change"
        step["would_change"], step["changed"] = bool(step["changed"]), False
    record.update(status=record["plan"]["status"], failed=record["plan"]["status"] in FAILING, resumable=False,
                  changed=False, snapshot=None, rollback=None)
    record["versions"]["after"] = {}
    record["pools"] = [{"pool": p["pool"], "gpupool": p["gpupool"], "cluster": p["cluster"], "planned": True,
                        "components": dict((c, {"progress": 0}) for c in p["components"]), "paused": [],
                        "nodes": {"total": p["nodes"]}, "timeline": plan_report.planned_timeline(p)}
                       for p in record["plan"]["pools"]]


def business_verdict(record):
    """``2 of 5 business workloads, 40 %`` over the pools the business changes gate paused."""
    texts = []
    for pool in record.get("pools") or []:
        summary = pool.get("business_changes") or {}
        if summary.get("reached") and summary.get("gate") == "pause":
            texts.append("%s of %s business workloads, %s%%" % (
                summary.get("changed"), summary.get("business_workloads"), summary.get("share")))
    return "; ".join(texts) or "see the error"


def chart_versions(record):
    """" (chart 1.8.6 -> 1.8.7)", " (chart 1.8.7)" or "" (a runbook that read no release)."""
    before = record["versions"]["before"].get("chart_version")
    after = record["versions"]["after"].get("chart_version")
    if not before and not after:
        return ""
    if before == after or not after:
        return " (chart %s)" % before
    return " (chart %s -> %s)" % (before or "none", after)


def put_back(rotation):
    """A failed rotation put back all it had written (nothing left that could not be)."""
    return bool(rotation) and bool(rotation.get("put_back")) and not rotation.get("not_put_back")


def summary_line(record):
    if record.get("plan"):
        return "check mode, nothing written - plan of %s on %s: %s" % (
            record["playbook"], record["host"], plan_report.summary(record))
    text = {"succeeded": "changed and verified", "unchanged": "nothing changed",
            "interrupted": "did not finish (interrupted, cancelled or killed): %s" % (
                interrupted_text(record["interrupted"]) if record.get("interrupted") else "see the error"),
            "rolled_back": "failed, rolled back to the snapshot and verified",
            "rollback_failed": "the rollback failed: see the error and the steps",
            "resumable": ("the business changes gate paused pools %s: business workloads changed their Pod "
                          "templates during the rollout (%s); run again to finish once they have settled" % (
                              ", ".join(p for p in record["business_paused"] if p),
                              business_verdict(record)))
            if record.get("business_paused") else
            "the window ended mid-rollout: pools %s paused; run again to finish" % ", ".join(
                p for p in record["paused_pools"] if p),
            "failed": (("failed after changing the cluster; the rotation put back what it had changed"
                        if put_back(record.get("rotation")) else
                        "failed after changing the cluster, not rolled back") if record.get("changed")
                       else "failed before any change") + (
                ": verify could not reach the API server before its deadline, the change itself "
                "completed (an outage is no reason to roll back; verify again, for example with the "
                "precheck runbook)" if record.get("unverified") else "") + (
                " (the snapshot was refused before any write)" if (record.get("rollback") or {}).get("refused")
                else "")}[record["status"]]
    lock = record.get("lock") or {}
    release_failed = lock.get("held_by_this_run") and lock.get("released") is False and lock.get("msg") != NOT_RELEASED_YET
    held = "" if not release_failed else (
        "; the maintenance lock's release failed: the run's lock warden (pid %s) releases it as soon as the "
        "API server answers, and it expires at %s at the latest" % (lock["warden"], lock.get("held_until"))
        if lock.get("warden") else
        "; the maintenance lock stays held until %s (its release failed)" % lock.get("held_until"))
    return "%s%s on %s: %s%s in %ss%s" % (
        "check mode, nothing written - " if record.get("check_mode") else "",
        record["playbook"], record["host"], text, chart_versions(record), int(record["seconds"]), held)
