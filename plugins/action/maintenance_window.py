# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The action of the maintenance_window module: its main() in ansible-playbook's worker
(plugins/plugin_utils/in_process.py)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.plugin_utils.in_process import module_action

ActionModule = module_action("maintenance_window")
