# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""workload_restart's body: a rollout restart of Deployments, StatefulSets or DaemonSets and its wait
(workloads/restart.py)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads import decisions
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.restart import Restarter, read_secret_metadata


def run(ctx):
    """workload_restart's body (core/module.py's contract)."""
    params = ctx.params
    deadline = ctx.deadline
    with ctx.connected() as kube:
        kube.require_namespace(params["namespace"])
        restarter = Restarter(kube, params["kind"])
        after = parse_time(params["restarted_after"]) if params["restarted_after"] else None
        secret = None
        if params["restarted_after_secret"]:
            ref = params["restarted_after_secret"]
            secret = read_secret_metadata(kube, ref["name"], ref.get("namespace") or params["namespace"])
        targets = restarter.find(params["namespace"], params["name"], params["label_selectors"])
        results = [restarter.restart(obj, ctx.check_mode, params["wait"], deadline,
                                     restarted_after=after, secret=secret, restart=params["restart"])
                   for obj in targets]
    result = dict(changed=any(r["restarted"] for r in results), workloads=results)
    if ctx.diff_mode:
        result["diff"] = [dict(
            before_header="%s/%s" % (r["namespace"], r["name"]),
            after_header="%s/%s" % (r["namespace"], r["name"]),
            before="%s: %s\n" % (decisions.RESTARTED_AT, r["previous_restarted_at"]) if r["previous_restarted_at"] else "",
            after="%s: %s\n" % (decisions.RESTARTED_AT, r.get("restarted_at", "(set at restart)")))
            for r in results if r["restarted"]]
    return result
