# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshot bundles by location, over both stores: a folder (helm/snapshots.py) and Secrets in the
release namespace (helm/store.py, API calls in helm/store_kube.py) - which stores a task names,
opening one bundle (a restore's) and describing every bundle there is."""

from __future__ import annotations

import os

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store as snapshot_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store_kube

LOCAL, CLUSTER, BOTH = snapshots.LOCAL, snapshots.CLUSTER, snapshots.BOTH


def stores_of(store):
    return (CLUSTER, LOCAL) if store == BOTH else (store,)


def local_dest(params):
    return os.path.abspath(os.path.expanduser(params["dest"]))


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
