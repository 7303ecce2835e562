# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of the runbook_inputs module: the runbook's tfops_* variables, by the names of the
one specification (module_utils/_tfops/runbook/inputs.py), taken from the task's variables when
the task does not give them; then its main() in the worker on the controller
(plugin_utils/in_process.py)."""

from __future__ import annotations

import os

from ansible.errors import AnsibleError

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import inputs
from ansible_collections.tensorfusion.ops.plugins.plugin_utils.in_process import InProcessModuleAction, preload

preload("runbook_inputs")
# What the fleet's check reads of the job AWX runs (runbook/fleet.py).
AWX = ("job_id", "job_template_name", "job_launch_type", "workflow_job_id", "workflow_job_name")


class ActionModule(InProcessModuleAction):
    MODULE = "runbook_inputs"

    def run(self, tmp=None, task_vars=None):
        args = self._task.args
        if "variables" not in args and "secret_variables" not in args and task_vars is not None:
            playbook = self._templar.template(args.get("playbook"))
            given, secret = {}, {}
            for variable in inputs.variables(playbook) if playbook in inputs.PLAYBOOKS else []:
                if variable.name not in task_vars:
                    continue
                try:
                    value = self._templar.template(task_vars[variable.name])
                except AnsibleError as exc:  # a variable whose own template fails: refused by name
                    value = "<cannot be templated: %s>" % exc.message
                (secret if variable.is_secret(value) else given)[variable.name] = value
            self._task.args = dict(args, variables=given, secret_variables=secret)
        if "project" not in args and task_vars is not None:
            # Where path variables may point: the playbook's folder and the working directory
            # (AWX runs a job in its project's folder); runbook/places.py.
            project = [p for p in (task_vars.get("playbook_dir"), os.getcwd()) if p]
            self._task.args = dict(self._task.args, project=project)
        if "awx" not in args and task_vars is not None:
            # The AWX job's own extra variables (AWX sets each as awx_* and tower_*).
            found = dict((name, task_vars.get("awx_" + name, task_vars.get("tower_" + name))) for name in AWX)
            self._task.args = dict(self._task.args, awx=dict((k, v) for k, v in found.items() if v is not None))
        return super().run(tmp, task_vars)
