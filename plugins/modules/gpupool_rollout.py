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
  wait:
    description: Whether to wait for the rollout.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait at most.
    type: int
    default: 3600
  deadline:
    description:
      - Absolute time (ISO 8601), such as a maintenance window's end, after which no wait goes on.
        A deadline already past is refused before any write.
    type: str
  stall_timeout:
    description:
      - Fail when no progress is seen for this many seconds, naming the Pending GPUNodes and the
        state of their hypervisor Pods. The operator itself waits forever on a stuck node.
    type: int
    default: 600
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
extends_documentation_fragment:
  - tensorfusion.ops.auth
  - tensorfusion.ops.fence
attributes:
  check_mode:
    support: full
    description: Writes nothing; returns the diff, the batches and an estimated duration.
  diff_mode:
    support: full
    description: Shows the pool's componentConfig and rolling policy before and after (secret-looking env values masked).
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
waited_for:
  description: Components the module waited for (or, in check mode, would wait for).
  returned: always
  type: list
  elements: str
  sample: [hypervisor]
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

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.common_args import FENCE_ARG_SPEC
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool_task import (
    RolloutTask,
    validate,
)


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


def _prune(value):
    """Drop the None that Ansible fills in for every sub-option left out."""
    if isinstance(value, dict):
        return dict((k, _prune(v)) for k, v in value.items() if v is not None)
    return value


def rollout_pool(module):
    params = dict(module.params)
    params["components"] = _prune(params["components"]) or {}
    params["rolling_update"] = _prune(params["rolling_update"]) or {}
    deadline = validate(params)
    with tfmodule.connected(module, deadline) as kube:
        task = RolloutTask(kube, params, module.check_mode, deadline)
        result = task.run()
    tfmodule.warn_all(module, task.warnings)
    result["api_server"] = kube.server
    return result


def main():
    module = tfmodule.new_module(
        dict(**FENCE_ARG_SPEC, cluster=dict(type="str"),
             namespace=dict(type="str", default="tensor-fusion-sys"),
             record_only=dict(type="list", elements="str", default=[],
                              choices=["hypervisor", "worker", "client"]),
             pool=dict(type="str", required=True),
             components=dict(type="dict", options=COMPONENT_OPTIONS),
             rolling_update=_dict(auto_update_hypervisor=dict(type="bool"),
                                  auto_update_worker=dict(type="bool"),
                                  auto_update_client=dict(type="bool"),
                                  batch_percentage=dict(type="int"),
                                  batch_interval=dict(type="str")),
             state=dict(type="str", default="present", choices=["present", "paused", "resumed"]),
             wait=dict(type="bool", default=True),
             wait_timeout=dict(type="int", default=3600),
             deadline=dict(type="str"),
             stall_timeout=dict(type="int", default=600),
             on_deadline=dict(type="str", default="fail", choices=["fail", "pause"]),
             wait_until_progress=dict(type="int", default=100)),
        supports_check_mode=True)
    tfmodule.run(module, rollout_pool)


if __name__ == "__main__":
    main()
