# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of the runbook_guard module: the runbook's tfops_* variables as they were given
(the task's variables, not rendered), refused by name when one holds a template
(module_utils/_tfops/runbook/as_data.py)."""

from __future__ import annotations

from ansible.plugins.action import ActionBase

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import as_data, inputs

try:  # ansible-core 2.19 and later: a template is rendered only when trusted
    from ansible.template import is_trusted_as_template
except ImportError:  # earlier: a value marked unsafe is never rendered
    is_trusted_as_template = None
try:
    from ansible.utils.unsafe_proxy import AnsibleUnsafe
except ImportError:
    AnsibleUnsafe = ()


def unsafe(value):
    """A value Ansible would never render."""
    if AnsibleUnsafe and isinstance(value, AnsibleUnsafe):
        return True
    return is_trusted_as_template is not None and isinstance(value, str) and not is_trusted_as_template(value)


TRUST = "tfops_trust_templates"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _VALID_ARGS = frozenset(("playbook",))

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        playbook = self._task.args.get("playbook")
        if playbook == "upgrade" and (task_vars or {}).get("tfops_fleet_play") is True:
            playbook = "fleet_upgrade"  # fleet_upgrade.yml's play: upgrade's variables and the fleet's
        if playbook not in inputs.PLAYBOOKS:
            return dict(result, failed=True, templated=[],
                        msg="playbook must be one of %s, not %r" % (", ".join(inputs.PLAYBOOKS), playbook))
        task_vars = task_vars or {}
        if task_vars.get(TRUST) is True:
            # A playbook of the user's own that imports the runbook and sets its variables from
            # others: those templates are its code (a YAML true; no survey answer is one).
            return dict(result, changed=False, templated=[], trusted=True)
        given = dict((v.name, task_vars[v.name]) for v in inputs.variables(playbook) if v.name in task_vars)
        names = as_data.templated(given, unsafe)
        result.update(changed=False, templated=names)
        if names:
            result.update(failed=True, msg=as_data.refusal(names))
        return result
