# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Test-only callback: injects the collection's test hooks into ansible-playbook before any task
runs, so that the workers it forks (where the modules run, plugin_utils/in_process.py) inherit
them. The production code reads no test-only environment; this plugin, enabled only by the tests,
does: TFOPS_TEST_LOCK_CLOCK_SKEW (seconds added to this host's clock as the maintenance lock reads
it) and TFOPS_TEST_LOCK_PAUSE_BEFORE_WRITE (seconds the lock waits between its first read and its
write)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: tfops_test_hooks
type: aggregate
short_description: Inject test hooks into the collection's code for the integration tests
description:
  - Test-only. Sets the maintenance lock's clock and pause hooks from E(TFOPS_TEST_LOCK_CLOCK_SKEW)
    and E(TFOPS_TEST_LOCK_PAUSE_BEFORE_WRITE).
"""

import os
import time

from ansible.plugins.callback import CallbackBase

CLOCK_SKEW = "TFOPS_TEST_LOCK_CLOCK_SKEW"
PAUSE_BEFORE_WRITE = "TFOPS_TEST_LOCK_PAUSE_BEFORE_WRITE"


def install(environ=None):
    environ = os.environ if environ is None else environ
    skew, pause = environ.get(CLOCK_SKEW), environ.get(PAUSE_BEFORE_WRITE)
    if not skew and not pause:
        return
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock
    if skew:
        lock.Hooks.host_clock = staticmethod(lambda: time.time() + float(skew))
    if pause:
        lock.Hooks.before_write = staticmethod(lambda: time.sleep(float(pause)))


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "tfops_test_hooks"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        install()
