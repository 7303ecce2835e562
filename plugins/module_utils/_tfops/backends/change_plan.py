# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The change_plan module's body: capture the identity of a plan, or check a saved plan."""

from __future__ import annotations

import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import plans
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import retry_deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    PlanRefused,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan.identity import live_identity

# What the chart step checks itself (it renders the chart): not compared here.
HELM_PART = "helm"


def load_plan(source, host):
    """The host's plan from a path or a plan document (a mapping, or its JSON text)."""
    where = "the plan"
    if isinstance(source, str) and source.lstrip().startswith("{"):
        source = json.loads(source)
    elif isinstance(source, str):
        where = "plan file %s" % source
        try:
            with open(source, encoding="utf-8") as handle:
                source = json.load(handle)
        except (OSError, ValueError) as exc:
            raise PlanRefused("cannot read %s: %s" % (where, exc))
    return plans.plan_of(source, host, where)


def _identity(ctx, salt):
    """The live identity of the cluster and release, with the digest of the task's inputs."""
    params = ctx.params
    with ctx.connected(retry_deadline(params)) as kube:
        identity = live_identity(kube, params["namespace"], params["release"], salt)
    identity["inputs"] = plans.digest(params["inputs"] or {}, salt)
    return identity


def run(ctx):
    """change_plan's body (core/module.py's contract)."""
    params = ctx.params
    if params["max_age"] <= 0:
        raise InvalidInput("max_age must be a positive number of seconds, not %d" % params["max_age"])
    if params["state"] == "captured":
        salt = params.get("salt") or plans.new_salt()
        return {"changed": False, "salt": salt, "identity": _identity(ctx, salt)}
    plan = load_plan(params["plan"], params["inventory_host"])
    plans.check_sealed(plan, params["max_age"], utcnow(), params["playbook"], params["inventory_host"])
    identity = _identity(ctx, plan["salt"])
    recorded = dict((k, v) for k, v in (plan.get("identity") or {}).items() if k != HELM_PART)
    drift = plans.drift(recorded, identity)
    if drift:
        raise PlanRefused(
            "the cluster or the inputs changed since the plan was made (%s): %s; nothing was written, "
            "make a new plan" % (plan["created"], "; ".join(drift)), drift=drift, identity=identity)
    # api_server: added by core/module.run from the client the identity was read with.
    return {"changed": False, "salt": plan["salt"], "identity": identity, "plan": plan, "drift": []}
