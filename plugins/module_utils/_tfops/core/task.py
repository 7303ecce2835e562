# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one Task signature: a Task is built from the module's Context (core/module.py) and its
params, plus what that task alone needs; it writes through the context's client, honours its
check mode and deadline, and adds its warnings to the context's."""

from __future__ import annotations


class Task:
    def __init__(self, ctx, params):
        self.kube = ctx.kube
        self.params = params
        self.check_mode = ctx.check_mode
        self.diff_mode = ctx.diff_mode
        self.deadline = ctx.deadline
        self.warnings = ctx.warnings
