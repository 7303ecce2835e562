# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bodies of helm_snapshot and helm_snapshot_info, and reading one bundle for a restore,
over both stores: a folder (helm/bundle.py) and Secrets in the release namespace
(helm/store.py, API calls in helm/store_kube.py)."""

from __future__ import annotations

import contextlib
import os

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store as snapshot_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import bundle as snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store_kube
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import retry_deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError, InvalidInput

LOCAL, CLUSTER, BOTH = snapshots.LOCAL, snapshots.CLUSTER, snapshots.BOTH


def stores_of(store):
    return (CLUSTER, LOCAL) if store == BOTH else (store,)


def local_dest(params):
    return os.path.abspath(os.path.expanduser(params["dest"]))


# ---- bundles, from either store -----------------------------------------------------------------
def open_bundle(kube, location, **verify_kwargs):
    """(location, store, contents, meta, problems, signature) of the bundle at ``location`` (a
    folder or a secret:// reference); contents None when there is no such bundle or it cannot be
    read (problems say why)."""
    if snapshot_store.is_reference(location):
        namespace, name = snapshot_store.parse_reference(location)
        parts = store_kube.read_bundle(kube, namespace, name)
        if not parts:
            return location, CLUSTER, None, None, ["no Secret %s/%s" % (namespace, name)], None
        return (location, CLUSTER) + snapshot_store.verify_parts(parts, **verify_kwargs)
    path = os.path.abspath(os.path.expanduser(location))
    if not os.path.isdir(path):
        return path, LOCAL, None, None, ["not a folder"], None
    contents = snapshots.read_folder(path)
    return (path, LOCAL, contents) + snapshots.verify_contents(contents, **verify_kwargs)


def described(kube, params, stores, namespace, release=None, **verify_kwargs):
    """Descriptions of every bundle in the stores (the folder ``params['dest']``; the Secrets of
    ``namespace``, None: every namespace), verified with ``verify_kwargs``."""
    items = []
    if LOCAL in stores:
        for path in snapshots.list_bundles(local_dest(params)):
            meta, problems, signature = snapshots.verify_bundle(path, **verify_kwargs)
            items.append(snapshots.describe(path, meta, problems, signature))
    if CLUSTER in stores:
        for (ns, name), parts in sorted(store_kube.list_bundles(kube, namespace, release).items()):
            _contents, meta, problems, signature = snapshot_store.verify_parts(parts, **verify_kwargs)
            item = snapshots.describe(snapshot_store.reference(ns, name), meta, problems, signature, CLUSTER)
            if meta is None:  # unreadable: what its labels say, so that keep prunes it too
                labels = parts[0]["metadata"].get("labels") or {}
                item.update(release=labels.get(snapshot_store.LABEL_RELEASE), namespace=ns,
                            cluster_uid=labels.get(snapshot_store.LABEL_CLUSTER))
            item["secrets"] = snapshot_store.names_of(parts)
            items.append(item)
    return items


# ---- helm_snapshot ------------------------------------------------------------------------------
def run_snapshot(ctx):
    """helm_snapshot's body (core/module.py's contract)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.tasks import (
        on_secret,
        open_helm,
    )
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


# ---- helm_snapshot_info -------------------------------------------------------------------------
def run_snapshot_info(ctx):
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
    chosen = snapshots.select(items, params.get("name"), params.get("namespace"),
                              uid if params["only_this_cluster"] else None)
    return {"changed": False, "bundles": chosen, "cluster_uid": uid,
            "api_server": kube.server if kube is not None else None,
            "usable": [i["location"] for i in chosen if i["usable"]]}
