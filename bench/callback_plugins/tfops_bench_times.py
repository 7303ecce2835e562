# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark-only callback: per task its role, start and end (epoch seconds) and result, written as
JSON to E(TFOPS_BENCH_TIMES_FILE) - what ansible.posix's profile_tasks prints, in a form the
benchmarks can read (ansible.posix is not installed here)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: tfops_bench_times
type: aggregate
short_description: Task start and end times and results for the benchmarks
description:
  - Benchmark-only. Writes a list of tasks (name, role, start, end, status, result) to the file
    named by E(TFOPS_BENCH_TIMES_FILE), and per host the start and end of each task on it (for a
    fleet run on several hosts at once).
requirements:
  - E(TFOPS_BENCH_TIMES_FILE) set to a writable path
"""

import json
import os
import time

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "tfops_bench_times"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self.tasks = []
        self.on_hosts = {}  # (host, task uuid) -> {host, task, start, end, status}
        self.started = time.time()

    def _start(self, task):
        role = getattr(task, "_role", None)
        self.tasks.append({"task": task.get_name(), "role": role.get_name() if role else None,
                           "action": task.action, "start": time.time(), "end": None, "status": None,
                           "result": None})

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start(task)

    def v2_runner_on_start(self, host, task):
        self.on_hosts[(host.get_name(), task._uuid)] = {
            "host": host.get_name(), "task": task.get_name(), "action": task.action, "start": time.time(),
            "end": None, "status": None}

    def _end(self, result, status):
        now = time.time()
        entry = self.on_hosts.get((result._host.get_name(), result._task._uuid))
        if entry is not None:
            entry.update(end=now, status=status)
        if self.tasks:
            entry = self.tasks[-1]
            entry.update(end=now, status=status, result=result._result)

    def v2_runner_on_ok(self, result):
        self._end(result, "ok")

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._end(result, "failed")

    def v2_runner_on_skipped(self, result):
        self._end(result, "skipped")

    def v2_runner_on_unreachable(self, result):
        self._end(result, "unreachable")

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get("TFOPS_BENCH_TIMES_FILE")
        if path:
            with open(path, "w") as handle:
                json.dump({"playbook_start": self.started, "playbook_end": time.time(),
                           "tasks": self.tasks, "on_hosts": list(self.on_hosts.values())},
                          handle, default=str)
