#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: tf_acceptance
short_description: Accept a TensorFusion installation with a real TensorFusion-enabled Pod
version_added: 0.1.0
description:
  - Creates a scratch namespace and in it a Pod labelled C(tensor-fusion.ai/enabled=true) with
    TFLOPS and VRAM requests (and a native C(nvidia.com/gpu) limit), then checks what TensorFusion's
    webhook injected - component, pool and template-hash labels, normalised request annotations,
    C(HYPERVISOR_IP) and C(HYPERVISOR_PORT), the native GPU limit removed - and that the Pod
    becomes Ready. The product's own words - Pod Ready alone does not count as passing.
  - A Pod the webhook did not mutate fails at once, without waiting for it to become Ready.
  - Always deletes the Pod and the namespace, also when a check fails, unless O(keep=true).
  - Leaves nothing behind, so it reports C(changed=false).
options:
  namespace:
    description: Scratch namespace to create (and delete). A random name is used when not given.
    type: str
  pool:
    description: GPUPool to ask for (for example V(tensor-fusion-shared)); the default pool when not given.
    type: str
  image:
    description: Image of the test container.
    type: str
    default: busybox:1.36
  tflops_request:
    description: C(tensor-fusion.ai/tflops-request) of the test Pod.
    type: str
    default: "1"
  vram_request:
    description: C(tensor-fusion.ai/vram-request) of the test Pod.
    type: str
    default: 1Gi
  isolation:
    description: C(tensor-fusion.ai/isolation) of the test Pod.
    type: str
    choices: [shared, soft, hard, partitioned]
    default: soft
  is_local_gpu:
    description: C(tensor-fusion.ai/is-local-gpu) of the test Pod (local mode or remote vGPU).
    type: bool
    default: true
  keep:
    description: Keep the namespace and Pod for inspection instead of deleting them.
    type: bool
    default: false
  wait_timeout:
    default: 180
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
  - tensorfusion.ops.wait.TIMEOUT
  - tensorfusion.ops.fence
attributes:
  check_mode:
    details: Creates nothing; returns the Pod it would create.
  diff_mode:
    support: none
    details: Leaves nothing behind, so there is nothing to diff.
  idempotent:
    support: full
    details: The test Pod is created and removed in every run; nothing stays behind, and C(changed) is false.
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Accept the installation with a real TensorFusion Pod
  tensorfusion.ops.tf_acceptance:
    pool: tensor-fusion-shared
    tflops_request: "10"
    vram_request: 4Gi
"""

RETURN = r"""
api_server:
  description: The API server the module talked to.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
passed:
  description: Whether every check passed and the Pod became Ready.
  returned: always
  type: bool
  sample: true
checks:
  description: Each check, whether it passed, and what was seen.
  returned: always
  type: list
  elements: dict
  sample:
    - {check: hypervisor env, ok: true, detail: "HYPERVISOR_IP set, HYPERVISOR_PORT 8000"}
pod:
  description: The test Pod as the API server stored it (labels, annotations, node) or, in check mode, as it would be sent.
  returned: always
  type: dict
namespace:
  description: The scratch namespace.
  returned: always
  type: str
  sample: tfops-acceptance-3f9c1a
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import FENCE_ARG_SPEC, deadline_from, wait_arg_spec
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import tf_acceptance as backend
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import Fence


def main():
    module = tfmodule.new_module(
        dict(**FENCE_ARG_SPEC, namespace=dict(type="str"), pool=dict(type="str"),
             image=dict(type="str", default="busybox:1.36"),
             tflops_request=dict(type="str", default="1"), vram_request=dict(type="str", default="1Gi"),
             isolation=dict(type="str", default="soft", choices=["shared", "soft", "hard", "partitioned"]),
             is_local_gpu=dict(type="bool", default=True), keep=dict(type="bool", default=False),
             **wait_arg_spec(wait=False, timeout=180)),
        supports_check_mode=True)
    tfmodule.run(module, backend.run, deadline=deadline_from, fence=Fence)


if __name__ == "__main__":
    main()
