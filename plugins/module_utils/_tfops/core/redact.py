# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secret handling for Helm values and manifests, as pure functions: which keys look secret, their
values replaced by a hash, Secret objects in a manifest reduced to keys and hashes, env values with
secret-looking names masked, and every secret-looking leaf collected for ``no_log_values``."""

from __future__ import annotations

import hashlib
import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

MASK = "********"
# Key names (compared without separators, case-insensitive) whose values are credentials.
_SECRET_KEY = re.compile(
    r"(password|passwd|passphrase|token|secret|licen[cs]e|apikey|accesskey|secretkey|privatekey"
    r"|credential|cert(ificate)?data|keydata|^key$|^ak$|^sk$|^pw$|^pwd$)")
# ... unless they only name or point at one (secretName, tokenPath, licenseFile, keyRef).
_REFERENCE_SUFFIX = re.compile(r"(name|names|path|file|ref|refs|mountpath|enabled|url|endpoint|"
                               r"ttl|expiry|expiration|policy|type)$")
_ENV_SECRET = re.compile(r"(LICEN[CS]E|TOKEN|PASSWORD|PASSWD|SECRET|API_?KEY|ACCESS_?KEY|"
                         r"PRIVATE|SIGN|CREDENTIAL)", re.IGNORECASE)


def looks_secret(key):
    """True for value keys such as password, enrollToken, accessKey, secretKey, license."""
    flat = re.sub(r"[^a-z0-9]", "", str(key).lower())
    if not flat or _REFERENCE_SUFFIX.search(flat):
        return False
    return bool(_SECRET_KEY.search(flat))


def value_hash(value):
    """sha256 of a value as text (bytes as they are): what replaces a secret in results."""
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return "sha256:" + hashlib.sha256(data).hexdigest()


def redact_values(values, keep_secrets=False, fingerprint=value_hash):
    """Helm values with the leaves under secret-looking keys replaced by their hash
    (``fingerprint``: the bare value_hash for results, a bundle key's keyed one in bundles)."""
    if keep_secrets:
        return values
    if isinstance(values, dict):
        out = {}
        for key, value in values.items():
            if looks_secret(key) and not isinstance(value, (dict, list)) and value not in (None, ""):
                out[key] = fingerprint(value)
            elif looks_secret(key) and isinstance(value, list):
                out[key] = [fingerprint(v) if not isinstance(v, (dict, list))
                            else redact_values(v, fingerprint=fingerprint) for v in value]
            else:
                out[key] = redact_values(value, fingerprint=fingerprint)
        return out
    if isinstance(values, list):
        return [redact_values(v, fingerprint=fingerprint) for v in values]
    return values


def secret_leaves(values, under_secret=False):
    """Every non-empty scalar under a secret-looking key (strings as Ansible would print them)."""
    found = []
    if isinstance(values, dict):
        for key, value in values.items():
            flat = re.sub(r"[^a-z0-9]", "", str(key).lower())
            inherited = under_secret and not _REFERENCE_SUFFIX.search(flat)
            found.extend(secret_leaves(value, inherited or looks_secret(key)))
        # An env-style {name: TF_LICENSE, value: ...} entry.
        if isinstance(values.get("name"), str) and _ENV_SECRET.search(values["name"]) \
                and isinstance(values.get("value"), (str, int, float)):
            found.append(str(values["value"]))
    elif isinstance(values, list):
        for value in values:
            found.extend(secret_leaves(value, under_secret))
    elif under_secret and values not in (None, "") and not isinstance(values, bool):
        found.append(str(values))
    return [v for v in found if len(v) >= 3]


def _mask_env(node, fingerprint):
    if isinstance(node, dict):
        out = dict((k, _mask_env(v, fingerprint)) for k, v in node.items())
        if isinstance(node.get("name"), str) and "value" in node and _ENV_SECRET.search(node["name"]) \
                and node["value"] not in (None, ""):
            out["value"] = fingerprint(node["value"])
        return out
    if isinstance(node, list):
        return [_mask_env(v, fingerprint) for v in node]
    return node


def mask_object(obj, fingerprint=value_hash):
    """One Kubernetes object with Secret data reduced to hashes and secret-looking env masked
    (``fingerprint`` as for redact_values)."""
    if not isinstance(obj, dict):
        return obj
    out = _mask_env(obj, fingerprint)
    if obj.get("kind") == "Secret":
        for field in ("data", "stringData"):
            if isinstance(obj.get(field), dict):
                out[field] = dict((k, fingerprint(v)) for k, v in obj[field].items())
    return out


def parse_manifest(text):
    """The objects of a multi-document manifest (empty documents dropped)."""
    if not yamldoc.HAS_YAML:
        raise InvalidInput("PyYAML is required")
    try:
        return [d for d in yamldoc.load_all(text or "") if d]
    except yamldoc.YAMLError as exc:
        raise InvalidInput("cannot parse a Helm manifest: %s" % exc)


def mask_manifest(text, fingerprint=value_hash):
    """A manifest as YAML text again, with every Secret's values replaced by hashes."""
    docs = [mask_object(d, fingerprint) for d in parse_manifest(text)]
    return "".join("---\n" + yamldoc.dump(d, default_flow_style=False, sort_keys=True) for d in docs)


def _env_secrets(node):
    found = []
    if isinstance(node, dict):
        if isinstance(node.get("name"), str) and _ENV_SECRET.search(node["name"]) \
                and isinstance(node.get("value"), (str, int, float)) and node["value"] != "":
            found.append(str(node["value"]))
        for value in node.values():
            found.extend(_env_secrets(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_env_secrets(value))
    return found


def manifest_secret_values(text):
    """Every Secret value (plain and base64 as written) and secret-looking env value in a manifest
    (Kubernetes objects: keys such as secretName or items[].key are references, not secrets)."""
    found = []
    for doc in parse_manifest(text):
        if doc.get("kind") == "Secret":
            for field in ("data", "stringData"):
                for value in (doc.get(field) or {}).values():
                    if value not in (None, ""):
                        found.append(str(value))
        found.extend(_env_secrets(doc))
    return [v for v in found if len(v) >= 3]


def set_value_is_secret(expression):
    """For a --set expression ``a.b.password=x``: whether its last key looks secret."""
    key = expression.split("=", 1)[0]
    last = re.split(r"[.\[]", key.replace("\\.", "\x00"))[-1].replace("\x00", ".")
    return looks_secret(last)


def mask_set_expression(expression):
    key, sep, value = expression.partition("=")
    if sep and value and set_value_is_secret(expression):
        return key + "=" + MASK
    return expression
