#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: tf_cluster_info
short_description: Health picture of a TensorFusion installation, with findings a person can act on
version_added: 0.1.0
description:
  - Gathers, in a few paginated list calls, the TensorFusionClusters, GPUPools (phase,
    componentStatus, rollouts in progress), GPUNodes, GPUs, the Pods of the operator namespace
    (controller, alert-manager, hypervisors), the Helm release's status (from Helm's storage
    labels; the release data is never read), recent warning Events and the business workloads
    that use TensorFusion (replicas, readinessProbe, PodDisruptionBudget coverage).
  - Returns the data and C(findings), each with a code, a severity (V(blocking), V(warning),
    V(info)), the object and a sentence. Add rules of your own with O(rules).
  - Read-only; runs fully in check mode.
options:
  namespace:
    description: Namespace of the TensorFusion operator and of its Helm release.
    type: str
    default: tensor-fusion-sys
  release_name:
    description: Name of the Helm release.
    type: str
    default: tensor-fusion-sys
  events_since:
    description: Only warning Events at or after this ISO 8601 time (for example when a change began).
    type: str
  events_limit:
    description: How many of the newest warning Events to return.
    type: int
    default: 30
  workloads:
    description: Whether to gather the business workloads that use TensorFusion.
    type: bool
    default: true
  cached_reads:
    description:
      - Read the lists that grow with the cluster - GPU nodes, the Pods of O(namespace), GPUs
        (their C(Phase) column only), business workloads and PodDisruptionBudgets - from the
        API server's watch cache (C(resourceVersion=0)) in one request each, instead of page by
        page from etcd. The cache is normally milliseconds behind; V(false) reads them
        consistently from etcd, 500 objects a page.
      - Clusters, pools, the controller, the alert-manager, the release and the Events are
        always read consistently.
    type: bool
    default: true
  findings_per_code:
    description:
      - At most this many findings of one code; the rest of that code are counted in one
        finding of the same severity (a blocking code still blocks) and in C(findings_omitted).
        C(summary) always counts every finding. V(0) lists them all.
    type: int
    default: 20
  rules:
    description:
      - Extra rules, each a JMESPath expression over the returned C(data). A list result gives
        one finding per item (an item's C(name) names the object); a true scalar gives one finding.
    type: list
    elements: dict
    default: []
    suboptions:
      code:
        description: Code of the finding.
        type: str
        required: true
      severity:
        description: Severity of the finding.
        type: str
        choices: [blocking, warning, info]
        required: true
      expression:
        description: JMESPath expression over C(data).
        type: str
        required: true
      description:
        description: Sentence for the finding.
        type: str
extends_documentation_fragment:
  - tensorfusion.ops.auth
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
requirements:
  - jmespath (for O(rules))
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Health picture before a change
  tensorfusion.ops.tf_cluster_info:
  register: tf_health

- name: Treat any pool with fewer than 8 ready nodes as blocking
  tensorfusion.ops.tf_cluster_info:
    rules:
      - code: POOL_TOO_SMALL
        severity: blocking
        expression: "pools[?ready_nodes < `8`]"
        description: a pool has fewer than 8 ready GPU nodes
"""

RETURN = r"""
api_server:
  description: The API server the module talked to.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
data:
  description:
    - The gathered picture - clusters, pools (with per-component hash, progress, synced,
      in_progress, auto_update), gpunodes, gpus (counts by phase), hypervisors, operator_pods,
      controller, alert_manager, release (name, revision, status), warning_events, workloads.
  returned: always
  type: dict
findings:
  description: What needs attention, most severe first.
  returned: always
  type: list
  elements: dict
  sample:
    - {code: GPUNODE_NOT_RUNNING, severity: blocking, object: gpunode/gpu-17,
       message: "GPUNode gpu-17 is Pending: a node that does not return to Running blocks every hypervisor rollout of its pool forever"}
findings_omitted:
  description: Per code, how many findings were left out of C(findings) by O(findings_per_code).
  returned: always
  type: dict
  sample: {WORKLOAD_NO_PDB: 1980}
summary:
  description: Number of findings per severity, those left out of C(findings) included.
  returned: always
  type: dict
  sample: {blocking: 0, warning: 2, info: 1}
api_requests:
  description: List pages fetched (the module makes no per-object calls).
  returned: always
  type: int
  sample: 14
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import findings
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.clusterinfo import Gatherer
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.errors import InvalidInput


def gather(module):
    params = module.params
    findings.validate_rules(params["rules"])
    if params["findings_per_code"] < 0:
        raise InvalidInput("findings_per_code must be 0 (no limit) or more")
    with tfmodule.connected(module) as kube:
        data = Gatherer(kube, params["namespace"], params["release_name"], params["events_since"],
                        params["events_limit"], params["workloads"], params["cached_reads"]).gather()
    found = findings.builtin_findings(data) + findings.custom_findings(data, params["rules"])
    order = dict((s, i) for i, s in enumerate(findings.SEVERITIES))
    found.sort(key=lambda f: (order[f["severity"]], f["code"], f["object"]))
    shown, omitted = findings.cap_per_code(found, params["findings_per_code"])
    return dict(changed=False, data=data, findings=shown, findings_omitted=omitted,
                summary=findings.summarize(found), api_server=kube.server, api_requests=kube.requests)


def main():
    module = tfmodule.new_module(
        dict(namespace=dict(type="str", default="tensor-fusion-sys"),
             release_name=dict(type="str", default="tensor-fusion-sys"),
             events_since=dict(type="str"),
             events_limit=dict(type="int", default=30),
             workloads=dict(type="bool", default=True),
             cached_reads=dict(type="bool", default=True),
             findings_per_code=dict(type="int", default=20),
             rules=dict(type="list", elements="dict", default=[], options=dict(
                 code=dict(type="str", required=True),
                 severity=dict(type="str", required=True, choices=["blocking", "warning", "info"]),
                 expression=dict(type="str", required=True),
                 description=dict(type="str")))),
        supports_check_mode=True)
    tfmodule.run(module, gather)


if __name__ == "__main__":
    main()
