# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpupool_rollout's body: its options pruned and checked, the namespace and Pod templates checked
against the cluster, then the rollout (gpupool/rollout_task.py's RolloutTask) from start to end."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.rollout_task import RolloutTask, validate


def _prune(value):
    """Drop the None that Ansible fills in for every sub-option left out."""
    if isinstance(value, dict):
        return dict((k, _prune(v)) for k, v in value.items() if v is not None)
    return value


def run(ctx):
    """gpupool_rollout's body (core/module.py's contract)."""
    params = dict(ctx.params)
    for option in ("components", "rolling_update"):
        params[option] = _prune(params[option]) or {}
    params["gates"] = _prune(params["gates"])
    ctx.deadline = validate(params)
    with ctx.connected() as kube:
        # The hypervisor Pods waited for live there: a wrong one would write and then time out.
        kube.require_namespace(params["namespace"])
        if any((settings or {}).get("pod_template") for settings in params["components"].values()):
            rollout.validate_task(params["components"], {}, pod_fields=kube.pod_field_names())
        # A hypervisor Pod that cannot start (a pull that fails, a crash loop, no node for it)
        # fails the batch after pods_fail_after seconds instead of the stall timeout's.
        return RolloutTask(ctx, params, pods_fail_after=params["pods_fail_after"] or None).run()
