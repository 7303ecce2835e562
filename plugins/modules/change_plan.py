#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: change_plan
short_description: Record what a change plan is made from, or check a saved plan against the cluster before applying it
version_added: 0.2.0
description:
  - A change plan is what a check-mode run of a runbook concluded (M(tensorfusion.ops.run_report)
    writes it with O(tensorfusion.ops.run_report#module:plan_out)), together with the identity of
    what it was made from. Applying the plan means running the same runbook with the same inputs;
    this module is what makes sure the cluster and the inputs are still the ones the plan saw.
  - O(state=captured) reads the identity (reads only, also in check mode) - the cluster's UID
    (of namespace C(kube-system)), the Helm release's newest revision and status, every
    TensorFusionCluster's generation with a digest of each pool entry's C(specTemplate), every
    GPUPool's generation with a digest of its spec, and a digest of O(inputs).
  - O(state=verified) loads a saved plan (O(plan)), refuses it when its checksum does not match
    (it was altered), when it is for another runbook or host, when it is older than O(max_age) or
    not C(planned), and then reads the same identity and refuses the plan when anything the plan
    recorded differs, naming each difference (C(objects.GPUPool/tf-shared.generation 3 -> 4)).
    It writes nothing either way, so a refused plan leaves the cluster as it was.
  - The chart's digest and the rendered Helm values are checked by
    M(tensorfusion.ops.helm_release) (O(tensorfusion.ops.helm_release#module:plan_identity)), which
    renders them; the runbooks do that before their first write too.
  - Digests of what may hold secrets (values, inputs, pool settings) are salted PBKDF2-SHA256 with
    the plan's own salt; no value is ever in a result or in the plan.
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.attributes.READ_ONLY
  - tensorfusion.ops.auth
  - tensorfusion.ops.retry
options:
  state:
    description: Read the identity (V(captured)) or check a saved plan (V(verified)).
    type: str
    choices: [captured, verified]
    default: captured
  namespace:
    description: Namespace of the Helm release.
    type: str
    default: tensor-fusion-sys
  release:
    description: Name of the Helm release.
    type: str
    default: tensor-fusion-sys
  salt:
    description:
      - With O(state=captured), the plan's salt (hex) for the digests; a new one when omitted
        (returned as RV(salt)). With O(state=verified) the plan's own salt is used.
    type: str
  inputs:
    description:
      - The runbook's inputs that decide what it does (chart, version, images, pools, batch
        settings, the Secret's name and key names ...). Only their salted digest is kept.
      - Never pass secret values here (the option is logged like any other); Helm values are
        compared as rendered, by M(tensorfusion.ops.helm_release).
    type: raw
    default: {}
  plan:
    description:
      - With O(state=verified), the plan - the path of a plan file, or the plan document itself
        (what a plan run handed on through C(set_stats) as C(tfops_plan)).
    type: raw
  playbook:
    description: With O(state=verified), the runbook that applies the plan (it must be the one that made it).
    type: str
  inventory_host:
    description: With O(state=verified), the inventory host (the cluster) whose plan to apply.
    type: str
    default: localhost
  max_age:
    description:
      - With O(state=verified), how old a plan may be, in seconds (by the plan's C(created) time
        and this controller's clock).
    type: int
    default: 86400
notes:
  - RBAC - C(get) of C(namespaces/kube-system), C(list) of C(tensorfusionclusters) and
    C(gpupools) of C(tensor-fusion.ai), C(list) of C(secrets) in O(namespace) (Helm's storage,
    read as metadata only). The precheck role's permissions hold them.
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: What the plan of this run is made from
  tensorfusion.ops.change_plan:
    state: captured
    inputs: "{{ change_inputs }}"
  register: plan_identity

- name: Refuse a stale plan before anything is written
  tensorfusion.ops.change_plan:
    state: verified
    plan: /var/lib/change/upgrade-plan.json
    playbook: upgrade
    inventory_host: "{{ inventory_hostname }}"
    inputs: "{{ change_inputs }}"
    max_age: 43200
"""

RETURN = r"""
api_server:
  description: The API server the module talked to.
  returned: always
  type: str
  sample: https://k8s.example.com:6443
salt:
  description: The salt of the digests (hex; not a secret).
  returned: always
  type: str
  sample: 6b1f0c2ad4e5f6a7b8c9d0e1f2a3b4c5
identity:
  description: The live identity (only digests, generations, revisions and the cluster UID).
  returned: always
  type: dict
  sample:
    cluster: {uid: 7c1e6a52-3f57-4a0e-9f4c-2d1b0e9a8c11}
    release: {name: tensor-fusion-sys, namespace: tensor-fusion-sys, revision: 4, status: deployed}
    objects:
      TensorFusionCluster/tensor-fusion: {generation: 3, pools: {shared: "pbkdf2-sha256:9a1c..."}}
      GPUPool/tensor-fusion-shared: {generation: 5, settings: "pbkdf2-sha256:4be0..."}
    inputs: "pbkdf2-sha256:0f3d..."
plan:
  description:
    - With O(state=verified), the plan that may be applied (its summary, identity and
      C(helm) - what the chart step must still find, for
      O(tensorfusion.ops.helm_release#module:plan_identity)).
  returned: when state is verified
  type: dict
drift:
  description: With O(state=verified), what differs (empty when the plan holds; the task fails otherwise).
  returned: when state is verified
  type: list
  elements: str
  sample: ["objects.GPUPool/tensor-fusion-shared.generation: 5 -> 6"]
"""

import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import RETRY_ARG_SPEC
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import change_plan as backend


def main():
    module = tfmodule.new_module(
        dict(state=dict(type="str", default="captured", choices=["captured", "verified"]),
             namespace=dict(type="str", default="tensor-fusion-sys"),
             release=dict(type="str", default="tensor-fusion-sys"),
             salt=dict(type="str"),
             inputs=dict(type="raw", default={}),
             plan=dict(type="raw"),
             playbook=dict(type="str"),
             inventory_host=dict(type="str", default="localhost"),
             max_age=dict(type="int", default=86400),
             **RETRY_ARG_SPEC),
        required_if=[("state", "verified", ["plan", "playbook"])],
        supports_check_mode=True)
    if isinstance(module.params["inputs"], str):
        try:  # a survey or the command line hands a mapping over as JSON text
            module.params["inputs"] = json.loads(module.params["inputs"])
        except ValueError:
            pass
    tfmodule.run(module, backend.run)


if __name__ == "__main__":
    main()
