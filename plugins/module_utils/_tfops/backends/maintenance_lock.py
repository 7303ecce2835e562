# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance_lock's body: the runbook's lock (maintenance/lock.py) taken or given back by a holder
(maintenance/holder.py)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import holder as holders
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import warden as wardens
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import interrupted
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
    for warning in result.pop("warnings"):
        ctx.warn(warning)
    return result


def acquire_watched(lock, me, params, process):
    """Take the lock with its warden started first (maintenance/warden.py): a warden per holding,
    told to watch when this task took the lock; a renewal finds the run's warden running."""
    lease = lock.read()
    if lease is not None and locks.lease_view(lease)["holder"] == me["holder"]:
        return lock.acquire(me, params["ttl"], gone=holders.gone_checker())
    with wardens.Starting(resolve_auth(params), params["namespace"], params["name"], me["holder"], process,
                          params["ttl"], before_release=interrupted.HOOK) as warden:
        result = lock.acquire(me, params["ttl"], gone=holders.gone_checker())
        if result["action"] in ("create", "take", "take_over"):
            warden.go()
            result["warden"] = dict(pid=warden.pid)
    return result
