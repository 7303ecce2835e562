# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance_window's body: the window a pool declares or the task gives, judged by
maintenance/window.py."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import window as windows
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import retry_deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import utcnow


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


def run(ctx):
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
