# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance_lock's body: the runbook's lock (maintenance/lock.py) taken or given back by a holder
(maintenance/holder.py)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import holder as holders
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import warden as wardens
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import interrupted as pausing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import interrupted
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report.store import configmap_name, report_labels
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import resolve_auth
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import controller_chain


def run(ctx):
    """maintenance_lock's body (core/module.py's contract)."""
    params = ctx.params
    locks.check_ttl(params["ttl"])
    locks.check_holder(params["holder"])
    locks.check_holder(params["purpose"], "purpose")
    # A run's holder names its ansible-playbook process: once that is gone (kill -9), a run on
    # this host takes the lock over at once instead of waiting for the TTL.
    chain = controller_chain() if params["run_id"] else []
    process = holders.controller_process(chain)
    me = locks.make_identity(params["purpose"], holder=params["holder"], job=locks.job_id(),
                             run=params["run_id"], pid=chain[-1][0] if chain else None,
                             process=holders.format_process(process) if process else None)
    me["record"] = record_ref(params["report"], params["run_id"]) if params.get("report") else None
    heartbeat = params["heartbeat"] and params["state"] == "acquired"
    if heartbeat and not process:
        raise InvalidInput("heartbeat: this run's ansible-playbook process cannot be watched from here "
                           "(the module runs outside it, on another host or without /proc), so nothing "
                           "would renew the lock between tasks: set heartbeat to false and a ttl long "
                           "enough for the whole run (runbooks: tfops_lock_heartbeat: false, tfops_lock_ttl)")
    if params["retry_timeout"] < 0:
        raise InvalidInput("retry_timeout must be 0 (no retry) or a positive number of seconds, "
                           "not %d" % params["retry_timeout"])
    with ctx.connected(Deadline(timeout=params["retry_timeout"] or None, options=("retry_timeout", "deadline"))) as kube:
        lock = locks.LeaseLock(kube, params["namespace"], params["name"])
        if params["state"] == "acquired" and heartbeat and not ctx.check_mode:
            result = acquire_watched(lock, me, params, process)
        elif params["state"] == "acquired":
            result = lock.acquire(me, params["ttl"], check_mode=ctx.check_mode, gone=holders.gone_checker())
        else:
            result = lock.release(me, force=params["force"], check_mode=ctx.check_mode)
        if result["action"] == "take_over" and not ctx.check_mode:
            recorded_for_taken_over(kube, result)
    for warning in result.pop("warnings"):
        ctx.warn(warning)
    return result


def record_ref(report, run_id):
    """The Lease's RECORD of this run: where its report goes, as run_report names it."""
    report_labels(report["playbook"])
    try:
        parse_time(report["started"])
    except InvalidInput as exc:
        raise InvalidInput("report.started: %s" % exc.msg)
    if report["keep"] < 1:
        raise InvalidInput("report.keep must be 1 or more")
    return dict(namespace=report["namespace"], release=report.get("release"), playbook=report["playbook"],
                host=report["inventory_host"], started=report["started"], run_id=run_id, keep=report["keep"],
                store=report["store"],
                configmap=configmap_name(report["playbook"], report["inventory_host"], report["started"], run_id))


def recorded_for_taken_over(kube, result):
    """A lock taken over from a holder whose warden did not release it (it died with its run):
    write that run's record where its report would have gone, and say where (or why not)."""
    previous = result.get("previous") or {}
    if not previous.get("record"):
        return
    why = "its holder stopped renewing the lock%s" % (
        "" if previous.get("stale") else ", and its process is gone")
    written, failed = interrupted.for_taker(kube, previous, result["holder"], why)
    result["previous_record"] = written
    result["warnings"].append("the run that held the lock did not finish; its record: %s" % written if written else
                              "the run that held the lock did not finish; its record could not be written (%s)" % failed)


def acquire_watched(lock, me, params, process):
    """Take the lock with its warden started first (maintenance/warden.py): a warden per holding,
    told to watch when this task took the lock; a renewal finds the run's warden running."""
    lease = lock.read()
    if lease is not None and locks.lease_view(lease)["holder"] == me["holder"]:
        return lock.acquire(me, params["ttl"], gone=holders.gone_checker())
    with wardens.Starting(resolve_auth(params), params["namespace"], params["name"], me["holder"], process,
                          params["ttl"], before_release=pausing.HOOK, record=interrupted.WARDEN_HOOK,
                          report_dest=(params.get("report") or {}).get("dest")) as warden:
        result = lock.acquire(me, params["ttl"], gone=holders.gone_checker())
        if result["action"] in ("create", "take", "take_over"):
            warden.go()
            result["warden"] = dict(pid=warden.pid)
    return result
