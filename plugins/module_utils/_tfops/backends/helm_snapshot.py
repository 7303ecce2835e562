# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_snapshot's body: capture a release (helm/capture.py) into a bundle and write it to its
stores (helm/locations.py), pruning the oldest; or remove bundles."""

from __future__ import annotations

import contextlib
import os

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store as snapshot_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store_kube
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.locations import (
    CLUSTER,
    LOCAL,
    described,
    local_dest,
    stores_of,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput


def run(ctx):
    """helm_snapshot's body (core/module.py's contract)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.cli import on_secret, open_helm
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.release import recorded_flags
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.capture import capture, ensure_key
    params = ctx.params
    stores = stores_of(params["store"])
    if params["state"] == "absent":
        return _remove(ctx, stores)
    recorded_flags(params.get("helm_flags"))  # refuse a flag outside the allow-list first
    if params.get("signing_key"):
        signing.key_from_text(params["signing_key"])  # refused before anything is read
    snapshots.to_prune([], params.get("keep"))  # a keep below 1 is refused before anything is read
    with open_helm(ctx) as helm, ctx.connected() as kube:
        created = []

        def get_key():
            key, made = ensure_key(kube, params["namespace"], params.get("signing_key"), ctx.check_mode)
            created.append(made)
            return key

        name, meta, files, key = capture(kube, helm, params, on_secret(ctx), get_key)
        result = {"changed": True, "meta": meta, "store": params["store"],
                  "files": sorted(list(files) + [snapshots.INDEX]),
                  "signing_key": _key_summary(key, params["namespace"], created[0]),
                  "locations": [], "pruned": [], "secrets": []}
        for store in stores:
            write = _write_cluster if store == CLUSTER else _write_local
            location, pruned, secrets = write(kube, ctx, name, meta, files, key)
            result["locations"].append(location)
            result["pruned"].extend(pruned)
            result["secrets"].extend(secrets)
        result["bundle"] = result["locations"][0]
        return result


def _cluster_bodies(meta, files, key):
    name = snapshot_store.secret_name(meta["release"], meta["captured_at"], meta["revision"])
    return snapshot_store.secrets_for(meta["namespace"], name, meta["release"], meta["cluster_uid"],
                                      snapshot_store.pack(files, key))


def _ours(kube, ctx, meta, store):
    params = ctx.params
    items = described(kube, params, (store,), params["namespace"], params["name"], signed=False)
    return snapshots.select([i for i in items if i["store"] == store], params["name"],
                            params["namespace"], meta["cluster_uid"])


def _write_cluster(kube, ctx, name, meta, files, key):
    bodies = _cluster_bodies(meta, files, key)
    names = [b["metadata"]["name"] for b in bodies]
    location = snapshot_store.reference(meta["namespace"], names[0])
    keep = ctx.params.get("keep")
    if ctx.check_mode:
        ours = _ours(kube, ctx, meta, CLUSTER)
        return location, [i["location"] for i in snapshots.to_prune([{"location": location}] + ours, keep)], names
    store_kube.create_bundle(kube, bodies)
    pruned = snapshots.to_prune(_ours(kube, ctx, meta, CLUSTER), keep)
    for item in pruned:
        store_kube.remove_bundle(kube, item["namespace"], _parts(item))
    return location, [i["location"] for i in pruned], names


def _parts(item):
    """The Secrets of a described cluster bundle, as remove_bundle takes them (names in order)."""
    return [{"metadata": {"name": n, "annotations": {snapshot_store.ANNOTATION_PART: str(i)}}}
            for i, n in enumerate(item["secrets"], 1)]


def _write_local(kube, ctx, name, meta, files, key):
    dest = local_dest(ctx.params)
    keep = ctx.params.get("keep")
    if ctx.check_mode:
        location = os.path.join(dest, name)
        ours = _ours(kube, ctx, meta, LOCAL)
        return location, [i["location"] for i in snapshots.to_prune([{"location": location}] + ours, keep)], []
    location = snapshots.write_bundle(dest, name, files, key)
    kube.written = True  # a bundle folder is a write too: changed, also when pruning then fails
    pruned = snapshots.to_prune(_ours(kube, ctx, meta, LOCAL), keep)
    for item in pruned:
        snapshots.remove_bundle(item["location"])
    return location, [i["location"] for i in pruned], []


def _key_summary(key, namespace, created):
    """Where the bundle key is, and its id; never the key."""
    return {"key_id": key.key_id, "created": created,
            "secret": None if key.source == "option" else "%s/%s" % (namespace, signing.SECRET_NAME)}


def _remove(ctx, stores):
    """state=absent: ``bundle`` (a folder, a folder name in dest, or a secret:// reference), or every
    bundle of the release in the stores."""
    params = ctx.params
    given = params.get("bundle")
    if given and not snapshot_store.is_reference(given):
        given = given if os.path.isabs(given) else os.path.join(local_dest(params), given)
    connect = CLUSTER in (_stores_for(given) if given else stores)
    with (ctx.connected() if connect else contextlib.nullcontext()) as kube:
        if given and snapshot_store.is_reference(given):
            namespace, name = snapshot_store.parse_reference(given)
            parts = store_kube.read_bundle(kube, namespace, name)
            # Any Secret can be named here: only a restore point of this collection is removed.
            why_not = parts and snapshot_store.not_a_restore_point(parts, name)
            if why_not:
                raise InvalidInput("bundle: %s is not a restore point of tensorfusion.ops (%s); not "
                                   "removing it" % (given, why_not))
            targets = [(given, namespace, parts)] if parts else []
        elif given:
            targets = [(given, None, None)] if os.path.isdir(given) else []
        else:
            targets = [(i["location"], i["namespace"], _parts(i) if i["store"] == CLUSTER else None)
                       for i in snapshots.select(described(kube, params, stores, params["namespace"], params["name"],
                                                           signed=False), params["name"], params["namespace"])]
        for location, namespace, parts in targets:  # every one checked before the first removal
            if parts is None and not os.path.isfile(os.path.join(location, snapshots.INDEX)):
                raise InvalidInput("%s does not look like a snapshot bundle; not removing it" % location)
        for location, namespace, parts in targets:
            if ctx.check_mode:
                continue
            if parts is None:
                snapshots.remove_bundle(location)
            else:
                store_kube.remove_bundle(kube, namespace, parts)
    return {"changed": bool(targets), "removed": [t[0] for t in targets]}


def _stores_for(location):
    return (CLUSTER,) if snapshot_store.is_reference(location) else (LOCAL,)
