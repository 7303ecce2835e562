#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: tf_cluster_info
short_description: Health picture of a TensorFusion installation, with findings a person can act on
version_added: 0.1.0
description:
  - Gathers, in a few paginated list calls, the TensorFusionClusters, GPUPools (phase,
    componentStatus, rollouts in progress), GPUNodes, GPUs, the Pods of the operator namespace
    (controller, alert-manager, hypervisors), the Helm release's status (from Helm's storage
    labels), recent warning Events and the business workloads that use TensorFusion - the
    Deployments, StatefulSets and DaemonSets whose Pod template is labelled
    C(tensor-fusion.ai/enabled=true) (replicas, readinessProbe, PodDisruptionBudget coverage, and
    whether their own rollout is complete - finding C(WORKLOAD_ROLLOUT_IN_PROGRESS)).
  - Tells for each TensorFusionCluster whether a Helm release owns it (Helm's ownership metadata)
    and, if so, what of its live pools the next chart upgrade would revert - the differences
    between the live pool settings and the release's last rendering of that cluster
    (C(POOL_DRIFTS_FROM_CHART)).
  - Returns the data and C(findings), each with a code, a severity (V(blocking), V(warning),
    V(info)), the object and a sentence. Add rules of your own with O(rules).
  - Read-only; runs fully in check mode.
notes:
  - "Why the chart drift matters: the chart renders the TensorFusionCluster, and Helm patches a
    custom resource with a JSON merge patch from the old rendering to the new one, in which a list
    is replaced whole. The next chart upgrade that changes anything in the rendered
    C(spec.gpuPools) makes the live pools the chart's again: images, Pod templates, the rolling
    policy and the autoUpdate flags set on the live object are reverted, and a rollout starts at the
    chart's policy."
  - "Compared, per pool entry (by name): the component fields (hypervisor C(image),
    C(vectorImage), C(portNumber), C(enableVector), C(podTemplate); worker C(image), C(podTemplate);
    client C(image), C(operatorEndpoint), C(patchToPod), C(patchToContainer), C(remoteModeImage),
    C(embeddedModeImage)), the rolling policy (C(nodePoolRollingUpdatePolicy) autoUpdateHypervisor,
    autoUpdateWorker, autoUpdateClient, batchPercentage, batchInterval) and whole entries on one
    side only. Defaults the API server or the operator fills in (portNumber 8000, batchPercentage
    100, batchInterval 1s, autoUpdate false) are no difference. Pod templates and patches are
    compared but never shown (env values can be secrets)."
  - "Helm's release data is read for one purpose only: for a TensorFusionCluster that a Helm
    release owns, the newest deployed revision's storage Secret
    (C(sh.helm.release.v1.<release>.v<N>)) is fetched, decoded in memory, and only the
    TensorFusionCluster documents of its manifest are kept (only their compared pool fields leave
    the module). The values, the chart, the config and every other manifest document are never
    returned, logged or put in a finding. The release status and the revisions come from the
    storage Secrets' labels (a metadata-only list)."
  - "Performance: one extra GET per Helm release that owns a TensorFusionCluster (normally one),
    none for clusters that Helm does not own; counted in C(api_requests)."
  - "Permissions: the GET needs C(get) on secrets in the release namespace (the precheck RBAC in
    C(roles/rbac/files/precheck.yml) grants it). Without it, or when the rendering cannot be read, the
    module does not fail: a C(POOL_DRIFT_UNCHECKED) info finding says why, naming the missing
    permission."
  - "A TensorFusionCluster with the annotation C(ops.tensor-fusion.ai/chart-pools) was rendered
    through tensorfusion.ops' post-renderer, which writes the live pools into the rendering: there
    is nothing revertible, so no drift is reported and nothing is fetched; the chart's own
    rendering of the pools recorded there is returned as C(chart_pools), env values hashed."
  - "Every finding code with its severity and meaning: C(docs/findings.md) in the collection."
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
  lock_name:
    description:
      - The maintenance lock's Lease in O(namespace) (see M(tensorfusion.ops.maintenance_lock)).
        When someone holds it, an info finding C(MAINTENANCE_LOCK_HELD) names the holder and the
        expiry (a runbook started now would fail at its lock). An empty value, or a ServiceAccount
        that may not read Leases, skips it.
    type: str
    default: tensorfusion-ops-maintenance
  own_lock_holder:
    description:
      - The holder identity of the run asking (a runbook's precheck under its own lock); that
        holder's lock is no finding.
    type: str
  deadline:
    description:
      - An absolute time (ISO 8601, for example a maintenance window's deadline) until which
        such reads are tried again; with O(retry_timeout) too, the earlier of the two ends the
        retries. The runbooks' precheck and verify set it to the run's deadline, so that an API
        server outage within it is ridden out instead of failing the step.
    type: str
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
  - tensorfusion.ops.attributes
  - tensorfusion.ops.attributes.READ_ONLY
  - tensorfusion.ops.auth
  - tensorfusion.ops.retry
requirements:
  - jmespath (for O(rules))
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Health picture before a change
  tensorfusion.ops.tf_cluster_info:
  register: tf_health

- name: Health picture after a change, riding out an API server restart until the window's deadline
  tensorfusion.ops.tf_cluster_info:
    retry_timeout: 300
    deadline: "{{ window.deadline }}"
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
      controller, alert_manager, release (name, revision, status), warning_events, workloads, lock.
  returned: always
  type: dict
  contains:
    lock:
      description:
        - The maintenance lock's Lease as M(tensorfusion.ops.maintenance_lock) returns it (holder,
          acquire_time, renew_time, expires, stale, purpose, user, host, job_id); null without a
          Lease, with O(lock_name) empty, or when Leases may not be read.
      type: dict
    workloads:
      description:
        - The business workloads (O(workloads)), each C({kind, namespace, name, replicas,
          readiness_probe, pdb, rollout}) - C(replicas) null for a DaemonSet; C(rollout) why its own
          rollout is not complete (C(observedGeneration) behind, replicas not yet updated, ready or
          available, a progress deadline exceeded), null when it is.
      type: list
      elements: dict
    clusters:
      description: The TensorFusionClusters.
      type: list
      elements: dict
      contains:
        name:
          description: Name of the TensorFusionCluster.
          type: str
        phase:
          description: Its C(status.phase).
          type: str
        pools:
          description: Names of its pool entries.
          type: list
          elements: str
        paused:
          description: Per pool entry, the components tensorfusion.ops paused at a deadline.
          type: dict
        conditions:
          description: Its status conditions (type, status, reason).
          type: list
          elements: dict
        helm_release:
          description:
            - The Helm release that owns the cluster, from Helm's ownership metadata (label
              C(app.kubernetes.io/managed-by=Helm), annotations C(meta.helm.sh/release-name) and
              C(meta.helm.sh/release-namespace)); null when Helm does not own it.
          type: dict
          sample: {name: tensor-fusion-sys, namespace: tensor-fusion-sys}
        chart_pools:
          description:
            - What the chart itself rendered for the pools (per entry name, its specTemplate), as the
              chart step's post-renderer recorded it in the annotation
              C(ops.tensor-fusion.ai/chart-pools), every env value replaced by its sha256; V({})
              when the annotation cannot be read; null without the annotation. Information only.
          type: dict
        chart_drift:
          description:
            - What the next chart upgrade that changes the rendered pools would revert; null when
              Helm does not own the cluster or C(chart_pools) is set (nothing revertible).
          type: dict
          contains:
            revision:
              description: The release revision compared with (its newest deployed one).
              type: int
            unchecked:
              description: Why the comparison could not be made (for example a missing permission); null when it was.
              type: str
            differences:
              description:
                - Null when unchecked. Each item has C(pool) (the entry name) and either C(only)
                  (V(live) or V(rendered)) for a whole entry on one side only, or C(field) (its path
                  under C(specTemplate)) with C(live) and C(rendered) (the effective values), or
                  C(field) with C(hidden=true) for a Pod template or patch that differs (never its
                  content).
              type: list
              elements: dict
              sample:
                - {pool: shared, field: componentConfig.hypervisor.image,
                   live: "tensorfusion/tensor-fusion-hypervisor:2.16.0", rendered: "tensorfusion/tensor-fusion-hypervisor:2.15.0"}
                - {pool: shared, field: componentConfig.worker.podTemplate, hidden: true}
findings:
  description:
    - What needs attention, most severe first.
    - Findings about a pool, its nodes or its cluster name the GPUPool (C(pool), or C(pools) for a
      cluster); C(ROLLOUT_IN_PROGRESS) also names the C(component) and the C(image) the pool's
      spec has, which the runbooks compare with what a run asks for to take an interrupted run's
      campaign over.
  returned: always
  type: list
  elements: dict
  sample:
    - {code: GPUNODE_NOT_RUNNING, severity: blocking, object: gpunode/gpu-17, pool: tensor-fusion-shared,
       message: "GPUNode gpu-17 is Pending: a node that does not return to Running blocks every hypervisor rollout of its pool forever"}
    - {code: POOL_DRIFTS_FROM_CHART, severity: warning, object: tensorfusioncluster/tensor-fusion,
       message: "TensorFusionCluster tensor-fusion pool shared differs from the rendering of Helm release
                 tensor-fusion-sys/tensor-fusion-sys revision 3, which the next chart upgrade that changes
                 the rendered pools puts back (set these in the chart's values to keep them):
                 componentConfig.hypervisor.image live \"tensorfusion/tensor-fusion-hypervisor:2.16.0\",
                 chart \"tensorfusion/tensor-fusion-hypervisor:2.15.0\";
                 nodeManagerConfig.nodePoolRollingUpdatePolicy.batchPercentage live 50, chart 20"}
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
  description:
    - Requests made - list pages, plus one GET of the newest deployed revision per Helm release
      that owns a TensorFusionCluster (no other per-object calls).
  returned: always
  type: int
  sample: 14
"""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import RETRY_ARG_SPEC
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import tf_cluster_info as backend


def main():
    module = tfmodule.new_module(
        dict(namespace=dict(type="str", default="tensor-fusion-sys"),
             release_name=dict(type="str", default="tensor-fusion-sys"),
             events_since=dict(type="str"),
             events_limit=dict(type="int", default=30),
             workloads=dict(type="bool", default=True),
             cached_reads=dict(type="bool", default=True),
             findings_per_code=dict(type="int", default=20),
             deadline=dict(type="str"),
             lock_name=dict(type="str", default="tensorfusion-ops-maintenance"),
             own_lock_holder=dict(type="str"),
             rules=dict(type="list", elements="dict", default=[], options=dict(
                 code=dict(type="str", required=True),
                 severity=dict(type="str", required=True, choices=["blocking", "warning", "info"]),
                 expression=dict(type="str", required=True),
                 description=dict(type="str"))),
             **RETRY_ARG_SPEC),
        supports_check_mode=True)
    tfmodule.run(module, backend.run)


if __name__ == "__main__":
    main()
