# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read-modify-write of one object with optimistic concurrency: a conflicting write is re-read
and the change re-applied, so a concurrent edit of other fields survives."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError

WRITE_ATTEMPTS = 8


def update(kube, api, transform, name, namespace=None):
    """Apply transform(obj) -> obj (or None: nothing to write) and replace the object with the
    resourceVersion it was read at. Returns the written object, or the current one unchanged."""
    desc = "%s/%s" % (api.name, name) if not namespace else "%s/%s/%s" % (api.name, namespace, name)
    for _attempt in range(WRITE_ATTEMPTS):
        current = kube.call("get", desc, api.get, name=name, namespace=namespace).to_dict()
        desired = transform(current)
        if desired is None:
            return current
        try:
            return kube.call("replace", desc, api.replace, body=desired, name=name,
                             namespace=namespace).to_dict()
        except ApiError as exc:
            if exc.status != 409:
                raise
    raise ApiError("%s kept changing under us (%d conflicting writes)" % (desc, WRITE_ATTEMPTS),
                   status=409, verb="replace", resource=desc)
