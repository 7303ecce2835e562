#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: runbook_inputs
short_description: Check every tfops_* variable of a runbook before anything is written
version_added: 0.4.0
description:
  - The first step of every runbook's preflight, before the lock or any write. Checks every
    C(tfops_*) variable the runbook reads against one specification - types, choices, ranges, Go
    durations, image references, helm flags, the maintenance window's rules, files on the
    controller (values files, the kubeconfig, a snapshot bundle, helm) - and reads from the
    cluster, never writing, what only it can say - the namespaces, the pools of O(variables)
    C(tfops_pools), C(tfops_window_pool) and C(tfops_verify_pool), the Secret to rotate and its
    consumers, a C(secret://) snapshot reference.
  - Every problem is reported at once, each naming the variable the user set (not the role's
    variable or the module option it feeds); the task then fails with RV(refused) and
    C(nothing was written).
  - Blank (V("")) or null means unset, as AWX sends an empty survey answer, except for
    C(tfops_chart_repo), where blank means no repository. A list may be comma- or
    newline-separated text; a boolean or a number may be text.
  - The roles' own argument specs stay; they check the roles' variables for people who use the
    roles directly.
  - In a playbook the action gathers O(variables) and O(secret_variables) itself from the task's
    variables when they are not given.
options:
  playbook:
    description:
      - The runbook whose variables are checked. V(fleet_upgrade) checks those of V(upgrade) and
        the fleet's own (C(tfops_fleet_serial), C(tfops_fleet_wave), C(tfops_fleet_passed),
        C(tfops_fleet_failed)), and the job's place in a fleet workflow (see O(awx)).
    type: str
    required: true
    choices: [upgrade, rollback, rotate_secret, precheck, fleet_upgrade]
  variables:
    description:
      - The runbook's C(tfops_*) variables as the user set them, by name. Variables of the
        runbook that are not given are unset.
    type: dict
    default: {}
  secret_variables:
    description:
      - The variables that may hold secrets (C(tfops_secret_data), C(tfops_secret_string_data),
        C(tfops_snapshot_signing_key), C(tfops_values), a C(tfops_kubeconfig) mapping), checked as
        O(variables) are. Never logged; a refusal names the variable and the key, never a value.
    type: dict
    default: {}
  awx:
    description:
      - The AWX job's own variables, without their C(awx_) prefix (C(job_template_name),
        C(workflow_job_name), C(job_launch_type), ...). With O(playbook=fleet_upgrade) they tell
        a slice of a sliced job template (AWX runs one as a workflow job named after its job
        template), which must be a wave of a fleet workflow (C(tfops_fleet_wave)), never the
        canary or a whole fleet with its own canary and waves.
      - In a playbook the action gathers them itself from the task's variables (C(awx_*), else
        C(tower_*)) when they are not given.
    type: dict
    default: {}
  project:
    description:
      - The project's folders. A path variable (values files, a local chart, a plan, a snapshot
        bundle, the kubeconfig, helm and the Python, the runbook's folders) may name files only
        under them, under the runbook's own folders (C(tfops_snapshot_dir), C(tfops_artifacts_dir))
        and the few others each kind of path allows (the home folder to write to, PATH to run
        helm from, C(~/.kube) and the folder of E(K8S_AUTH_KUBECONFIG) for a kubeconfig); a path
        is resolved (C(..), links) first. A path elsewhere is refused before its file is read.
      - The folders of the controller's environment variable E(TFOPS_ALLOWED_PATHS)
        (C(:)-separated) count for every kind; whoever runs the controller sets it (an AWX
        administrator in the execution environment or a credential's injector), a survey cannot.
      - In a playbook the action gives the playbook's folder and ansible-playbook's working
        directory (AWX runs a job in its project's folder) when this is not given; else the
        working directory.
    type: list
    elements: path
  cluster:
    description:
      - Also read the cluster (namespaces, pools, the Secret and its consumers, a snapshot
        reference). What these credentials may not read is left to the RBAC preflight and listed
        in RV(unchecked).
      - When a variable is refused already, the cluster is read without O(retry_timeout)'s retries,
        so that the refusal comes at once even when the API server does not answer.
    type: bool
    default: true
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.attributes.READ_ONLY
  - tensorfusion.ops.auth
  - tensorfusion.ops.retry
attributes:
  platform:
    platforms: kubernetes
    support: full
    details: Reads the Kubernetes API with O(cluster=true).
seealso:
  - ref: ansible_collections.tensorfusion.ops.docsite.runbooks
    description: The runbooks and their variables.
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Check every tfops_* variable of this runbook before anything is written
  tensorfusion.ops.runbook_inputs:
    playbook: upgrade

- name: Check a change file without a cluster
  tensorfusion.ops.runbook_inputs:
    playbook: upgrade
    variables:
      tfops_chart_version: 1.8.7
      tfops_batch_percentage: 20
    cluster: false
"""

RETURN = r"""
checked:
  description: The variables that were set and passed their checks.
  returned: success
  type: list
  elements: str
  sample: [tfops_batch_percentage, tfops_chart_version]
refused:
  description: The variables refused (empty on success).
  returned: always
  type: list
  elements: str
  sample: [tfops_batch_percentage]
problems:
  description: One message per problem, each naming its variable.
  returned: on failure
  type: list
  elements: str
  sample: ["tfops_batch_percentage: 0 is out of range (1-100)"]
unchecked:
  description: Cluster checks these credentials may not read (left to the RBAC preflight).
  returned: always
  type: list
  elements: str
api_server:
  description: The API server read, with O(cluster=true).
  returned: with O(cluster=true)
  type: str
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import RETRY_ARG_SPEC
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook.inputs import PLAYBOOKS
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import runbook_inputs as backend


def main():
    module = tfmodule.new_module(
        dict(playbook=dict(type="str", required=True, choices=list(PLAYBOOKS)),
             variables=dict(type="dict", default={}),
             secret_variables=dict(type="dict", default={}, no_log=True),
             awx=dict(type="dict", default={}),
             project=dict(type="list", elements="path"),
             cluster=dict(type="bool", default=True),
             **RETRY_ARG_SPEC),
        supports_check_mode=True)
    tfmodule.run(module, backend.run)


if __name__ == "__main__":
    main()
