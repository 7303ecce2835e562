# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the runbooks and their roles decide between two module calls (pure: no client, and the
clock only as an argument). The filters of plugins/filter/decisions.py hand them to the
playbooks: the run's deadline, when to renew the lock, whether a failed run is resumable or its
change merely unverified, which RBAC the preflight checks, the bundle a rollback restores, and
where a pool's batch-by-batch rollout stands after each call."""

from __future__ import annotations

import datetime

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time

DEADLINE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def _whole(value):
    """A number of seconds as Jinja's int filter reads it (the inputs' check has checked it)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return int(float(value))


def run_deadline(window_deadline, now, timeout):
    """The end of every later wait: the maintenance window's deadline when there is one, else
    ``timeout`` seconds from ``now`` (seconds since the epoch, whole seconds), as UTC ISO 8601."""
    if window_deadline:
        return window_deadline
    instant = datetime.datetime.fromtimestamp(_whole(now) + _whole(timeout), datetime.timezone.utc)
    return instant.strftime(DEADLINE_FORMAT)


def lock_renewal_due(expires, ttl, now):
    """Whether the lock is renewed before a long step: when this run's lease has no known end, or
    less than half its ``ttl`` (seconds) is left at ``now`` (seconds since the epoch)."""
    if not expires:
        return True
    left = parse_time(expires).timestamp() - float(now)
    return left < _whole(ttl) / 2


def resumable(pool_results):
    """A failed run is resumable when a pool call failed where it paused its pool (a window's
    deadline, the business changes gate): the next run resumes it. (A failed health gate pauses
    its pool too, but for the rollback: its result says gate_paused, not paused.)"""
    return any(isinstance(r, dict) and r.get("failed") and "paused" in r for r in pool_results or [])


def unverified(error, verify_info, verify_acceptance):
    """The change completed but verify could not reach the API server before its deadline: an
    outage, no finding - the upgrade runbook does not roll back a change it could not verify."""
    if not isinstance(error, dict) or error.get("step") != "verify":
        return False
    return any(isinstance(r, dict) and bool(r.get("unreachable")) for r in (verify_info, verify_acceptance))


def rbac_runbooks(playbook, rollback_on_failure):
    """The runbooks of roles/rbac/files whose permissions a runbook's preflight checks: the
    upgrade's own and, when it rolls back on a failure, the rollback's; a rotation's rotate."""
    if playbook == "upgrade":
        return ["upgrade"] + (["rollback"] if rollback_on_failure else [])
    if playbook == "rotate_secret":
        return ["rotate"]
    return [playbook]


def _handed_snapshot(handed_run):
    return handed_run.get("snapshot") if isinstance(handed_run, dict) else None


def rollback_bundle(given, planned, handed_run):
    """The bundle the rollback runbook restores: the one given, else the one the applied plan
    resolved, else the restore point of the upgrade an AWX workflow handed on (``tfops_runs`` of
    this host), else '' (the newest usable one)."""
    return given or planned or _handed_snapshot(handed_run) or ""


def nothing_to_roll_back(given, handed_run):
    """No bundle given and the workflow's upgrade stopped before its restore point: nothing
    changed, so the rollback runbook ends at once."""
    return not given and isinstance(handed_run, dict) and not _handed_snapshot(handed_run)


def rollout_step(batch, watch, target, shown, check_mode):
    """Where a pool's batch-by-batch rollout stands after a gpupool_rollout call (``batch``, its
    result) that waited until ``target`` percent: the least progress of the components rolled
    (``watch``), whether they are all synced, whether the call finished a batch that was not shown
    yet (``show``), and the next call's target - or ``done``: check mode (nothing rolls), nothing
    to roll, a call that waited for 100 %, or every component at 100 % and synced."""
    components = (batch or {}).get("components") or {}
    watched = [components[c] for c in watch]
    progress = min([c["progress"] for c in watched] or [100])
    synced = all([c["synced"] for c in watched] or [True])
    progress, shown, target = _whole(progress), _whole(shown), _whole(target)
    return {
        "progress": progress,
        "synced": synced,
        "show": bool(watch) and progress > shown,
        "shown": max(shown, progress),
        "done": bool(check_mode) or not watch or target >= 100 or (progress >= 100 and synced),
        "target": min(progress + 1, 100),
    }


def split_findings(findings, downgrade_codes):
    """The findings of a tf_cluster_info picture as the precheck and verify roles judge them:
    ``blocking`` (they fail the step) unless their code is downgraded to a warning, and
    ``warnings`` (the warnings, then the downgraded blocking findings), each in the picture's order."""
    codes = set(downgrade_codes or [])
    items = [f for f in findings or [] if isinstance(f, dict)]
    blocking = [f for f in items if f.get("severity") == "blocking"]
    return {"blocking": [f for f in blocking if f.get("code") not in codes],
            "warnings": [f for f in items if f.get("severity") == "warning"] +
                        [f for f in blocking if f.get("code") in codes]}
