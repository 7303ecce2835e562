# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs that match the shared doc fragments one to one."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline

WAIT_ARG_SPEC = dict(
    wait=dict(type="bool", default=True),
    wait_timeout=dict(type="int", default=600),
    deadline=dict(type="str"),
)

# The runbook's lock a module's writes are fenced by (maintenance/fence.py; doc fragment "fence").
FENCE_ARG_SPEC = dict(
    fence=dict(type="dict", options=dict(
        namespace=dict(type="str", required=True),
        name=dict(type="str", required=True),
        holder=dict(type="str", required=True),
    )),
)


def wait_arg_spec(wait=True, timeout=600):
    """The options of the ``wait`` doc fragment (``wait=False``: its TIMEOUT part, for modules
    that always wait), with the module's own default timeout."""
    spec = dict(WAIT_ARG_SPEC, wait_timeout=dict(type="int", default=timeout))
    if not wait:
        del spec["wait"]
    return spec


# A module that only reads (doc fragment "retry"): the time it may ride out an API server outage.
RETRY_ARG_SPEC = dict(retry_timeout=dict(type="int", default=0))


def retry_deadline(params, end=None):
    """The Deadline of a reading module's retries: ``retry_timeout`` seconds (0: none), and the
    module's own deadline option ``end`` where it has one; neither bounds nothing (no retries)."""
    return Deadline(timeout=params["retry_timeout"] or None, end=end, options=("retry_timeout", "deadline"))


def deadline_from(params):
    return Deadline(timeout=params["wait_timeout"], end=params.get("deadline"), options=("wait_timeout", "deadline"))
