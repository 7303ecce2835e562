# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rollouts of an interrupted run: what its lock's warden (maintenance/warden.py) does with
them before it releases the lock - pause, as a deadline does, the campaigns the run was waiting
for that are still under way, so that none rolls on unwatched, without the run's gates; the same
change run again resumes them (the cluster's pause marker says whose pause it is)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import (
    ClusterEditor,
    PoolObserver,
    pause_transform,
)

# What maintenance_lock hands its warden (Starting's before_release).
HOOK = __name__ + ":stop_rollouts"


def under_way(pool, components):
    """Of ``components``, (component, progress) of those whose campaign on the GPUPool ``pool``
    has not finished. Pure."""
    out = []
    for comp in components:
        _hash, progress, synced, _in_progress = rollout.component_status(pool, comp)
        if not synced:
            out.append((comp, progress))
    return out


def rolling_pools(kube, lease_view):
    """(item, editor, TensorFusionCluster, GPUPool name, GPUPool) of each rollout the Lease's
    ``rolling`` names (the gpupool_rollout waits under way when the run ended), as read now."""
    for item in lease_view.get("rolling") or []:
        editor = ClusterEditor(kube, item["cluster"])
        tfc = editor.read()
        gpupool = rollout.gpupool_name(tfc, rollout.find_pool_index(tfc, item["pool"]))
        yield item, editor, tfc, gpupool, PoolObserver(kube, gpupool).read_pool()


def stop_rollouts(kube, lease_view):
    """Pause the rollouts the run's Lease names that have not finished. Returns what it paused,
    for the Lease's reason ("hypervisor of GPUPool x at 40%")."""
    paused = []
    for item, editor, _tfc, gpupool, pool in rolling_pools(kube, lease_view):
        running = under_way(pool, item["components"])
        if running:
            editor.update(pause_transform(item["pool"], [comp for comp, _progress in running]))
            paused.extend("%s of GPUPool %s at %d%%" % (comp, gpupool, progress) for comp, progress in running)
    return paused
