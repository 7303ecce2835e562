# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bodies of maintenance_window and maintenance_lock (window.py and lock.py decide)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import holder as holders
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import window as windows
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import retry_deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import controller_chain


def read_pool(ctx):
    """(cron expressions, maxDuration, source) declared by the pool, read from the cluster (the
    result's api_server comes from the context's client)."""
    params = ctx.params
    with ctx.connected(retry_deadline(params)) as kube:
        source = dict(type="pool")
        if params["cluster"]:
            spec, name = windows.cluster_pool_spec(kube, params["cluster"], params["pool"])
            source["cluster"] = params["cluster"]
        else:
            spec, name = windows.gpupool_spec(kube, params["pool"])
        includes, max_duration = windows.pool_policy_window(spec)
        source.update(pool=name, cron=includes, max_duration=max_duration)
    return includes, max_duration, source


def run_window(ctx):
    """maintenance_window's body (core/module.py's contract)."""
    params = ctx.params
    if not params["start"]:
        windows.require_croniter()
    tz = windows.get_zone(params["timezone"])
    margin = windows.parse_duration(params["safety_margin"], "safety_margin")
    now = windows.parse_instant(params["now"], tz, "now") if params["now"] else utcnow()
    if params["start"]:
        start = windows.parse_instant(params["start"], tz, "start")
        end = windows.parse_instant(params["end"], tz, "end")
        result = windows.explicit_window(start, end, now, margin, tz)
        source = dict(type="explicit")
    else:
        if params["cron"]:
            expressions = params["cron"]
            duration = windows.parse_duration(params["duration"], "duration")
            source = dict(type="cron", cron=expressions)
        else:
            expressions, max_duration, source = read_pool(ctx)
            duration = windows.parse_duration(params["duration"] or max_duration,
                                              "duration" if params["duration"] else
                                              "the pool's maxDuration")
        if expressions:
            schedules = windows.parse_schedules(expressions, tz)
            source["duration_seconds"] = int(duration.total_seconds())
            result = windows.scheduled_window(schedules, duration, now, margin, tz)
        else:
            undeclared = "the pool %s declares no maintenanceWindow.includes" % source["pool"]
            if params["when_undeclared"] == "open":
                result = windows.evaluate(now, None, None, None, None, margin, tz, always_open=True)
                result["msg"] = "%s: maintenance may run at any time" % undeclared
            else:
                result = windows.evaluate(now, None, None, None, None, margin, tz)
                result["msg"] = "%s and when_undeclared=closed: never open" % undeclared
    result.update(source=source, changed=False)
    if params["mode"] == "enforce":
        windows.enforce(result)
    return result


def run_lock(ctx):
    """maintenance_lock's body (core/module.py's contract)."""
    params = ctx.params
    # A run's holder names its ansible-playbook process: once that is gone (kill -9), a run on
    # this host takes the lock over at once instead of waiting for the TTL.
    chain = controller_chain() if params["run_id"] else []
    process = holders.controller_process(chain)
    me = locks.make_identity(params["purpose"], holder=params["holder"], job=locks.job_id(),
                             run=params["run_id"], pid=chain[-1][0] if chain else None,
                             process=holders.format_process(process) if process else None)
    if params["ttl"] < 1:
        raise InvalidInput("ttl must be at least 1 second")
    if params["retry_timeout"] < 0:
        raise InvalidInput("retry_timeout must be 0 (no retry) or a positive number of seconds, "
                           "not %d" % params["retry_timeout"])
    with ctx.connected(Deadline(timeout=params["retry_timeout"] or None, options=("retry_timeout", "deadline"))) as kube:
        lock = locks.LeaseLock(kube, params["namespace"], params["name"])
        if params["state"] == "acquired":
            result = lock.acquire(me, params["ttl"], check_mode=ctx.check_mode, gone=holders.gone_checker())
        else:
            result = lock.release(me, force=params["force"], check_mode=ctx.check_mode)
    for warning in result.pop("warnings"):
        ctx.warn(warning)
    return result
