#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpupool_rollout
short_description: Change a TensorFusion GPU pool's components and roll them out safely to done
version_added: 0.1.0
description:
  - Changes the hypervisor, worker and client settings and the rolling-update policy of one GPU pool
    through its TensorFusionCluster (the operator overwrites GPUPool specs from the cluster), then
    waits until every changed component is rolled out and synced.
  - The write is optimistic - on a conflict the cluster is read again and the same change applied,
    so a concurrent edit of another pool or field survives.
  - The wait is guarded against stale status. The operator has no C(observedGeneration) and its
    status right after a change still shows the old C(ConfigSynced). The module waits for the
    campaign the change starts (the C(tensor-fusion.ai/<component>-update-in-progress) hash) and
    only then for that hash with progress 100 and synced, the GPUPool C(Running) and, for the
    hypervisor, one Ready Pod per node with the new image.
  - A component whose C(autoUpdate*) flag is false never rolls; the module refuses such a change
    before writing unless the task turns the flag on.
  - The controller ignores the pool's own C(maintenanceWindow) and C(maxDuration); O(deadline),
    O(wait_timeout), O(stall_timeout) and O(on_deadline) are how this module enforces a window.
options:
  cluster:
    description:
      - Name of the TensorFusionCluster. Found automatically when exactly one exists.
    type: str
  record_only:
    description:
      - Components whose change is written but not rolled, because their C(autoUpdate*) flag is
        false - what a chart upgrade does for a component the pool does not roll (Pods created
        later get it). Without it such a change is refused, as the operator would never roll it.
      - The upgrade runbook passes the components of the new chart's pool changes that the pool
        does not roll.
    type: list
    elements: str
    choices: [hypervisor, worker, client]
    default: []
    version_added: 0.2.0
  namespace:
    description:
      - The namespace of TensorFusion's Helm release, which is the operator's own namespace
        (C(OPERATOR_NAMESPACE) upstream); the hypervisor Pods that the module waits for live there.
      - A namespace that does not exist is refused before anything is written (when the
        credentials may read namespaces).
    type: str
    default: tensor-fusion-sys
  pool:
    description:
      - The pool, as the entry name in C(spec.gpuPools[]) (for example V(shared)) or as the GPUPool
        name C(<cluster>-<pool>) (for example V(tensor-fusion-shared)).
    type: str
    required: true
  components:
    description:
      - Component settings to apply. Options left out keep their current value.
    type: dict
    suboptions:
      hypervisor:
        description: Hypervisor settings (C(componentConfig.hypervisor)).
        type: dict
        suboptions:
          image:
            description: Hypervisor image.
            type: str
          vector_image:
            description: Vector sidecar image.
            type: str
          port_number:
            description:
              - Hypervisor port. Changing it during an upgrade or rollback is not advised by the product.
            type: int
          enable_vector:
            description: Whether to run the vector sidecar.
            type: bool
          pod_template:
            description:
              - Merged into the existing C(podTemplate); lists of named items (containers, env,
                volumes, imagePullSecrets) merge by name.
              - A Kubernetes PodTemplate (C(template.metadata), C(template.spec)). A key unknown at
                any of its levels (PodTemplate, its template, ObjectMeta, PodSpec, Container, as of
                Kubernetes 1.35), a mapping where a list belongs (C(containers)) or a container
                without a name is refused before anything is written, with its path.
            type: dict
      worker:
        description: Worker settings (C(componentConfig.worker)).
        type: dict
        suboptions:
          image:
            description: Worker image.
            type: str
          pod_template:
            description: Merged into the existing C(podTemplate), as for the hypervisor.
            type: dict
      client:
        description: Client settings (C(componentConfig.client)).
        type: dict
        suboptions:
          image:
            description: Client image (the only client image the operator reads).
            type: str
          operator_endpoint:
            description: Operator endpoint injected into clients.
            type: str
          remote_mode_image:
            description: Kept for v1 compatibility; the operator does not read it and it starts no rollout.
            type: str
          embedded_mode_image:
            description: Kept for v1 compatibility; the operator does not read it and it starts no rollout.
            type: str
          patch_to_pod:
            description: Patch applied to client Pods.
            type: dict
          patch_to_container:
            description: Patch applied to client containers.
            type: dict
          patch_to_embedded_worker_container:
            description: Patch applied to embedded worker containers.
            type: dict
          patch_embedded_worker_to_pod:
            description: Patch applied to Pods with an embedded worker.
            type: dict
  rolling_update:
    description:
      - The pool's C(nodeManagerConfig.nodePoolRollingUpdatePolicy).
    type: dict
    suboptions:
      auto_update_hypervisor:
        description: Let the operator roll hypervisors (absent means false).
        type: bool
      auto_update_worker:
        description: Let the operator roll workers (absent means false).
        type: bool
      auto_update_client:
        description: Let the operator roll clients (absent means false).
        type: bool
      batch_percentage:
        description:
          - Share of nodes per batch, 1-100. 0 is refused - the operator would treat it as 100.
        type: int
      batch_interval:
        description: Gap between batches as a Go duration (V(1s), V(30s), V(1m30s)).
        type: str
  state:
    description:
      - V(present) applies the settings and waits for the rollout. Components this module paused
        earlier (O(on_deadline=pause) or V(paused)) are resumed, unless the task sets their flag.
      - V(paused) sets the C(autoUpdate*) flags of the components in O(components) (all when none
        are given) to false - the pause the product recommends outside a window.
      - V(resumed) sets them back to true and waits for the campaigns to finish.
    type: str
    choices: [present, paused, resumed]
    default: present
  stall_timeout:
    description:
      - Fail when no progress is seen for this many seconds, naming the Pending GPUNodes and the
        state of their hypervisor Pods. The operator itself waits forever on a stuck node.
    type: int
    default: 600
  pods_fail_after:
    description:
      - Fail as soon as hypervisor Pods of the pool have kept failing to start for this many
        seconds - a pull that fails (C(ErrImagePull), C(ImagePullBackOff)), a crash loop
        (C(CrashLoopBackOff)), an image or configuration the kubelet refuses, a Pod the scheduler
        reports C(Unschedulable) - naming each Pod's image, node and reason, instead of waiting
        O(stall_timeout) for a batch that cannot finish. The Pods are looked at every few seconds
        while a hypervisor campaign is waited for; a Pod that recovers is forgotten.
      - So are the Kubernetes Nodes of the GPUNodes that are not Running (the batch's). A node
        whose C(Ready) condition is not C(True) for this long (its kubelet gone) fails the wait
        too, naming it and the condition's reason. That needs C(get) on C(nodes) (the rbac role's
        upgrade and rotate manifests grant it); without it a warning says the nodes are not watched.
      - V(0) leaves only O(stall_timeout).
    type: int
    default: 60
  on_deadline:
    description:
      - What to do when O(wait_timeout) or O(deadline) ends the wait. V(fail) leaves the rollout
        running; V(pause) also turns the waited components' C(autoUpdate*) off. Either way the
        task fails, and running it again resumes and finishes.
    type: str
    choices: [fail, pause]
    default: fail
  wait_until_progress:
    description:
      - Return as soon as every waited component's campaign reaches this percentage, so that a
        role can show each batch. V(100) waits for the whole rollout.
    type: int
    default: 100
  gates:
    description:
      - Health gates for a hypervisor rollout. After each batch the module bakes the nodes just
        updated for O(gates.bake_seconds) and checks them. A failed gate pauses the pool
        (C(autoUpdateHypervisor) false) before any further node rolls, and the task fails with
        the check, the node and the evidence.
      - The operator moves to its next batch after C(batchInterval) whatever the nodes' health. So
        while the rollout runs, the module raises the pool's C(batchInterval) to the bake plus
        5 seconds, if it is shorter. The operator then waits for the gate. When the rollout ends,
        the module writes the pool's own interval back. A run killed mid-rollout leaves the longer
        interval in place. The operator then goes on batch by batch at that pace, without gates.
      - A rollout with gates takes about one bake per batch longer. RV(schedule) includes it.
      - Needs O(wait=true), O(state=present) and O(wait_until_progress=100). Only a hypervisor
        campaign is gated.
    type: dict
    version_added: 0.3.0
    suboptions:
      bake_seconds:
        description: How long each batch's nodes must stay healthy.
        type: int
        default: 30
      gpu_phase:
        description:
          - The batch's GPUs must be C(Running) at the end of the bake. A GPU that turns
            C(Unknown), C(Failed) or C(Destroying) fails the gate at once.
        type: bool
        default: true
      hypervisor_ready:
        description: Each node's hypervisor Pod must be Ready at the end of the bake.
        type: bool
        default: true
      max_hypervisor_restarts:
        description: The most container restarts of a node's hypervisor Pod allowed during the bake.
        type: int
        default: 0
      workloads_ready:
        description:
          - Every TensorFusion-enabled Pod (label C(tensor-fusion.ai/enabled=true)) on the
            batch's nodes must be Ready at the end of the bake.
        type: bool
        default: true
      max_warning_events:
        description:
          - The most Warning Events allowed per node since its batch started. Events about the
            node, its GPUNode, its GPUs, its hypervisor Pod and the TensorFusion Pods on it count.
        type: int
        default: 0
      ignore_event_reasons:
        description: Warning Event reasons that never count, for example V(FailedScheduling).
        type: list
        elements: str
        default: []
      rules:
        description:
          - Rules of your own, each a JMESPath expression over the batch's picture. They use the
            language of M(tensorfusion.ops.tf_cluster_info)'s O(tensorfusion.ops.tf_cluster_info#module:rules).
          - "The picture is C({nodes: [{name, gpus: [{name, phase, message}], hypervisor: {name,
            image, ready, restarts}, pods: [{namespace, name, ready, phase}], events: [{kind,
            name, reason, message}]}]})."
          - A match of a V(blocking) rule fails the gate. A list result names the objects by
            their C(name).
        type: list
        elements: dict
        default: []
        suboptions:
          code:
            description: A short name for the rule, shown in the failure.
            type: str
            required: true
          expression:
            description: The JMESPath expression.
            type: str
            required: true
          description:
            description: What a match means.
            type: str
          severity:
            description:
              - V(blocking) fails the gate. V(warning) and V(info) rules are accepted, as in
                M(tensorfusion.ops.tf_cluster_info), and ignored.
            type: str
            choices: [blocking, warning, info]
            default: blocking
      http:
        description:
          - URLs that must answer at the end of each bake, for teams whose health signals live
            outside Kubernetes. A status other than 2xx (or O(gates.http[].status_codes)), a
            timeout or a refused connection fails the gate.
        type: list
        elements: dict
        default: []
        suboptions:
          url:
            description: The URL, V(http://) or V(https://), fetched with GET.
            type: str
            required: true
          status_codes:
            description: The statuses that pass. Left empty, any 2xx passes.
            type: list
            elements: int
            default: []
          timeout:
            description: Seconds to wait for the answer.
            type: int
            default: 10
          validate_certs:
            description: Whether to verify the server's TLS certificate.
            type: bool
            default: true
          headers:
            description: Request headers, for example an C(Authorization) header.
            type: dict
      prometheus:
        description:
          - Prometheus-compatible instant queries (C(/api/v1/query)), run at the end of each bake.
            Every sample must lie within O(gates.prometheus[].min) and O(gates.prometheus[].max).
            An empty answer fails the gate, because no data is no proof.
        type: list
        elements: dict
        default: []
        suboptions:
          url:
            description: The server's base URL, for example V(http://prometheus:9090).
            type: str
            required: true
          query:
            description: The PromQL expression.
            type: str
            required: true
          min:
            description: The lowest value that passes.
            type: float
          max:
            description: The highest value that passes.
            type: float
          timeout:
            description: Seconds to wait for the answer.
            type: int
            default: 10
          validate_certs:
            description: Whether to verify the server's TLS certificate.
            type: bool
            default: true
          headers:
            description: Request headers.
            type: dict
  business_changes:
    description:
      - Business workloads are the Deployments, StatefulSets and DaemonSets whose Pod template is
        labelled C(tensor-fusion.ai/enabled=true). While the module waits for the pool's rollout,
        changes to their Pod templates are followed - listed once, then watched, never polled -
        and recorded in RV(business_changes). Each change names the workload and what changed -
        images, resource requests and limits, and TensorFusion's own annotations and labels (its
        GPU requests) from and to. Other fields (env, command, volumes, other annotations) are
        only named, never shown. Workloads created or deleted during the rollout count too;
        replica counts (an autoscaler's) do not.
      - Asking teams not to change business workloads' resource requests at scale while components
        roll keeps upgrade problems and scheduling problems apart. This is how the module notices
        when someone does.
      - Needs C(list) and C(watch) of C(deployments), C(statefulsets) and C(daemonsets) in every
        namespace. Without them a V(warn) gate warns that nothing was watched, and a V(pause)
        gate refuses the task before anything is written.
    type: dict
    default: {}
    version_added: 0.4.0
    suboptions:
      gate:
        description:
          - What happens when the changes reach the scale of O(business_changes.workloads) or
            O(business_changes.percent).
          - V(warn) records the changes and warns, naming the workloads and what changed.
          - V(pause) pauses the rollout as a deadline does with O(on_deadline=pause) - the waited
            components' C(autoUpdate*) off and the collection's pause marker - and the task fails,
            listing the changes. Running the same task again resumes and finishes the rollout.
          - V(off) watches nothing.
        type: str
        choices: ["off", warn, pause]
        default: warn
      workloads:
        description:
          - The gate acts once this many business workloads changed during the rollout.
          - With neither O(business_changes.workloads) nor O(business_changes.percent), the gate
            acts on the first change.
        type: int
      percent:
        description:
          - The gate acts once this share (1-100) of the business workloads changed during the
            rollout. The business workloads are those at the rollout's start, plus those created
            during it.
          - With O(business_changes.workloads) too, whichever is reached first.
        type: int
      since:
        description:
          - For a rollout followed over several calls, for example one call per batch as the
            C(tensorfusion.ops.gpupool_update) role does. Give it RV(business_changes) of the
            rollout's previous call.
          - The watch goes on from where that call stopped, so a change between two calls is
            seen. The changes recorded there keep counting.
        type: dict
  rollout_started:
    description:
      - When the rollout began (ISO 8601), for a rollout followed over several calls. Give it
        RV(started) of the rollout's first call.
      - A stuck node's diagnosis attaches only the Warning Events from then on. Without it, the
        time this call began.
    type: str
    version_added: 0.4.0
  wait_timeout:
    default: 3600
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
  - tensorfusion.ops.wait
  - tensorfusion.ops.wait.TIMEOUT
  - tensorfusion.ops.fence
attributes:
  check_mode:
    details: Writes nothing; returns the diff, the batches and an estimated duration.
  diff_mode:
    support: full
    details: Shows the pool's componentConfig and rolling policy before and after (secret-looking env values masked).
  idempotent:
    support: full
    details: A pool already at the requested settings is left alone; a rollout the operator is still running is waited for, not started again.
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: New hypervisor image, 20 % of the nodes per batch, done before the window ends
  tensorfusion.ops.gpupool_rollout:
    pool: shared
    components:
      hypervisor:
        image: tensorfusion/tensor-fusion-hypervisor:2.16.0
    rolling_update:
      auto_update_hypervisor: true
      batch_percentage: 20
      batch_interval: 30s
    deadline: "{{ window.deadline }}"
    on_deadline: pause

- name: Outside the window, keep the operator from rolling anything
  tensorfusion.ops.gpupool_rollout:
    pool: tensor-fusion-shared
    state: paused

- name: New hypervisor image, each batch baked for 60 s before the next one rolls
  tensorfusion.ops.gpupool_rollout:
    pool: shared
    components:
      hypervisor:
        image: tensorfusion/tensor-fusion-hypervisor:1.49.2
    rolling_update:
      batch_percentage: 20
    gates:
      bake_seconds: 60
      ignore_event_reasons: [FailedScheduling]
      rules:
        - code: GPU_MESSAGE
          expression: "nodes[?gpus[?message != '']]"
          description: a GPU of the batch reports a problem
      prometheus:
        - url: http://prometheus.monitoring:9090
          query: sum(rate(tf_worker_errors_total[1m]))
          max: 0
"""

RETURN = r"""
api_server:
  description: The API server the module talked to.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
cluster:
  description: The TensorFusionCluster.
  returned: always
  type: str
  sample: tensor-fusion
pool:
  description: The pool's entry name in the cluster.
  returned: always
  type: str
  sample: shared
gpupool:
  description: The GPUPool the operator derives from it.
  returned: always
  type: str
  sample: tensor-fusion-shared
changed_components:
  description: Components whose configuration hash the change moves.
  returned: always
  type: list
  elements: str
  sample: [hypervisor]
spec_changes:
  description:
    - What the task writes (or, in check mode, would write) in the pool entry, field by field - each
      C({field, from, to}) for a component's image, port or endpoint (C(hypervisor.image)) and for a
      rolling policy field (C(batchPercentage), C(autoUpdateHypervisor), ...), or C({field, hidden=true})
      for a Pod template or patch (never its content). Empty when nothing changes.
  returned: always
  type: list
  elements: dict
  sample:
    - {field: hypervisor.image, from: "tensorfusion/tensor-fusion-hypervisor:2.16.0", to: "tensorfusion/tensor-fusion-hypervisor:2.17.0"}
    - {field: batchPercentage, from: 100, to: 20}
waited_for:
  description: Components the module waited for (or, in check mode, would wait for).
  returned: always
  type: list
  elements: str
  sample: [hypervisor]
reconcile_requested:
  description:
    - The GPUPools annotated (C(tensorfusion.ops/reconcile-requested)) because the operator left
      the TensorFusionCluster C(Updating) after this task's write although every pool of it was
      C(Running) with nothing rolling (the operator does not always look at the cluster again
      after a write that starts no rollout); the annotation makes it look. Empty when it did not
      need to; a cluster still not C(Running) afterwards is a warning.
  returned: when the task wrote the cluster and waited
  type: list
  elements: str
  sample: [tensor-fusion-shared]
batches:
  description: Batches a full campaign takes with the resulting policy (ceil(100 / batchPercentage)).
  returned: always
  type: int
  sample: 5
estimated_seconds:
  description: The rollout's estimated duration (RV(schedule.seconds)); 0 when no campaign starts.
  returned: always
  type: float
  sample: 87.0
schedule:
  description:
    - The batches the change rolls and how long they take, by the operator's rule (batch size
      C(ceil(batchPercentage * nodes / 100)), C(ceil(100 / batchPercentage)) batches, a gap of at
      least C(max(batchInterval, 3s)) between them); each batch is estimated as long as the
      slowest hypervisor Pod of the pool took from creation to Ready, plus the operator's
      overhead. Null when no component's hash changes.
  returned: always
  type: dict
  contains:
    nodes:
      description: GPU nodes of the pool.
      type: int
    batch_percentage:
      description: The policy's C(batchPercentage).
      type: int
    batch_interval:
      description: The policy's C(batchInterval).
      type: str
    batch_seconds:
      description: The estimated time a batch's nodes take to come back (the slowest hypervisor Pod's creation to Ready).
      type: float
    batch_count:
      description: Batches of the campaign (empty ones included; the operator waits for them too).
      type: int
    batch_sizes:
      description: Nodes each batch updates.
      type: list
      elements: int
    batches:
      description: Each batch's index, nodes, start and end (seconds from the rollout's start) and the progress it reaches.
      type: list
      elements: dict
    seconds:
      description: The whole campaign's estimated duration.
      type: float
  sample:
    nodes: 4
    batch_percentage: 50
    batch_interval: 1s
    batch_seconds: 8.0
    batch_count: 2
    batch_sizes: [2, 2]
    batches: [{index: 1, nodes: 2, start: 0.0, end: 8.0, progress: 50}, {index: 2, nodes: 2, start: 3.0, end: 11.0, progress: 100}]
    seconds: 11.5
components:
  description: Per component, the status before and after.
  returned: always
  type: dict
  sample:
    hypervisor:
      before_hash: 9f0c2d4e1a7b3c55
      after_hash: 1b2c3d4e5f607182
      campaign: 1b2c3d4e5f607182
      progress: 100
      synced: true
      batches: 5
      duration: 61.2
timeline:
  description: Progress changes seen during the wait, with timestamps and seconds since the write.
  returned: always
  type: list
  elements: dict
  sample:
    - {time: "2026-11-29T02:01:03.120000Z", seconds: 3.1, component: hypervisor, campaign: 1b2c3d4e5f607182, progress: 20, synced: false}
gates:
  description:
    - With O(gates), one verdict per gated batch, in order. Null without gates.
    - A batch's C(failures) are C({check, node, evidence}) items. C(check) is one of
      C(gpu_phase), C(hypervisor_ready), C(hypervisor_restarts), C(workloads_ready),
      C(warning_events), C(rule:<code>), C(http) or C(prometheus).
  returned: always
  type: list
  elements: dict
  sample:
    - {batch: 1, nodes: [gpu-0, gpu-1], passed: false, bake_seconds: 30, seconds: 4.2,
       started: "2026-11-29T02:01:10.000000Z",
       failures: [{check: gpu_phase, node: gpu-0, evidence: "GPU gpu-0-gpu-0 is Unknown"}]}
started:
  description: When the rollout began - O(rollout_started), or when this call began.
  returned: always
  type: str
  sample: "2026-11-29T02:01:00.120000Z"
business_changes:
  description:
    - The business workloads whose Pod templates changed while the module waited for the rollout
      (O(business_changes)), since the rollout began (O(business_changes.since)). Null when
      nothing was watched - gate V(off), check mode, nothing to wait for.
    - Also in the result of a failed task. A task that O(business_changes.gate=pause) stopped
      fails with C(error=BusinessChangesPaused) and RV(paused).
    - C(changes[].fields) are C({field, from, to}) items, for example
      C(spec.containers[app].resources.requests.cpu), or C({field, hidden=true}) for a field that
      is never shown. C(change) is C(changed), C(created), C(deleted) or C(recreated).
    - C(unseen) says what could not be watched. C(resource_versions) is where the watch stopped,
      for the rollout's next call.
  returned: always
  type: dict
  sample:
    gate: warn
    workloads: null
    percent: null
    started: "2026-11-29T02:01:00.120000Z"
    ended: "2026-11-29T02:03:10.500000Z"
    business_workloads: 12
    changed: 1
    share: 8
    reached: true
    warned: 1
    changes:
      - {kind: Deployment, namespace: shop, name: recommender, change: changed, writes: 1,
         fields: [{field: "spec.containers[app].resources.requests.cpu", from: "1", to: "4"},
                  {field: "metadata.annotations[tensor-fusion.ai/vram-request]", from: 4Gi, to: 16Gi}]}
    unseen: []
    resource_versions: {Deployment: "48213", StatefulSet: "48213", DaemonSet: "48213"}
paused:
  description: The components a deadline (O(on_deadline=pause)) or the business changes gate paused.
  returned: when the task failed and paused the rollout
  type: list
  elements: str
  sample: [hypervisor]
nodes:
  description: GPUNodes of the pool - total, updated (hypervisor Pods with the requested image) and stuck (not Running).
  returned: always
  type: dict
  sample: {total: 10, updated: 10, stuck: 0}
diff:
  description: The pool's componentConfig and rolling policy before and after.
  returned: always
  type: dict
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import FENCE_ARG_SPEC, wait_arg_spec
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.options import (
    BUSINESS_CHANGE_OPTIONS,
    COMPONENT_OPTIONS,
    GATE_OPTIONS,
    ROLLING_UPDATE_OPTIONS,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import gpupool_rollout as backend
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import Fence


def main():
    module = tfmodule.new_module(
        dict(**FENCE_ARG_SPEC, cluster=dict(type="str"),
             namespace=dict(type="str", default="tensor-fusion-sys"),
             record_only=dict(type="list", elements="str", default=[],
                              choices=["hypervisor", "worker", "client"]),
             pool=dict(type="str", required=True),
             components=dict(type="dict", options=COMPONENT_OPTIONS),
             rolling_update=dict(type="dict", options=ROLLING_UPDATE_OPTIONS),
             state=dict(type="str", default="present", choices=["present", "paused", "resumed"]),
             **wait_arg_spec(timeout=3600),
             stall_timeout=dict(type="int", default=600),
             pods_fail_after=dict(type="int", default=60),
             on_deadline=dict(type="str", default="fail", choices=["fail", "pause"]),
             wait_until_progress=dict(type="int", default=100),
             gates=dict(type="dict", options=GATE_OPTIONS),
             business_changes=dict(type="dict", options=BUSINESS_CHANGE_OPTIONS, default={}),
             rollout_started=dict(type="str")),
        supports_check_mode=True)
    tfmodule.run(module, backend.run, fence=Fence)


if __name__ == "__main__":
    main()
