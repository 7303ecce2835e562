# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""rbac_access's body: the collection's own RBAC (cluster/access.py) applied, removed or verified,
and a kubeconfig for its ServiceAccount written."""

from __future__ import annotations

import os

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster.access import (
    Access,
    access_checks,
    binding_for,
    check_resource,
    is_legacy_binding_of,
    check_text,
    desired_roles,
    kubeconfig_text,
    missing_access,
    remove_file,
    role_names,
    service_account,
    token_secret,
    write_private,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import Forbidden


def _verify(ctx, roles):
    """Fail with the first missing permission (all of them in ``missing``); write nothing."""
    with ctx.connected() as kube:
        missing = missing_access(kube, access_checks(roles))
    texts = [check_text(m["attributes"]) for m in missing]
    if missing:
        first = missing[0]
        raise Forbidden("forbidden: %s (%s needs it)%s" % (
            texts[0], first["role"], "; also missing: %s" % ", ".join(texts[1:]) if texts[1:] else ""),
            verb=first["attributes"]["verb"], resource=check_resource(first["attributes"]),
            namespace=first["attributes"]["namespace"],
            missing=texts, api_server=kube.server)
    return {"changed": False, "missing": [], "api_server": kube.server, "roles": role_names(roles),
            "service_account": None}


def run(ctx):
    """rbac_access's body (core/module.py's contract)."""
    params = ctx.params
    roles = desired_roles(params["manifests"], params.get("role_namespace"))
    if params["state"] == "verified":
        return _verify(ctx, roles)
    sa_name, namespace = params["service_account"], params["namespace"]
    sa = service_account(sa_name, namespace)
    secret = token_secret(params.get("token_secret") or "%s-token" % sa_name, sa_name, namespace)
    bindings = [binding_for(r, sa_name, namespace) for r in roles]
    # How earlier versions named a binding (after its role): this account's when it binds only it.
    legacy = [binding_for(r, sa_name, namespace, name=r["metadata"]["name"]) for r in roles]

    def only_this_account(existing):
        return is_legacy_binding_of(existing, sa_name, namespace)
    objects = [sa] + roles + bindings
    if params.get("kubeconfig_path"):
        objects.append(secret)
    with ctx.connected() as kube:
        work = Access(kube, ctx.check_mode)
        file_changed = False
        if params["state"] == "present":
            for obj in objects:
                work.apply(obj)
            for obj in legacy:
                work.remove(obj, only_if=only_this_account)
            if params.get("kubeconfig_path") and not ctx.check_mode:
                token, ca_data = work.token(secret, ctx.deadline)
                ctx.hide([token])
                text = kubeconfig_text(params.get("server") or kube.server, ca_data, token, sa_name)
                file_changed = write_private(params["kubeconfig_path"], text)
            elif params.get("kubeconfig_path"):
                file_changed = not os.path.exists(params["kubeconfig_path"])
        else:
            # This account and its bindings; a role only when no other account's binding uses it.
            leaving = set(b["metadata"]["name"] for b in bindings + legacy)
            for obj in ([secret] if params.get("kubeconfig_path") else []) + bindings:
                work.remove(obj)
            for obj in legacy:
                work.remove(obj, only_if=only_this_account)
            for role in roles:
                if not work.still_bound(role, leaving):
                    work.remove(role)
            work.remove(sa)
            if params.get("kubeconfig_path"):
                file_changed = remove_file(params["kubeconfig_path"], ctx.check_mode)
    result = {"changed": bool(work.changes) or file_changed, "changes": work.changes,
              "roles": role_names(roles),
              "service_account": "%s/%s" % (namespace, sa_name), "api_server": kube.server}
    if params.get("kubeconfig_path"):
        result["kubeconfig_path"] = params["kubeconfig_path"]
    if ctx.diff_mode:
        result["diff"] = work.diff
    return result
