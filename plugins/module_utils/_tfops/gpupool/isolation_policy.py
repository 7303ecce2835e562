# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The operator's isolation policy as a chart renders it, and a switch of it said before the
write (docs/operator-behaviour.md 3.1, 12): upstream's operator records a new policy but its
hypervisor Pods kept the one they were started with, until each was recreated. Pure."""

from __future__ import annotations

POLICY_ENV = "TF_ISOLATION_MODE_POLICY"
BINARY_DEFAULT = "static"  # the operator binary's own default, without the variable


def controller_policy(deployment):
    """The isolation policy a controller Deployment (a dict) gives the operator, lowercased (the
    binary's default without the variable); None when it has no ``controller`` container."""
    spec = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {})
    for container in spec.get("containers") or []:
        if container.get("name") == "controller":
            for env in container.get("env") or []:
                if env.get("name") == POLICY_ENV and env.get("value"):
                    return str(env["value"]).lower()
            return BINARY_DEFAULT
    return None


def operator_policy(docs):
    """The isolation policy the controller Deployment of ``docs`` (a rendered manifest's
    documents) gives the operator, lowercased; None when the manifest renders no controller."""
    for doc in docs:
        labels = ((doc.get("metadata") or {}).get("labels") or {})
        if doc.get("kind") == "Deployment" and labels.get("tensor-fusion.ai/component") == "operator":
            return controller_policy(doc)
    return None


def switch_warning(current_docs, desired_docs):
    """The warning for a chart write that switches the operator's isolation policy, or None."""
    before, after = operator_policy(current_docs), operator_policy(desired_docs)
    if before is None or after is None or before == after:
        return None
    return ("the chart switches the operator's isolation policy from %s to %s: the operator records it, but "
            "its hypervisor Pods keep --isolation-policy=%s until each is recreated (as upstream's operator "
            "did); the verify step reports each such Pod (HYPERVISOR_POLICY_STALE): delete them one node at "
            "a time and the operator creates them again with the new policy" % (before, after, before))
