# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run that ends without finishing (Ctrl-C, an AWX job cancelled, kill -9) gets a record where its
own report would have gone (the Lease's RECORD annotation names it): written by its lock's warden
once it has paused the run's rollouts (``for_warden``, handed to the warden as a hook by
maintenance_lock), or, when the warden died with the run, by the run that takes the lock over
(``for_taker``). What they write is what the Lease and the cluster show: the rollouts the run was
waiting for and where they stand, what was paused, the Helm release's newest revision. Best
effort: a record that cannot be written is said, and never keeps a lock held."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import TfopsError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import interrupted as pausing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import paused_marker
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.storage import ReleaseStorage
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import interrupted as records
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render, store

# What maintenance_lock hands its warden (Starting's record hook).
WARDEN_HOOK = __name__ + ":for_warden"


def _pools(kube, view):
    """pool_entry items of the rollouts the Lease names, as the cluster shows them now."""
    return [records.pool_entry(item["cluster"], item["pool"], gpupool,
                               dict((comp, rollout.component_status(pool, comp)[1:3]) for comp in item["components"]),
                               paused_marker(tfc).get(item["pool"]) or [])
            for item, _editor, tfc, gpupool, pool in pausing.rolling_pools(kube, view)]


def _release(kube, ref):
    """{name, revision, status} of the release's newest revision (Helm's storage labels), or None."""
    if not ref.get("release"):
        return None
    revisions = ReleaseStorage(kube).revisions(ref["namespace"], ref["release"])
    if not revisions:
        return None
    newest = max(revisions, key=lambda r: r["revision"])
    return {"name": ref["release"], "revision": newest["revision"], "status": newest["status"]}


def write(kube, view, recorded_by, why, paused=(), pause_failed=None, dest=None):
    """Write the record of the run the Lease ``view`` names; returns (reference, None) or (None,
    why it could not be written). A report the run wrote itself is kept."""
    ref = view.get("record")
    if not ref:
        return None, None
    try:
        record = records.build(ref, view, micro_time(utcnow()), recorded_by,
                               why, paused, pause_failed, _release(kube, ref), _pools(kube, view))
        files = render.report_files(record)
        where = ref.get("store") or "both"
        folder = None
        if dest and where in ("local", "both"):
            try:
                folder = render.write_report(dest, record, files)[0]
            except OSError as exc:
                if where == "local":
                    return None, "%s: %s" % (dest, exc.strerror)
        if where == "local":
            return folder, None
        stored = store.store_in_cluster(kube, ref["namespace"], ref["playbook"], ref["started"], ref["host"],
                                        files, int(ref.get("keep") or 10), run_id=ref.get("run_id"), replace=False)
        return stored["ref"], None
    except TfopsError as exc:
        return None, exc.msg
    except Exception as exc:  # pylint: disable=broad-except  # a record must never keep the lock held
        return None, "%s: %s" % (type(exc).__name__, exc)


def for_warden(kube, view, paused, pause_failed, dest=None):
    """The warden's record of its run, after the pause (``paused``, or why it failed)."""
    return write(kube, view, "its lock's warden", "its ansible-playbook ended without releasing the lock "
                 "(interrupted, cancelled or killed)", paused, pause_failed, dest)


def for_taker(kube, view, taker, why):
    """The record of a holder whose lock ``taker`` took over (``why``: it stopped renewing, or its
    process is gone): its warden died with it, nothing was paused. Only a record kept in the
    cluster (the run's folder is on its own machine)."""
    if ((view.get("record") or {}).get("store") or "both") == "local":
        return None, "the run kept its report on its own machine only (store local)"
    return write(kube, view, "the run that took its lock over (%s)" % taker, why)
