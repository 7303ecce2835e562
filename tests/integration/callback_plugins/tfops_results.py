# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only callback: writes every task result to the JSON file named by TFOPS_RESULTS_FILE,
next to the normal human output (which the secrecy tests read as a user would see it)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: tfops_results
type: aggregate
short_description: Write task results to a JSON file for the integration tests
description:
  - Test-only. Writes a list of task results to the file named by E(TFOPS_RESULTS_FILE).
requirements:
  - E(TFOPS_RESULTS_FILE) set to a writable path
"""

import json
import os

from ansible.plugins.callback import CallbackBase


def task_name(result):
    """The task's own name, as written (ansible-core 2.21's task_name prefixes a role's tasks with
    the role's name; 2.16-2.20 do not)."""
    fields = getattr(result, "task_fields", None) or getattr(result, "_task_fields", None) or {}
    return fields.get("name") or result.task_name


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "tfops_results"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.results = []

    def _record(self, result, status):
        self.results.append({"task": task_name(result), "host": result._host.get_name(),
                             "status": status, "result": result._result})

    def v2_runner_on_ok(self, result):
        self._record(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._record(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._record(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("TFOPS_RESULTS_FILE")
        if path:
            with open(path, "w") as handle:
                json.dump(self.results, handle, default=str)
