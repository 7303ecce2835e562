# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpupool_rollout's argument spec of its nested options (components, rolling_update, gates,
business_changes), written once: the module takes them, and a runbook's tfops_pools, tfops_gates
and tfops_business_change_* are checked against the same spec before anything is written
(runbook/inputs.py)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import values
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout

# The keys of one pool of a runbook's tfops_pools (the pool_updates filter turns it into
# gpupool_rollout options).
POOL_KEYS = ("name", "pool", "cluster", "components", "rolling_update", "record_only")


def _dict(**options):
    return dict(type="dict", options=options)


COMPONENT_OPTIONS = dict(
    hypervisor=_dict(image=dict(type="str"), vector_image=dict(type="str"),
                     port_number=dict(type="int"), enable_vector=dict(type="bool"),
                     pod_template=dict(type="dict")),
    worker=_dict(image=dict(type="str"), pod_template=dict(type="dict")),
    client=_dict(image=dict(type="str"), operator_endpoint=dict(type="str"),
                 remote_mode_image=dict(type="str"), embedded_mode_image=dict(type="str"),
                 patch_to_pod=dict(type="dict"), patch_to_container=dict(type="dict"),
                 patch_to_embedded_worker_container=dict(type="dict"),
                 patch_embedded_worker_to_pod=dict(type="dict")),
)


_CLIENT = dict(timeout=dict(type="int", default=10), validate_certs=dict(type="bool", default=True),
               headers=dict(type="dict"))
GATE_OPTIONS = dict(
    bake_seconds=dict(type="int", default=30),
    gpu_phase=dict(type="bool", default=True),
    hypervisor_ready=dict(type="bool", default=True),
    max_hypervisor_restarts=dict(type="int", default=0),
    workloads_ready=dict(type="bool", default=True),
    max_warning_events=dict(type="int", default=0),
    ignore_event_reasons=dict(type="list", elements="str", default=[]),
    rules=dict(type="list", elements="dict", default=[], options=dict(
        code=dict(type="str", required=True), expression=dict(type="str", required=True),
        description=dict(type="str"),
        severity=dict(type="str", default="blocking", choices=["blocking", "warning", "info"]))),
    http=dict(type="list", elements="dict", default=[], options=dict(
        url=dict(type="str", required=True), status_codes=dict(type="list", elements="int", default=[]),
        **_CLIENT)),
    prometheus=dict(type="list", elements="dict", default=[], options=dict(
        url=dict(type="str", required=True), query=dict(type="str", required=True),
        min=dict(type="float"), max=dict(type="float"), **_CLIENT)),
)


# Business workloads' Pod templates changed while the pool rolls (workloads/changes.py): the gate.
BUSINESS_CHANGE_OPTIONS = dict(
    gate=dict(type="str", default="warn", choices=["off", "warn", "pause"]),
    workloads=dict(type="int"),
    percent=dict(type="int"),
    since=dict(type="dict"),
)


ROLLING_UPDATE_OPTIONS = dict(
    auto_update_hypervisor=dict(type="bool"),
    auto_update_worker=dict(type="bool"),
    auto_update_client=dict(type="bool"),
    batch_percentage=dict(type="int"),
    batch_interval=dict(type="str"),
)


def check_pool_item(item, name):
    """One pool of a runbook's tfops_pools: its name, or a mapping of gpupool_rollout's options
    for it, checked against the module's own spec and input rules before anything is written."""
    if isinstance(item, str):
        return item
    values.mapping(item, name, " (a pool is a name or {%s})" % ", ".join(POOL_KEYS))
    unknown = sorted(str(k) for k in item if k not in POOL_KEYS)
    if unknown:
        raise InvalidInput("%s: unknown key%s %s (a pool is a name or {%s})" % (
            name, "s" if len(unknown) > 1 else "", ", ".join(unknown), ", ".join(POOL_KEYS)))
    if not (item.get("pool") or item.get("name")):
        raise InvalidInput("%s: each pool needs a name (or pool)" % name)
    components = values.with_spec(COMPONENT_OPTIONS, item.get("components") or {}, name + ".components")
    policy = values.with_spec(ROLLING_UPDATE_OPTIONS, item.get("rolling_update") or {}, name + ".rolling_update")
    rollout.validate_task(values.pruned(components), values.pruned(policy), name + ".")
    return item
