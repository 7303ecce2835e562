# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""secret_rotate's decisions as pure functions: input checks, the versions of a Secret, which
previous versions go, Helm values repointing, and what a result may show (names, key names and
content digests, never a value)."""

from __future__ import annotations

import base64
import binascii
import copy
import hashlib
import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import refs as secretrefs
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import values
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

FAMILY_LABEL = "ops.tensor-fusion.ai/secret-family"
FAMILY_ANNOTATION = "ops.tensor-fusion.ai/secret-family"
DIGEST_ANNOTATION = "ops.tensor-fusion.ai/content-digest"
WORKLOAD_KINDS = ("Deployment", "StatefulSet", "DaemonSet")
POOL_COMPONENTS = ("hypervisor", "worker")  # the components whose Pods come from a podTemplate
CONSUMER_KINDS = WORKLOAD_KINDS + ("TensorFusionCluster", "HelmRelease")
_VALUES_KEY = re.compile(r"^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$")
_DNS_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def family_label(base):
    """A label value naming a Secret's family (label values stop at 63 characters)."""
    if len(base) <= 63:
        return base
    return base[:46] + "-" + hashlib.sha256(base.encode()).hexdigest()[:16]


def check_content(value, option, encoded=False):
    """A Secret's new content (``data`` with ``encoded``: base64 values; else ``string_data``): a
    mapping of key names to text. Refused with the option and the key, never the value: text
    (Ansible would read ``a=b`` text as a mapping, and ``dG9rZW4=`` as the key dG9rZW4 with an empty
    value), a nested mapping or list (it would be stored as its Python text), an empty value."""
    if value is None:
        return
    if not isinstance(value, dict):
        raise InvalidInput("%s: %s, not a mapping of Secret keys to %s (for example {token: ...})" % (
            option, values.kind_of(value), "base64 values" if encoded else "values"))
    for key, item in value.items():
        where = "%s.%s" % (option, key)
        if isinstance(item, (dict, list, tuple, bool)) or item is None:
            raise InvalidInput("%s: %s, not %s" % (where, values.kind_of(item), "base64 text" if encoded else "text"))
        if str(item) == "":
            raise InvalidInput("%s is empty: a rotation sets new content (content given as text is "
                               "read as a mapping with empty values; give a mapping)" % where)
        if encoded:
            try:
                base64.b64decode(str(item), validate=True)
            except (binascii.Error, ValueError):
                raise InvalidInput("%s is not base64 (use %s for plain text)" % (
                    where, "string_data" if option == "data" else "the plain-text variable"))


def check_key_names(keys, option):
    bad = sorted(k for k in keys if not re.match(r"^[-._a-zA-Z0-9]+$", str(k)))
    if bad:
        raise InvalidInput("%s: invalid Secret key name(s): %s" % (option, ", ".join(bad)))


def check_name(name, option="name"):
    if not isinstance(name, str) or not _DNS_NAME.match(name) or len(name) > 253:
        raise InvalidInput("%s: %r is not a valid Secret name" % (option, name))


def validate(params):
    """Everything that can be refused without the cluster; raises InvalidInput."""
    name = params["name"]
    check_name(name)
    check_content(params.get("data"), "data", encoded=True)
    check_content(params.get("string_data"), "string_data")
    if not params.get("data") and not params.get("string_data"):
        raise InvalidInput("data or string_data must hold the new content")
    check_key_names(set(params.get("data") or {}) | set(params.get("string_data") or {}), "data/string_data")
    if params["strategy"] == "versioned" and len(name) > 242:
        raise InvalidInput("name is too long for a versioned Secret (at most 242 characters)")
    if params.get("delete_old") and not params["wait"]:
        raise InvalidInput("delete_old needs wait: the old Secret is deleted only after every "
                           "consumer is verified on the new one")
    if params.get("keep") is not None and params["keep"] < 0:
        raise InvalidInput("keep must be 0 or more")
    for index, consumer in enumerate(params.get("consumers") or []):
        validate_consumer(consumer, index)
    if params.get("unrolled_grace") is not None and params["unrolled_grace"] < 0:
        raise InvalidInput("unrolled_grace must be 0 or more")


def validate_consumer(consumer, index=0, option="consumers"):
    where = "%s[%d]" % (option, index)
    if not isinstance(consumer, dict):
        raise InvalidInput("%s: %s, not a consumer ({kind: Deployment, name: ...} or {kind: "
                           "TensorFusionCluster, pool: ..., component: ...})" % (where, values.kind_of(consumer)))
    kind = consumer.get("kind")
    if kind in WORKLOAD_KINDS:
        if not consumer.get("name"):
            raise InvalidInput("%s: a %s consumer needs name" % (where, kind))
    elif kind == "TensorFusionCluster":
        if not consumer.get("pool"):
            raise InvalidInput("%s: a TensorFusionCluster consumer needs pool" % where)
        if consumer.get("component") not in POOL_COMPONENTS:
            raise InvalidInput("%s: component must be one of %s (the components whose Pods come "
                               "from a podTemplate), not %s" % (
                                   where, ", ".join(POOL_COMPONENTS), consumer.get("component")))
    elif kind == "HelmRelease":
        if not consumer.get("name") or not consumer.get("values_key"):
            raise InvalidInput("%s: a HelmRelease consumer needs name (the release) and values_key" % where)
        if not _VALUES_KEY.match(consumer["values_key"]):
            raise InvalidInput("%s: values_key %r is not a dotted key path such as imagePullSecrets "
                               "or controller.admissionWebhooks.secretName" % (where, consumer["values_key"]))
    else:
        raise InvalidInput("%s: kind must be one of %s, not %s" % (
            where, ", ".join(CONSUMER_KINDS), kind))


def check_in_place(current, name, namespace, wanted_type, option="type"):
    """An in_place update of ``current`` (the Secret as read, a dict; None: absent) that the API
    server would refuse, refused before anything is written: an absent or immutable Secret, or
    another type (a Secret's type cannot change). The first of these wins."""
    if current is None:
        raise InvalidInput("Secret %s does not exist in namespace %s: in_place updates an "
                           "existing Secret (strategy versioned creates one)" % (name, namespace))
    if current.get("immutable"):
        raise InvalidInput("Secret %s is immutable: use strategy versioned" % name)
    old_type = current.get("type") or "Opaque"
    if wanted_type and wanted_type != old_type:
        raise InvalidInput("%s: Secret %s is of type %s, and a Secret's type cannot change (the API "
                           "server refuses it): use strategy versioned, which creates a Secret of type "
                           "%s" % (option, name, old_type, wanted_type))


def content_view(name, data, secret_type):
    """What a result may say about a Secret's content: its key names and a digest."""
    return {"name": name, "type": secret_type, "keys": sorted(data or {}),
            "digest": secretrefs.content_digest(data or {}, secret_type)}


def version_metadata(base, data, secret_type):
    """Labels and annotations that make a Secret one version of ``base``."""
    return ({FAMILY_LABEL: family_label(base)},
            {FAMILY_ANNOTATION: base, DIGEST_ANNOTATION: secretrefs.content_digest(data, secret_type)})


def family_members(secrets, base):
    """The Secrets that are versions of ``base`` (the base itself included), newest first."""
    members = [s for s in secrets if s["metadata"]["name"] == base or (
        (s["metadata"].get("annotations") or {}).get(FAMILY_ANNOTATION) == base)]
    return sorted(members, key=lambda s: (s["metadata"].get("creationTimestamp") or "",
                                          s["metadata"]["name"]), reverse=True)


def previous_to_delete(members, current, keep, still_used):
    """Names of previous versions to delete: not the current one, none still referenced by a
    Pod or template, and not the newest ``keep`` previous ones (members come newest first)."""
    previous = [m["metadata"]["name"] for m in members if m["metadata"]["name"] != current]
    return [n for n in previous[keep or 0:] if n not in still_used]


def _path_get(values, key_path):
    node = values
    for part in key_path.split("."):
        if not isinstance(node, dict) or part not in node:
            return None, False
        node = node[part]
    return node, True


def _mentions(node, name):
    if isinstance(node, dict):
        return any(_mentions(v, name) for v in node.values())
    if isinstance(node, list):
        return any(_mentions(v, name) for v in node)
    return node == name


def _replace_strings(node, old, new):
    if isinstance(node, dict):
        return dict((k, _replace_strings(v, old, new)) for k, v in node.items())
    if isinstance(node, list):
        return [_replace_strings(v, old, new) for v in node]
    return new if node == old else node


def values_references(values, key_path, name):
    """True when the user values under key_path name the Secret ``name`` (anywhere below it)."""
    node, found = _path_get(values or {}, key_path)
    return found and _mentions(node, name)


def repoint_values(values, key_path, old, new):
    """A copy of the user values with every ``old`` under key_path replaced by ``new``."""
    node, found = _path_get(values or {}, key_path)
    if not found:
        return values
    result = copy.deepcopy(values)
    parts = key_path.split(".")
    target = result
    for part in parts[:-1]:
        target = target[part]
    target[parts[-1]] = _replace_strings(node, old, new)
    return result


def repoint_template(template, old, new):
    """A podTemplate (``{metadata, template: {metadata, spec}}``) with ``old`` renamed ``new``."""
    template = copy.deepcopy(template or {})
    inner = template.setdefault("template", {})
    inner["spec"] = secretrefs.repoint(inner.get("spec") or {}, old, new)
    return template


def version_env_name(annotation_key):
    """The environment variable that carries a Secret version in a GPU pool component's Pod spec:
    ``secret.ops.tensor-fusion.ai/registry-creds`` -> ``TFOPS_SECRET_VERSION_REGISTRY_CREDS``."""
    name = annotation_key.rsplit("/", 1)[-1]
    return "TFOPS_SECRET_VERSION_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()


def mark_template_env(template, key, value, default_container):
    """A podTemplate whose containers carry the Secret version ``value`` as an environment
    variable. The operator hashes a component's Pod *spec* only (labels and annotations in
    ``template.metadata`` start no rollout), so the version must be in the spec to roll."""
    template = copy.deepcopy(template or {})
    spec = template.setdefault("template", {}).setdefault("spec", {})
    containers = spec.get("containers") or [{"name": default_container}]
    name = version_env_name(key)
    for container in containers:
        env = [e for e in container.get("env") or [] if e.get("name") != name]
        container["env"] = env + [{"name": name, "value": value}]
    spec["containers"] = containers
    return template


def template_env_mark(template, key):
    """The Secret version that ``mark_template_env`` recorded in a podTemplate, or None."""
    name = version_env_name(key)
    containers = (((template or {}).get("template") or {}).get("spec") or {}).get("containers") or []
    values = set(e.get("value") for c in containers for e in c.get("env") or [] if e.get("name") == name)
    return values.pop() if len(values) == 1 and containers and all(
        any(e.get("name") == name for e in c.get("env") or []) for c in containers) else None


def target_secret(target):
    """The Secret a rotation's target names: ("name", secret) for a versioned rotation,
    ("annotation", key, version, secret) or ("env", variable, version, secret) for an in-place one
    (a Pod on it references ``secret`` and started for ``version``)."""
    return target[1] if target[0] == "name" else target[3]


def what_changed(steps):
    """From a rotation's steps: the Secrets it ``created`` (versions and backups), the objects
    it ``modified`` (the Secret updated in place, consumers repointed or restarted, also by a step
    that wrote and then failed in its wait), what was ``put_back`` after a failure and what could
    ``not_put_back`` - what a rotation's report lists."""
    created = [s["detail"] for s in steps if s["step"] in ("create", "backup") and s["status"] == "ok"]
    modified = []
    for s in steps:
        wrote = s.get("changed", True) if s["status"] == "ok" else s.get("changed", False)
        if s["step"] in ("update", "repoint", "restart") and wrote:
            what = s.get("consumer") or "Secret %s" % s.get("detail")
            if what not in modified:
                modified.append(what)
    put_back = [s["detail"] for s in steps if s["step"] == "restore" and s["status"] == "ok"]
    not_put_back = [s["detail"] for s in steps if s["step"] == "restore" and s["status"] != "ok"]
    return {"created": created, "modified": modified, "put_back": put_back, "not_put_back": not_put_back}


def stuck_lines(steps):
    """For each put-back that was written but whose rollout cannot finish: what is stuck and what
    to do, one line each."""
    return [stuck_line(s["stuck"]) for s in steps if s["step"] == "restore" and s.get("stuck")]


def outcome(restored, changes, verified):
    """What a failure left, for its message: what was put back (and what not, and what is stuck),
    or what stays (a failure after the rotation was verified undoes nothing), or what had changed
    - never "nothing had changed" after a write."""
    if restored:
        text = "put back: %s" % "; ".join(restored)
        if changes.get("stuck"):
            text += "; STUCK: %s" % "; ".join(changes["stuck"])
        return text
    if verified:
        return "the rotation was verified before this step and stays (created: %s; changed: %s)" % (
            ", ".join(changes["created"]) or "nothing", ", ".join(changes["modified"]) or "nothing")
    if changes["modified"]:
        return "nothing was put back, changed: %s" % ", ".join(changes["modified"])
    if changes["created"]:
        return "no consumer and no Secret in use had changed yet (created, unreferenced, kept: %s)" % (
            ", ".join(changes["created"]))
    return "nothing had changed yet"


def stuck_report(consumer, why, not_ready, on_rotated, rotated, pool=False):
    """What a put-back that was written but whose rollout cannot finish leaves, and what the
    operator must do (pure). ``why``: the wait's failure; ``not_ready``: the Pods that do not
    start; ``on_rotated``: Ready Pods that still run on the rotated content (``rotated``: the
    rotated Secret, or its version); ``pool``: the operator rolls a GPU pool component's Pods."""
    roller = "the operator finishes the component's campaign" if pool else "its rollout finishes"
    action = ("fix what keeps its new Pods from starting (%s); %s by itself, on the previous "
              "content, and nothing else is left to put back" % (
                  "; ".join(not_ready[:5]) if not_ready else "see why", roller))
    if on_rotated:
        action += ("; until then Pods %s run on the rotated content (%s): delete them if it must "
                   "not be used" % (", ".join(on_rotated[:10]), rotated))
    return {"consumer": consumer, "why": why, "pods_not_ready": list(not_ready),
            "ready_on_rotated": list(on_rotated), "action": action}


def stuck_line(stuck):
    """One line of a stuck put-back: which consumer, and what to do."""
    return "%s is stuck mid-rollout; to do: %s" % (stuck["consumer"], stuck["action"])
