# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""maintenance_window's argument spec and the rules between its options, written once: the
module takes them, and a runbook's tfops_window_* variables are checked against the same spec
and rules before anything is written (runbook/inputs.py)."""

from __future__ import annotations

WINDOW_OPTIONS = dict(
    start=dict(type="str"),
    end=dict(type="str"),
    cron=dict(type="list", elements="str"),
    duration=dict(type="str"),
    pool=dict(type="str"),
    cluster=dict(type="str"),
    timezone=dict(type="str", default="UTC"),
    safety_margin=dict(type="str", default="5m"),
    mode=dict(type="str", default="enforce", choices=["enforce", "report"]),
    when_undeclared=dict(type="str", default="open", choices=["open", "closed"]),
    now=dict(type="str"),
)
WINDOW_RULES = dict(
    mutually_exclusive=[("start", "cron"), ("start", "pool"), ("start", "cluster"),
                        ("start", "duration"), ("cron", "pool"), ("cron", "cluster")],
    required_together=[("start", "end")],
    required_by=dict(cron=("duration",)),
)
