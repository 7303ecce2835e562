# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The API calls of the cluster snapshot store (what they store and read: helm/store.py):
list a namespace's bundle Secrets, create a bundle's Secrets, remove them. Secret data is never
logged or returned; it only reaches snapshot_store.contents_of."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store as snapshot_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages


def _secrets(kube):
    return kube.resource("Secret", api_version="v1")


def list_bundles(kube, namespace, release=None):
    """{(namespace, bundle name): [its Secrets]} in ``namespace`` (None: every namespace)."""
    found = list_pages(kube, _secrets(kube), namespace=namespace,
                       label_selector=snapshot_store.selector(release),
                       field_selector="type=%s" % snapshot_store.SECRET_TYPE)
    return snapshot_store.group(found)


def read_bundle(kube, namespace, name):
    """The Secrets of the bundle whose first part is ``namespace/name`` ([] when there is none)."""
    api = _secrets(kube)
    try:
        head = kube.call("get", "secrets/%s/%s" % (namespace, name), api.get,
                         name=name, namespace=namespace).to_dict()
    except ApiError as exc:
        if exc.status == 404:
            return []
        raise
    release = ((head.get("metadata") or {}).get("labels") or {}).get(snapshot_store.LABEL_RELEASE)
    if not release:
        return [head]  # not one of ours: refused by contents_of (no part numbers)
    return list_bundles(kube, namespace, release).get((namespace, name)) or [head]


def create_bundle(kube, bodies):
    """Create a bundle's Secrets, the first part last (a bundle cut short never looks complete);
    a part already there (a retried create) is an error rather than overwritten."""
    api = _secrets(kube)
    for body in list(reversed(bodies)):
        namespace = body["metadata"]["namespace"]
        kube.call("create", "secrets/%s/%s" % (namespace, body["metadata"]["name"]), api.create,
                  body=body, namespace=namespace)


def remove_bundle(kube, namespace, parts):
    """Delete a bundle's Secrets, the first part first; one already gone is not an error."""
    api = _secrets(kube)
    for name in snapshot_store.names_of(parts):
        try:
            kube.call("delete", "secrets/%s/%s" % (namespace, name), api.delete,
                      name=name, namespace=namespace)
        except ApiError as exc:
            if exc.status != 404:
                raise
