# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The record of a run that ended without finishing (interrupted, cancelled or killed): written
in its stead, where its own report would have gone (the Lease's RECORD annotation says where), by
its lock's warden or by the run that takes its lock over (runbook/interrupted.py). Built from
what the Lease and the cluster show: who held the lock and since when, the rollouts it was waiting
for and where they stand, what was paused, and the state of the Helm release. Pure."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, parse_time

STATUS = "interrupted"


def _iso(value):
    return micro_time(value) if value is not None and not isinstance(value, str) else value


def pool_entry(cluster, pool, gpupool, components, paused):
    """A pool of the record: ``components`` {component: (progress, synced)} as the GPUPool shows
    them; ``paused``: the components paused for the run that ended."""
    return {"cluster": cluster, "pool": pool, "gpupool": gpupool, "paused": sorted(paused),
            "components": dict((comp, {"progress": progress, "synced": synced})
                               for comp, (progress, synced) in components.items()),
            # One point per component: where it stands (no batches were watched).
            "timeline": [{"seconds": 0.0, "component": comp, "progress": progress}
                         for comp, (progress, _synced) in sorted(components.items())]}


def what_happened(interrupted):
    """The record's headline after "did not finish": who wrote the record, what it paused or could
    not, the release's state. Pure."""
    parts = ["recorded by %s" % interrupted["recorded_by"]]
    if interrupted.get("paused"):
        parts.append("paused %s (the same change run again resumes)" % ", ".join(interrupted["paused"]))
    if interrupted.get("pause_failed"):
        parts.append("could not pause its rollouts (%s): look at the pools" % interrupted["pause_failed"])
    release = interrupted.get("release") or {}
    if release.get("status"):
        parts.append("Helm release %s at revision %s, %s%s" % (
            release.get("name"), release.get("revision"), release.get("status"),
            " (a helm write cut off: the rollback runbook brings it back to its last deployed revision)"
            if str(release["status"]).startswith("pending-") else ""))
    return "; ".join(parts) + "; what it changed is what the cluster shows"


def build(ref, view, ended, recorded_by, why, paused=(), pause_failed=None, release=None, pools=()):
    """The record of the run the Lease ``view`` names (lock.lease_view), written at ``ended``
    (ISO) by ``recorded_by`` because ``why``. ``ref``: the Lease's RECORD (where and as what);
    ``release``: {name, revision, status} of the newest Helm revision or None; ``pools``:
    pool_entry items of the rollouts the run was waiting for."""
    started = ref["started"]
    interrupted = {
        "recorded_by": recorded_by, "why": why, "holder": view.get("holder"), "user": view.get("user"),
        "machine": view.get("host"), "job_id": view.get("job_id"), "process": view.get("process"),
        "lock_taken": _iso(view.get("acquire_time")), "last_renewed": _iso(view.get("renew_time")),
        "rolling": ["%s/%s %s" % (i["cluster"], i["pool"], ",".join(i["components"])) for i in view.get("rolling") or []],
        "paused": list(paused), "pause_failed": pause_failed, "release": release}
    try:
        seconds = round(max(0.0, (parse_time(ended) - parse_time(started)).total_seconds()), 3)
    except (TypeError, ValueError):
        seconds = 0.0
    return {
        "schema": 1, "playbook": ref["playbook"], "check_mode": False, "host": ref.get("host"),
        "run_id": ref.get("run_id"), "status": STATUS, "resumable": bool(paused), "failed": True,
        # Unknown to the writer: the cluster shows what the run changed.
        "changed": None, "started": started, "ended": ended, "seconds": seconds, "api_server": None,
        # Its own marks died with it; the Lease shows the step it was in when it waited for pools.
        "steps": [], "versions": {"before": {}, "after": {"revision": (release or {}).get("revision")}},
        "findings": {"precheck": [], "verify": []}, "snapshot": None, "restore_point": None,
        "pools": list(pools), "paused_pools": [p["gpupool"] for p in pools if p["paused"]],
        "business_paused": [], "rollback": None,
        "error": {"step": "pools" if view.get("rolling") else None, "task": None, "msg": why},
        "window": None, "warnings": [], "unverified": False,
        "lock": {"held_by_this_run": True, "name": view.get("name"), "holder": view.get("holder"),
                 "released": recorded_by.startswith("its lock's warden")},
        "rotation": None, "interrupted": interrupted}
