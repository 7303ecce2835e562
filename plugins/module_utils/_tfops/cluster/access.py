# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's own access: a ServiceAccount bound to the ClusterRoles / Roles of chosen
runbooks (the manifests of roles/rbac/files), and a kubeconfig for its token written 0600.

The token is read from a ``kubernetes.io/service-account-token`` Secret (filled by the token
controller on every Kubernetes version) and goes only into the kubeconfig file: never into a
result, a diff or an error message."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import tempfile

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import MANAGED_BY
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    InvalidInput,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher

RBAC_API = "rbac.authorization.k8s.io/v1"
BINDING_KIND = {"ClusterRole": "ClusterRoleBinding", "Role": "RoleBinding"}


# ---- pure ---------------------------------------------------------------------------------------
DEFAULT_NAMESPACE = "tensor-fusion-sys"


def desired_roles(manifests, role_namespace=None):
    """The ClusterRoles and Roles to apply: validated, the Roles of the default release namespace
    (tensor-fusion-sys) moved to ``role_namespace`` if given (Roles of other namespaces, such as
    the chart's greptimedb, stay), the same role named twice kept once."""
    found = {}
    for doc in expand_lists(manifests):
        if not doc:
            continue
        if not isinstance(doc, dict) or doc.get("kind") not in BINDING_KIND:
            raise InvalidInput("manifests hold only ClusterRole and Role objects, not %s" % (
                doc.get("kind") if isinstance(doc, dict) else type(doc).__name__))
        meta = doc.get("metadata") or {}
        if not meta.get("name"):
            raise InvalidInput("a %s in manifests has no metadata.name" % doc["kind"])
        role = {"apiVersion": RBAC_API, "kind": doc["kind"],
                "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {}, **MANAGED_BY)},
                "rules": copy.deepcopy(doc.get("rules") or [])}
        if doc["kind"] == "Role":
            namespace = meta.get("namespace")
            if role_namespace and namespace in (None, DEFAULT_NAMESPACE):
                namespace = role_namespace
            if not namespace:
                raise InvalidInput("Role %s has no namespace; set role_namespace" % meta["name"])
            role["metadata"]["namespace"] = namespace
        key = object_key(role)
        if key in found and found[key]["rules"] != role["rules"]:
            raise InvalidInput("%s is given twice with different rules" % describe(role))
        found[key] = role
    return [found[k] for k in sorted(found)]


def expand_lists(manifests):
    """The objects of the manifests, a ``kind: List`` (the form of roles/rbac/files) replaced by its items."""
    out = []
    for doc in manifests or []:
        if isinstance(doc, dict) and doc.get("kind") == "List":
            out.extend(doc.get("items") or [])
        else:
            out.append(doc)
    return out


MAX_NAME = 253


def binding_name(role_name, service_account, namespace):
    """``<role>.<namespace>.<service account>``: a binding per ServiceAccount, so that granting a
    role to a second account (an upgrader and a read-only prechecker) never takes it from the
    first; past the name limit, a digest of the account stands for it."""
    name = "%s.%s.%s" % (role_name, namespace, service_account)
    if len(name) <= MAX_NAME:
        return name
    return "%s.%s" % (role_name, hashlib.sha256(("%s/%s" % (namespace, service_account)).encode()).hexdigest()[:20])


def is_legacy_binding_of(existing, service_account, namespace):
    """Whether ``existing`` is a binding named after its role (how earlier versions named them)
    that binds only this ServiceAccount: this account's, replaced by its own per-account one."""
    subjects = (existing or {}).get("subjects") or []
    return len(subjects) == 1 and subjects[0].get("kind") == "ServiceAccount" and \
        subjects[0].get("name") == service_account and subjects[0].get("namespace") == namespace


def binding_for(role, service_account, namespace, name=None):
    """The (Cluster)RoleBinding of one role to the ServiceAccount (binding_name, or ``name``)."""
    meta = {"name": name or binding_name(role["metadata"]["name"], service_account, namespace),
            "labels": dict(role["metadata"]["labels"])}
    if role["kind"] == "Role":
        meta["namespace"] = role["metadata"]["namespace"]
    return {"apiVersion": RBAC_API, "kind": BINDING_KIND[role["kind"]], "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"],
                        "name": role["metadata"]["name"]},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]}


def object_key(obj):
    return (obj["kind"], obj["metadata"].get("namespace") or "", obj["metadata"]["name"])


def describe(obj):
    ns = obj["metadata"].get("namespace")
    return "%s %s%s" % (obj["kind"], obj["metadata"]["name"], " in %s" % ns if ns else "")


def comparable(obj):
    """What of an object this module owns (so that server defaults never look like a change)."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    labels = dict((k, v) for k, v in (meta.get("labels") or {}).items() if k in (
        "app.kubernetes.io/managed-by", "tensorfusion.ops/runbook"))
    shown = {"kind": obj.get("kind"), "name": meta.get("name"), "labels": labels}
    if meta.get("namespace"):
        shown["namespace"] = meta["namespace"]
    for field in ("rules", "roleRef", "subjects"):
        if field in obj:
            shown[field] = _normal(obj.get(field))
    return shown


def _normal(value):
    """Rules / subjects as the API server returns them: empty lists and nulls dropped."""
    if isinstance(value, dict):
        return dict((k, _normal(v)) for k, v in value.items() if v not in (None, [], {}))
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def plan(existing, desired):
    """'create', 'update', 'recreate' (a binding's roleRef cannot change) or 'none'."""
    if existing is None:
        return "create"
    if comparable(existing) == comparable(desired):
        return "none"
    if "roleRef" in desired and _normal(existing.get("roleRef")) != _normal(desired["roleRef"]):
        return "recreate"
    return "update"


def kubeconfig_text(server, ca_data, token, name):
    """A kubeconfig for one token, as text (JSON is YAML); ``ca_data`` is base64 PEM or None."""
    cluster = {"server": server}
    if ca_data:
        cluster["certificate-authority-data"] = ca_data
    return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": name,
                       "clusters": [{"name": name, "cluster": cluster}],
                       "users": [{"name": name, "user": {"token": token}}],
                       "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]},
                      indent=2, sort_keys=True) + "\n"


# ---- files --------------------------------------------------------------------------------------
def write_private(path, text, check_mode=False):
    """Write ``text`` to ``path`` with mode 0600 (atomically; the temporary file is removed also
    when writing fails). True when the file changed (content or mode)."""
    path = os.path.abspath(os.path.expanduser(path))
    try:
        with open(path) as handle:
            same = handle.read() == text
        same = same and (os.stat(path).st_mode & 0o777) == 0o600
    except OSError:
        same = False
    if same or check_mode:
        return not same
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        raise InvalidInput("the folder of %s does not exist" % path)
    fd, temp = tempfile.mkstemp(prefix=".tfops-", dir=folder)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise
    return True


def remove_file(path, check_mode=False):
    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(path):
        return False
    if not check_mode:
        os.unlink(path)
    return True


# ---- the API ------------------------------------------------------------------------------------
class Access:
    """Applies and removes the ServiceAccount, its token Secret, the roles and the bindings."""

    def __init__(self, kube, check_mode):
        self.kube = kube
        self.check_mode = check_mode
        self.changes = []
        self.diff = []

    def _api(self, kind):
        return self.kube.resource(kind, api_version="v1" if kind in ("ServiceAccount", "Secret") else RBAC_API)

    def _desc(self, api, obj):
        ns = obj["metadata"].get("namespace")
        return "%s/%s%s" % (api.name, obj["metadata"]["name"], " in %s" % ns if ns else "")

    def read(self, obj):
        api = self._api(obj["kind"])
        kwargs = {"name": obj["metadata"]["name"]}
        if obj["metadata"].get("namespace"):
            kwargs["namespace"] = obj["metadata"]["namespace"]
        try:
            return self.kube.call("get", self._desc(api, obj), api.get, **kwargs).to_dict()
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def apply(self, obj):
        """Create or bring ``obj`` to its desired content; records the change."""
        api = self._api(obj["kind"])
        desc = self._desc(api, obj)
        existing = self.read(obj)
        action = plan(existing, obj)
        self._record(action, obj, existing)
        if action == "none" or self.check_mode:
            return existing
        ns = obj["metadata"].get("namespace")
        if action == "recreate":
            self.kube.call("delete", desc, api.delete, name=obj["metadata"]["name"], namespace=ns)
            action = "create"
        if action == "create":
            return self.kube.call("create", desc, api.create, body=obj, namespace=ns).to_dict()
        body = copy.deepcopy(existing)
        for field in ("rules", "roleRef", "subjects"):
            if field in obj:
                body[field] = obj[field]
        body["metadata"]["labels"] = dict(body["metadata"].get("labels") or {}, **obj["metadata"]["labels"])
        return self.kube.call("update", desc, api.replace, body=body, namespace=ns).to_dict()

    def still_bound(self, role, leaving):
        """Whether a binding of the collection other than ``leaving`` (names) refers to ``role``:
        another ServiceAccount still uses it, so it stays."""
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages
        kind = BINDING_KIND[role["kind"]]
        namespace = role["metadata"].get("namespace")
        bindings = list_pages(self.kube, self._api(kind), namespace=namespace,
                              label_selector=",".join("%s=%s" % kv for kv in MANAGED_BY.items()))
        return any(b["metadata"]["name"] not in leaving and (b.get("roleRef") or {}).get("kind") == role["kind"]
                   and (b.get("roleRef") or {}).get("name") == role["metadata"]["name"] for b in bindings)

    def remove(self, obj, only_if=None):
        """Delete ``obj`` when it exists (and ``only_if(existing)`` holds)."""
        api = self._api(obj["kind"])
        existing = self.read(obj)
        if existing is None or (only_if is not None and not only_if(existing)):
            return
        self._record("delete", obj, existing)
        if not self.check_mode:
            self.kube.call("delete", self._desc(api, obj), api.delete, name=obj["metadata"]["name"],
                           namespace=obj["metadata"].get("namespace"))

    def _record(self, action, obj, existing):
        if action == "none":
            return
        self.changes.append({"action": action, "kind": obj["kind"], "name": obj["metadata"]["name"],
                             "namespace": obj["metadata"].get("namespace")})
        self.diff.append({"before_header": describe(obj), "after_header": describe(obj),
                          "before": comparable(existing) or {},
                          "after": {} if action == "delete" else comparable(obj)})

    def token(self, secret, deadline):
        """(server, base64 CA, token) from the filled token Secret; waits for the controller."""
        api = self._api("Secret")
        found = {}

        def filled(objects):
            obj = objects.get((secret["metadata"]["namespace"], secret["metadata"]["name"]))
            data = (obj or {}).get("data") or {}
            if data.get("token"):
                found.update(data)
                return True, "filled"
            where = (secret["metadata"]["name"], secret["metadata"]["namespace"])
            return False, ("the token controller has not filled Secret %s in %s yet (is it running, "
                           "is its ServiceAccount there?)" % where)
        ObjectWatcher(self.kube, api, namespace=secret["metadata"]["namespace"],
                      name=secret["metadata"]["name"]).wait(filled, deadline)
        import base64
        return base64.b64decode(found["token"]).decode("utf-8"), found.get("ca.crt")


def service_account(name, namespace):
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)}}


def token_secret(name, service_account_name, namespace):
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY),
                         "annotations": {"kubernetes.io/service-account.name": service_account_name}}}


# ---- verifying that the running credentials hold a runbook's rules ------------------------------
def access_checks(roles):
    """Pure: one SelfSubjectAccessReview attribute set per verb, resource and name of the roles'
    rules (a Role's in its namespace, a ClusterRole's cluster-wide), each with where it comes from."""
    checks, seen = [], set()
    for role in roles:
        namespace = role["metadata"].get("namespace") if role["kind"] == "Role" else None
        for rule in role.get("rules") or []:
            if rule.get("nonResourceURLs"):
                continue
            for group in rule.get("apiGroups") or [""]:
                for resource in rule.get("resources") or []:
                    resource_name, _sep, sub = resource.partition("/")
                    for verb in rule.get("verbs") or []:
                        for name in rule.get("resourceNames") or [None]:
                            attrs = {"verb": verb, "group": group, "resource": resource_name,
                                     "subresource": sub or None, "name": name, "namespace": namespace}
                            key = tuple(sorted(attrs.items(), key=lambda i: i[0]))
                            if key in seen:
                                continue
                            seen.add(key)
                            checks.append({"attributes": attrs, "role": describe(role)})
    return checks


def check_resource(attrs):
    """'secrets', 'namespaces/kube-system', 'leases.coordination.k8s.io/tensorfusion-ops-maintenance'."""
    resource = attrs["resource"] + ("." + attrs["group"] if attrs["group"] else "")
    if attrs.get("subresource"):
        resource += "/" + attrs["subresource"]
    if attrs.get("name"):
        resource += "/" + attrs["name"]
    return resource


def check_text(attrs):
    """'list secrets in tensor-fusion-sys', 'get namespaces/kube-system (cluster-wide)'."""
    where = " in %s" % attrs["namespace"] if attrs.get("namespace") else " (cluster-wide)"
    return "%s %s%s" % (attrs["verb"], check_resource(attrs), where)


def missing_access(kube, checks):
    """The checks the running credentials fail (SelfSubjectAccessReview, which every
    authenticated user may create). Reads only."""
    api = kube.resource("SelfSubjectAccessReview", group="authorization.k8s.io")
    missing = []
    for check in checks:
        attrs = dict((k, v) for k, v in check["attributes"].items() if v is not None)
        body = {"apiVersion": api.group_version, "kind": "SelfSubjectAccessReview",
                "spec": {"resourceAttributes": attrs}}
        review = kube.call("create", "selfsubjectaccessreviews", api.create, body=body).to_dict()
        if not (review.get("status") or {}).get("allowed"):
            missing.append(check)
    return missing


def role_names(roles):
    return ["/".join(p for p in (r["kind"], r["metadata"].get("namespace"), r["metadata"]["name"]) if p)
            for r in roles]
