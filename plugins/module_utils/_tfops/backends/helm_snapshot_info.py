# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_snapshot_info's body: describe and verify the bundles of the stores (helm/locations.py),
read only."""

from __future__ import annotations

import contextlib

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.locations import (
    CLUSTER,
    described,
    stores_of,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import store as report_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import retry_deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError, InvalidInput


def run(ctx):
    """helm_snapshot_info's body (core/module.py's contract)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.capture import (
        cluster_identity,
        read_key,
    )
    params = ctx.params
    stores = stores_of(params["store"])
    uid = params.get("cluster_uid")
    given = signing.key_from_text(params["signing_key"]) if params.get("signing_key") else None
    keys = {}
    # Connected for the cluster store, the cluster's identity and the keys (unless all are given).
    connect = CLUSTER in stores or (params["verify_cluster"] and not (uid and given))
    verifying = connect and params["verify_cluster"]
    # Read only: an API server outage is ridden out for retry_timeout.
    with (ctx.connected(retry_deadline(params)) if connect else contextlib.nullcontext()) as kube:

        def key_for(meta):
            """The key of the bundle's release namespace, read once per namespace and never
            failing: a key that cannot be read leaves the signature unchecked and the bundle
            unusable."""
            if given is not None or not verifying:
                return given
            namespace = (meta or {}).get("namespace")
            if namespace not in keys:
                try:
                    keys[namespace] = read_key(kube, namespace) if namespace else None
                except (ApiError, InvalidInput) as exc:
                    ctx.warn("the snapshot key of namespace %s could not be read: %s" % (namespace, exc.msg))
                    keys[namespace] = None
            return keys[namespace]

        if not uid and verifying:
            uid = cluster_identity(kube)[0]
        items = described(kube, params, stores, params.get("namespace"), params.get("name"),
                          cluster_uid=uid, key=key_for, allow_unsigned=params["allow_unsigned"])
        unchanged = unchanged_runs(ctx, kube, params.get("namespace"))
    chosen = snapshots.select(items, params.get("name"), params.get("namespace"),
                              uid if params["only_this_cluster"] else None)
    for item in chosen:
        item["run_changed_nothing"] = item["captured_at"] in unchanged
    usable = [i for i in chosen if i["usable"]]
    return {"changed": False, "bundles": chosen, "cluster_uid": uid,
            "api_server": kube.server if kube is not None else None,
            "usable": [i["location"] for i in usable],
            "undo_points": [i["location"] for i in usable if not i["run_changed_nothing"]]}


def unchanged_runs(ctx, kube, namespace):
    """When the restore points of runs that changed nothing were captured (their reports in the
    namespace say so); none known without a connection, a namespace or the right to list them."""
    if kube is None or not namespace:
        return set()
    try:
        return report_store.read_unchanged_restore_points(kube, namespace)
    except ApiError as exc:
        ctx.warn("the run reports in %s could not be read (%s): a restore point taken by a run that "
                 "changed nothing is not told apart" % (namespace, exc.msg))
        return set()
