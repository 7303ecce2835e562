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


def adopts(found, asked):
    """Whether a ROLLOUT_IN_PROGRESS finding is a campaign that rolls exactly what this run asks
    of that pool (``asked``: the pools step's gpupool_rollout entries): the same component image
    as the pool's spec has. A run interrupted mid-pools leaves such a campaign; its rerun waits
    for it (gpupool_rollout follows a campaign under way) instead of refusing. Pure."""
    if found.get("code") != "ROLLOUT_IN_PROGRESS" or not found.get("image"):
        return False
    pool = found.get("pool") or ""
    for entry in asked or []:
        name = (entry or {}).get("pool") or ""
        if name and (name == pool or pool.endswith("-" + name)):
            wanted = ((entry.get("components") or {}).get(found.get("component")) or {}).get("image")
            return wanted == found["image"]
    return False


ADOPTED = ("; it rolls %s, what this run asks for: the run takes it over (a run interrupted before "
           "it finished left it) and its pools step waits for it through the same gates and deadline")
# What a campaign under way shows while its nodes' hypervisors are recreated: part of a campaign
# this run takes over, not a reason to refuse (its pools step's stall and Pod verdicts still judge them).
FOLLOWS_CAMPAIGN = ("CLUSTER_NOT_RUNNING", "POOL_NOT_RUNNING", "GPUNODE_NOT_RUNNING", "HYPERVISOR_NOT_READY",
                    "HYPERVISOR_POLICY_STALE")
PART_OF = "; part of the rollout of GPUPool %s that this run takes over"


def _taken_over(found, pools):
    """The adopted pool a blocking finding of FOLLOWS_CAMPAIGN belongs to, or None."""
    if found.get("code") not in FOLLOWS_CAMPAIGN:
        return None
    mine = [p for p in [found.get("pool")] + list(found.get("pools") or []) if p in pools]
    return mine[0] if mine else None


def split_findings(findings, downgrade_codes, asked=None):
    """The findings of a tf_cluster_info picture as the precheck and verify roles judge them:
    ``blocking`` (they fail the step) unless their code is downgraded to a warning or they are a
    campaign this run adopts (``adopts``) or part of one, and ``warnings`` (the warnings, then the
    downgraded and adopted ones), each in the picture's order; and ``findings``, the picture's
    findings with the adopted ones as the warnings they are (what the run's report shows)."""
    codes = set(downgrade_codes or [])
    items = [f for f in findings or [] if isinstance(f, dict)]
    items = [dict(f, severity="warning", adopted=True, message=f.get("message", "") + ADOPTED % f["image"])
             if f.get("severity") == "blocking" and adopts(f, asked) else f for f in items]
    pools = set(f.get("pool") for f in items if f.get("adopted") and f.get("code") == "ROLLOUT_IN_PROGRESS")
    items = [dict(f, severity="warning", adopted=True, message=f.get("message", "") + PART_OF % _taken_over(f, pools))
             if f.get("severity") == "blocking" and _taken_over(f, pools) else f for f in items]
    blocking = [f for f in items if f.get("severity") == "blocking"]
    return {"blocking": [f for f in blocking if f.get("code") not in codes],
            "warnings": [f for f in items if f.get("severity") == "warning"] +
                        [f for f in blocking if f.get("code") in codes],
            "findings": items,
            "adopted": [f for f in items if f.get("adopted")]}
