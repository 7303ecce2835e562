#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: workload_restart
short_description: Restart Deployments, StatefulSets or DaemonSets and wait for the rollout
version_added: 0.1.0
description:
  - Restarts workloads the way C(kubectl rollout restart) does (a C(kubectl.kubernetes.io/restartedAt)
    annotation on the Pod template), then waits the way C(kubectl rollout status) does, until the
    controller has observed the change and every replica is updated, ready and available.
  - Idempotent through O(restarted_after) or O(restarted_after_secret); a workload that needs no
    restart is left alone and reported with C(changed=false), and with O(wait) its rollout is
    still checked to be complete, in case an earlier run stopped in the middle of one.
  - With neither O(name) nor O(label_selectors), restarts TensorFusion's controller Deployment,
    found by its label C(tensor-fusion.ai/component=operator) (the product docs call it
    C(tensor-fusion-sys-controller-manager), the chart C(tensor-fusion-sys-controller)).
  - Kubernetes restarts nothing when a Secret changes; this is the step that makes Pods read it again.
options:
  kind:
    description: Kind of the workloads.
    type: str
    choices: [Deployment, StatefulSet, DaemonSet]
    default: Deployment
  namespace:
    description: Namespace of the workloads.
    type: str
    default: tensor-fusion-sys
  name:
    description: Name of one workload. Mutually exclusive with O(label_selectors).
    type: str
  label_selectors:
    description:
      - Label selectors (joined with AND) that pick the workloads.
    type: list
    elements: str
  restarted_after:
    description:
      - An ISO 8601 time. A workload whose live Pods all started at or after it is not restarted.
      - Without it (and without O(restarted_after_secret)) every run restarts, as C(kubectl) does.
    type: str
  restart:
    description:
      - V(false) restarts nothing and only waits, as C(kubectl rollout status) does, until the
        rollout of each workload is complete (for example after a Helm upgrade changed it).
    type: bool
    default: true
  restarted_after_secret:
    description:
      - Restart once per version of this Secret, so that a restart after a rotation happens once.
      - The restart records the Secret's UID and resourceVersion in the Pod template annotation
        C(secret.ops.tensor-fusion.ai/<name>); a later run with the same Secret version changes
        nothing. No Secret content, nor a hash of it, is written anywhere or returned.
      - The first run for a workload restarts it, since nothing recorded the version before.
    type: dict
    suboptions:
      name:
        description: Name of the Secret.
        type: str
        required: true
      namespace:
        description: Namespace of the Secret; defaults to O(namespace).
        type: str
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
  - tensorfusion.ops.fence
  - tensorfusion.ops.wait
  - tensorfusion.ops.wait.TIMEOUT
attributes:
  check_mode:
    details: Reports which workloads would restart; writes nothing.
  diff_mode:
    support: full
    details: Shows the restart annotation before and after for each restarted workload.
  idempotent:
    support: partial
    details: With O(restarted_after) or O(restarted_after_secret), a workload restarted since then is left alone; otherwise each run restarts.
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Restart TensorFusion's controller (found by its labels) and wait for it
  tensorfusion.ops.workload_restart:
    namespace: tensor-fusion-sys

- name: Restart it only if it did not restart since the greptime Secret changed
  tensorfusion.ops.workload_restart:
    restarted_after_secret:
      name: tensor-fusion-sys-greptimedb-secret

- name: Restart the alert-manager StatefulSet inside the window
  tensorfusion.ops.workload_restart:
    kind: StatefulSet
    label_selectors:
      - tensor-fusion.ai/component=alert-manager
    deadline: "{{ window.deadline }}"
"""

RETURN = r"""
api_server:
  description: The API server the module talked to.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
workloads:
  description: One entry per workload found.
  returned: always
  type: list
  elements: dict
  contains:
    kind:
      description: Kind of the workload.
      type: str
      sample: Deployment
    namespace:
      description: Namespace.
      type: str
      sample: tensor-fusion-sys
    name:
      description: Name.
      type: str
      sample: tensor-fusion-sys-controller
    restarted:
      description: Whether it was (or in check mode, would be) restarted.
      type: bool
      sample: true
    reason:
      description: Why it was or was not restarted.
      type: str
      sample: some Pods started before 2026-11-29T02:00:00+00:00
    old_revision:
      description: ReplicaSet (Deployment), update revision (StatefulSet) or generation (DaemonSet) before.
      type: str
      sample: tensor-fusion-sys-controller-7d9f8c6b5
    new_revision:
      description: The same after the rollout; null in check mode.
      type: str
      sample: tensor-fusion-sys-controller-5c4b7f9d8
    previous_restarted_at:
      description: The restart annotation's value before this run, if any.
      type: str
      sample: "2026-11-28T02:01:00Z"
    restarted_at:
      description: The restart annotation's value.
      type: str
      returned: when restarted
      sample: "2026-11-29T02:03:04Z"
    seconds:
      description: Time from the restart to the end of the rollout.
      type: float
      returned: when restarted and not in check mode
      sample: 12.5
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import (
    FENCE_ARG_SPEC,
    WAIT_ARG_SPEC,
    deadline_from,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import workload_restart as backend
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import Fence


def main():
    module = tfmodule.new_module(
        dict(**FENCE_ARG_SPEC,
             kind=dict(type="str", default="Deployment", choices=["Deployment", "StatefulSet", "DaemonSet"]),
             namespace=dict(type="str", default="tensor-fusion-sys"),
             name=dict(type="str"),
             label_selectors=dict(type="list", elements="str"),
             restarted_after=dict(type="str"),
             restart=dict(type="bool", default=True),
             restarted_after_secret=dict(type="dict", no_log=False, options=dict(
                 name=dict(type="str", required=True),
                 namespace=dict(type="str"))),
             **WAIT_ARG_SPEC),
        supports_check_mode=True,
        mutually_exclusive=[("name", "label_selectors"),
                            ("restarted_after", "restarted_after_secret")])
    tfmodule.run(module, backend.run, deadline=deadline_from, fence=Fence)


if __name__ == "__main__":
    main()
