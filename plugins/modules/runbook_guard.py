#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: runbook_guard
short_description: Refuse runbook variables that carry a template, before anything renders them
version_added: 0.6.0
description:
  - The first task of every runbook, before anything else reads a C(tfops_*) variable. Input is
    data, never code - a C(tfops_*) variable of the runbook (as M(tensorfusion.ops.runbook_inputs)
    lists them) whose value, as given (extra variables, inventory, AWX), holds a Jinja expression,
    statement or comment (C({{), C({%), C({#)), in a string, a key or anywhere in a mapping or
    list, is refused by name before Ansible renders it, so the expression never runs (a lookup,
    a pipe, a file read).
  - A value marked unsafe (C(!unsafe) in YAML, as AWX marks survey answers) is text Ansible never
    renders, and passes.
  - A playbook of your own that imports a runbook and sets its variables from other variables
    (C(tfops_kubeconfig) given as a reference to C(my_kubeconfig) in the import's C(vars)) writes
    templates as its code - it sets C(tfops_trust_templates) to a YAML C(true) there, and nothing is
    refused. Only a boolean true counts (a survey answer is text).
  - Runs on the controller as an action (it reads the play's variables as they were given, which
    no module argument could carry without rendering them); it writes nothing. C(tfops_hosts) is
    rendered by the play's own header before any task and is not covered.
options:
  playbook:
    description: The runbook whose variables are looked at.
    type: str
    required: true
    choices: [upgrade, rollback, rotate_secret, precheck, fleet_upgrade]
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.attributes.READ_ONLY
attributes:
  platform:
    platforms: kubernetes
    support: full
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Input is data - no tfops_* variable may carry a template
  tensorfusion.ops.runbook_guard:
    playbook: upgrade
"""

RETURN = r"""
trusted:
  description: Whether C(tfops_trust_templates) was true, so that nothing was looked at.
  returned: when true
  type: bool
  sample: true
templated:
  description: The variables refused for holding a template (empty when none does).
  returned: always
  type: list
  elements: str
  sample: [tfops_values]
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        playbook=dict(type="str", required=True,
                      choices=["upgrade", "rollback", "rotate_secret", "precheck", "fleet_upgrade"])),
        supports_check_mode=True)
    module.fail_json(msg="runbook_guard runs as an action on the controller: it reads the play's variables "
                         "as they were given, which a module process never sees", templated=[])


if __name__ == "__main__":
    main()
