# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The label every object the collection creates carries (locks, restore points, reports, the
signing key, RBAC objects): one definition, so that a selector and a writer never disagree."""

from __future__ import annotations

MANAGED_BY_KEY = "app.kubernetes.io/managed-by"
MANAGED_BY = {MANAGED_BY_KEY: "tensorfusion.ops"}


def selector_terms(labels):
    """``key=value`` terms of a label selector, sorted (one way of writing a selector everywhere)."""
    return ["%s=%s" % item for item in sorted(labels.items())]


# The API group of TensorFusion's own resources (TensorFusionCluster, GPUPool, GPUNode, GPU).
TF_GROUP = "tensor-fusion.ai"

# A Pod (and a workload's Pod template) opts in to TensorFusion with this label set to "true":
# a business workload (docs/operator-behaviour.md 6).
TF_ENABLED = "tensor-fusion.ai/enabled"
