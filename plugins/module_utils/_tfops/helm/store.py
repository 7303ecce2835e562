# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshot bundles stored in the cluster (pure): a bundle's files and signed index as one
gzip-compressed JSON document, cut into chunks that each fit a Secret of type
``tensorfusion.ops/snapshot`` in the release namespace (the way Helm keeps its releases), and read
back; secret:// references; which bundle is the newest usable one in either store. The API calls
are in helm/store_kube.py; verification is snapshots.verify_contents, the same as a folder's."""

from __future__ import annotations

import base64
import gzip
import json
import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import MANAGED_BY, selector_terms
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

SECRET_TYPE = "tensorfusion.ops/snapshot"
SCHEME = "secret://"
DATA_KEY = "bundle.gz"
# Kubernetes refuses an object over 1 MiB (etcd's request limit is 1.5 MiB); a chunk's base64
# takes 4/3 of it, so 700 KiB keeps every Secret well below both.
CHUNK_BYTES = 700 * 1024
LABEL_RELEASE = "tensorfusion.ops/snapshot-of"
LABEL_CLUSTER = "tensorfusion.ops/cluster-uid"
ANNOTATION_BUNDLE = "tensorfusion.ops/snapshot-bundle"
ANNOTATION_PART = "tensorfusion.ops/snapshot-part"
ANNOTATION_PARTS = "tensorfusion.ops/snapshot-parts"
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


# ---- references ---------------------------------------------------------------------------------
def reference(namespace, name):
    return "%s%s/%s" % (SCHEME, namespace, name)


def is_reference(text):
    return isinstance(text, str) and text.startswith(SCHEME)


def parse_reference(text):
    """(namespace, name) of ``secret://<namespace>/<name>``; a malformed one is refused."""
    rest = text[len(SCHEME):] if is_reference(text) else ""
    parts = rest.split("/")
    if len(parts) != 2 or not all(_NAME.match(p) for p in parts):
        raise InvalidInput("%r is not a cluster snapshot reference (secret://<namespace>/<name>)" % text)
    return parts[0], parts[1]


def secret_name(release, captured_at, revision):
    """The name of a bundle's first Secret (the one its reference names); its further chunks add
    ``.part-<n>``."""
    stamp = re.sub(r"[^0-9TZ]", "", captured_at).lower()
    return "tfops-snapshot.%s.%s.rev%s" % (release, stamp, revision)


def selector(release=None):
    """The label selector of the bundles' Secrets (of one release, or of all)."""
    terms = selector_terms(MANAGED_BY)
    terms.append("%s=%s" % (LABEL_RELEASE, release) if release else LABEL_RELEASE)
    return ",".join(terms)


# ---- encoding -----------------------------------------------------------------------------------
def pack(files, key):
    """The gzip-compressed JSON of {file name: text} with their index signed with ``key`` (the
    index a local bundle of the same files holds; mtime 0 so that equal bundles compress alike)."""
    document = dict(files)
    document[snapshots.INDEX] = snapshots.dumps(snapshots.signed_index(files, key))
    raw = json.dumps(document, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return gzip.compress(raw, mtime=0)


def chunks(blob, size=CHUNK_BYTES):
    if size < 1:
        raise InvalidInput("a chunk needs at least one byte")
    return [blob[i:i + size] for i in range(0, len(blob), size)] or [b""]


def secrets_for(namespace, name, release, cluster_uid, blob, size=CHUNK_BYTES):
    """The Secrets that store ``blob`` (pack's output) as bundle ``name``: part 1 named ``name``,
    the others ``name.part-<n>``; every one labelled with the release and the cluster identity."""
    pieces = chunks(blob, size)
    bodies = []
    for number, piece in enumerate(pieces, 1):
        bodies.append({
            "apiVersion": "v1", "kind": "Secret", "type": SECRET_TYPE,
            "metadata": {
                "name": name if number == 1 else "%s.part-%d" % (name, number),
                "namespace": namespace,
                "labels": dict(MANAGED_BY, **{LABEL_RELEASE: release, LABEL_CLUSTER: cluster_uid}),
                "annotations": {ANNOTATION_BUNDLE: name, ANNOTATION_PART: str(number),
                                ANNOTATION_PARTS: str(len(pieces))}},
            "data": {DATA_KEY: base64.b64encode(piece).decode("ascii")}})
    return bodies


# ---- decoding -----------------------------------------------------------------------------------
def group(secrets):
    """{(namespace, bundle name): [its Secrets]} of listed Secrets of the snapshot type (dicts as
    the API returns them); a Secret that names no bundle is left out."""
    found = {}
    for secret in secrets:
        meta = secret.get("metadata") or {}
        name = (meta.get("annotations") or {}).get(ANNOTATION_BUNDLE)
        if secret.get("type") == SECRET_TYPE and name:
            found.setdefault((meta.get("namespace"), name), []).append(secret)
    return found


def _number(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def reassemble(parts):
    """(blob or None, problems) of one bundle's Secrets: every part 1..n present once, each naming
    the same n."""
    numbered, counts = {}, set()
    for secret in parts:
        annotations = (secret.get("metadata") or {}).get("annotations") or {}
        number = _number(annotations.get(ANNOTATION_PART))
        counts.add(_number(annotations.get(ANNOTATION_PARTS)))
        if number is None or number in numbered:
            return None, ["a Secret of the bundle has no part number, or a part is stored twice"]
        numbered[number] = secret
    if len(counts) != 1 or None in counts:
        return None, ["the bundle's Secrets disagree on how many parts it has"]
    total = counts.pop()
    missing = [str(n) for n in range(1, total + 1) if n not in numbered]
    if missing or len(numbered) != total:
        return None, ["incomplete: part(s) %s of %d missing (a bundle being written or removed)"
                      % (", ".join(missing) or "?", total)]
    blob = b""
    for number in range(1, total + 1):
        value = (numbered[number].get("data") or {}).get(DATA_KEY)
        try:
            blob += base64.b64decode(value or "", validate=True)
        except (TypeError, ValueError):
            return None, ["part %d does not hold base64 data.%s" % (number, DATA_KEY)]
    return blob, []


def unpack(blob):
    """(contents for snapshots.verify_contents, problems) of pack's output."""
    try:
        document = json.loads(gzip.decompress(blob).decode("utf-8"))
        if not isinstance(document, dict) or not all(isinstance(v, str) for v in document.values()):
            raise ValueError("not an object of file texts")
    except (OSError, EOFError, ValueError) as exc:
        return None, ["not a readable bundle (gzip-compressed JSON): %s" % exc]
    return dict((name, text.encode("utf-8")) for name, text in document.items()), []


def contents_of(parts):
    """(contents or None, problems) of one bundle's Secrets."""
    blob, problems = reassemble(parts)
    return unpack(blob) if blob is not None else (None, problems)


def not_a_restore_point(parts, name):
    """Why the Secrets read as bundle ``name`` are no restore point of this collection, or None
    when each is one: of the snapshot type, labelled as the collection labels its restore points,
    and naming this bundle. Nothing that fails this is ever deleted or restored from. Pure."""
    if not parts:
        return "there is no such Secret"
    for secret in parts:
        meta = secret.get("metadata") or {}
        labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
        if secret.get("type") != SECRET_TYPE:
            return "Secret %s is of type %s, not %s" % (meta.get("name"), secret.get("type") or "(none)", SECRET_TYPE)
        if any(labels.get(key) != value for key, value in MANAGED_BY.items()) or not labels.get(LABEL_RELEASE):
            return "Secret %s lacks the labels of the collection's restore points (%s, %s)" % (
                meta.get("name"), ", ".join("%s=%s" % kv for kv in MANAGED_BY.items()), LABEL_RELEASE)
        if annotations.get(ANNOTATION_BUNDLE) != name:
            return "Secret %s is not a part of bundle %s" % (meta.get("name"), name)
    return None


def names_of(parts):
    """The names of a bundle's Secrets (to remove it: the first part first, so that a removal cut
    short leaves an incomplete bundle, never a complete-looking one)."""
    def order(secret):
        return _number(((secret.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_PART)) or 0
    return [s["metadata"]["name"] for s in sorted(parts, key=order)]


def verify_parts(parts, **verify_kwargs):
    """(contents or None, meta or None, problems, signature status) of one bundle's Secrets:
    snapshots.verify_contents of what they hold, the same checks as a folder's."""
    contents, problems = contents_of(parts)
    if contents is None:
        return None, None, problems, (signing.INVALID if verify_kwargs.get("signed", True) else None)
    meta, problems, status = snapshots.verify_contents(contents, **verify_kwargs)
    return contents, meta, problems, status
