# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a Pod spec references a Secret, and repointing those references, as pure functions.
The groundwork of secret_rotate: a Secret is consumed as env (secretKeyRef), envFrom (secretRef),
a volume (secret or projected), or imagePullSecrets."""

from __future__ import annotations

import base64
import copy
import hashlib
import json


def _containers(spec):
    for section in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(section) or []:
            yield section, container


def references(spec, secret):
    """Every place in a Pod spec that names ``secret``, as readable paths."""
    found = []
    for section, container in _containers(spec or {}):
        where = "%s[%s]" % (section, container.get("name"))
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef") or {}
            if ref.get("name") == secret:
                found.append("%s.env[%s]" % (where, env.get("name")))
        for index, source in enumerate(container.get("envFrom") or []):
            if (source.get("secretRef") or {}).get("name") == secret:
                found.append("%s.envFrom[%d]" % (where, index))
    for volume in (spec or {}).get("volumes") or []:
        if (volume.get("secret") or {}).get("secretName") == secret:
            found.append("volumes[%s]" % volume.get("name"))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if (source.get("secret") or {}).get("name") == secret:
                found.append("volumes[%s].projected" % volume.get("name"))
    for pull in (spec or {}).get("imagePullSecrets") or []:
        if pull.get("name") == secret:
            found.append("imagePullSecrets")
    return found


def secret_names(spec):
    """The names of every Secret a Pod spec references, sorted (what a Pod reads instead of the
    Secret a check expected)."""
    names = set()
    for _section, container in _containers(spec or {}):
        for env in container.get("env") or []:
            names.add(((env.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name"))
        for source in container.get("envFrom") or []:
            names.add((source.get("secretRef") or {}).get("name"))
    for volume in (spec or {}).get("volumes") or []:
        names.add((volume.get("secret") or {}).get("secretName"))
        for source in (volume.get("projected") or {}).get("sources") or []:
            names.add((source.get("secret") or {}).get("name"))
    for pull in (spec or {}).get("imagePullSecrets") or []:
        names.add(pull.get("name"))
    return sorted(n for n in names if n)


def repoint(spec, old, new):
    """A copy of the Pod spec with every reference to ``old`` naming ``new`` instead."""
    spec = copy.deepcopy(spec or {})
    for _section, container in _containers(spec):
        for env in container.get("env") or []:
            ref = (env.get("valueFrom") or {}).get("secretKeyRef")
            if ref and ref.get("name") == old:
                ref["name"] = new
        for source in container.get("envFrom") or []:
            ref = source.get("secretRef")
            if ref and ref.get("name") == old:
                ref["name"] = new
    for volume in spec.get("volumes") or []:
        if (volume.get("secret") or {}).get("secretName") == old:
            volume["secret"]["secretName"] = new
        for source in (volume.get("projected") or {}).get("sources") or []:
            if (source.get("secret") or {}).get("name") == old:
                source["secret"]["name"] = new
    for pull in spec.get("imagePullSecrets") or []:
        if pull.get("name") == old:
            pull["name"] = new
    return spec


def encoded_data(data=None, string_data=None):
    """The Secret's ``data`` (base64) from ``data`` (already base64) and ``string_data`` (plain)."""
    merged = dict(data or {})
    for key, value in (string_data or {}).items():
        merged[key] = base64.b64encode(str(value).encode()).decode()
    return merged


def content_digest(data, secret_type="Opaque"):
    """A digest of a Secret's content for naming and comparing versions. It is shortened and
    salted with the type, and only ever appears as part of a name."""
    canonical = json.dumps({"type": secret_type, "data": data}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


def versioned_name(base, data, secret_type="Opaque"):
    """``<base>-<digest>``: the name a versioned (immutable) rotation gives the new Secret."""
    return "%s-%s" % (base[:242], content_digest(data, secret_type))
