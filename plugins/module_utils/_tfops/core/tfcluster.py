# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A TensorFusionCluster's GPU pool entries (``spec.gpuPools``), found by the entry's own name or
by the GPUPool name the operator gives it (``<cluster>-<entry>``): one rule for every concern that
names a pool (a rollout, a maintenance window)."""

from __future__ import annotations


def pool_index(tfc, pool):
    """Index in spec.gpuPools of ``pool`` given as the entry's name or as the GPUPool name the
    operator gives it (``<cluster>-<entry>``); None when there is no such pool."""
    cluster = tfc["metadata"]["name"]
    for index, entry in enumerate((tfc.get("spec") or {}).get("gpuPools") or []):
        if pool in (entry.get("name"), "%s-%s" % (cluster, entry.get("name"))):
            return index
    return None
