# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tf_cluster_info's body: the read-only picture of an installation (cluster/info.py) and the
findings on it (cluster/findings.py)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import findings
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster.info import Gatherer
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import rules
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import retry_deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput


def run(ctx):
    """tf_cluster_info's body (core/module.py's contract)."""
    params = ctx.params
    rules.validate_rules(params["rules"])
    if params["findings_per_code"] < 0:
        raise InvalidInput("findings_per_code must be 0 (no limit) or more")
    # Read only: every read may be tried again until the deadline (none: fail at once).
    with ctx.connected(retry_deadline(params, params["deadline"])) as kube:
        data = Gatherer(kube, params["namespace"], params["release_name"], params["events_since"],
                        params["events_limit"], params["workloads"], params["cached_reads"],
                        params["lock_name"]).gather()
    found = findings.builtin_findings(data, params["own_lock_holder"]) + \
        rules.custom_findings(data, params["rules"])
    order = dict((s, i) for i, s in enumerate(rules.SEVERITIES))
    found.sort(key=lambda f: (order[f["severity"]], f["code"], f["object"]))
    shown, omitted = findings.cap_per_code(found, params["findings_per_code"])
    return dict(changed=False, data=data, findings=shown, findings_omitted=omitted,
                summary=findings.summarize(found), api_requests=kube.requests)
