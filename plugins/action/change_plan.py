# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of a tensorfusion.ops module: its main() in the worker on the controller
(plugin_utils/in_process.py).

This is the one action file of the modules that need nothing more: every other file of
plugins/action/ but runbook_inputs.py is a relative symbolic link to it, named after its module.
Ansible imports each link under its own name (``ansible_collections.tensorfusion.ops.plugins.action.
<module>``), so the module an action runs is the last part of that name.
"""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.plugin_utils.in_process import InProcessModuleAction, preload

MODULE = __name__.rpartition(".")[2]
preload(MODULE)


class ActionModule(InProcessModuleAction):
    MODULE = MODULE
