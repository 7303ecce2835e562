# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The key of snapshot bundles (pure, stdlib ``hmac``): the signature of a bundle's index, the keyed
fingerprints of Secret values that a bundle holds instead of the values, and the key's non-secret
id. One key, three uses, each with its own key derived by HMAC from it (so that a fingerprint can
never serve as a signature). The key itself is never written to a bundle, a result or a log."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import MANAGED_BY
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

ALGORITHM = "hmac-sha256"
PREFIX = ALGORITHM + ":"
MIN_KEY_BYTES = 16
KEY_BYTES = 32  # what the snapshot creates
SECRET_NAME = "tensorfusion-ops-snapshot-key"
SECRET_KEY = "key"
_FINGERPRINT = re.compile(r"^(sha256|hmac-sha256):[0-9a-f]{64}$")


def _derive(key, purpose):
    return hmac.new(key, ("tensorfusion.ops/" + purpose).encode("ascii"), hashlib.sha256).digest()


class BundleKey:
    """A bundle key (bytes); ``source`` says where it came from (for results, never the key)."""

    def __init__(self, key, source="secret"):
        if not isinstance(key, bytes) or len(key) < MIN_KEY_BYTES:
            raise InvalidInput("a snapshot signing key needs at least %d bytes" % MIN_KEY_BYTES)
        self._sign = _derive(key, "bundle-index")
        self._fingerprint = _derive(key, "fingerprint")
        self.key_id = _derive(key, "key-id").hex()[:16]
        self.source = source

    def __repr__(self):  # never the key
        return "BundleKey(key_id=%s)" % self.key_id

    def fingerprint(self, value):
        """The keyed fingerprint of a value (text or bytes) that a bundle holds instead of it."""
        data = value if isinstance(value, bytes) else str(value).encode("utf-8")
        return PREFIX + hmac.new(self._fingerprint, data, hashlib.sha256).hexdigest()

    def sign(self, payload):
        return hmac.new(self._sign, payload, hashlib.sha256).hexdigest()


def key_from_text(text, source="option"):
    """A key given by the user (the option's text, as UTF-8 bytes)."""
    if not text or len(text.encode("utf-8")) < MIN_KEY_BYTES:
        raise InvalidInput("signing_key must be at least %d characters" % MIN_KEY_BYTES)
    return BundleKey(text.encode("utf-8"), source)


def key_from_secret(secret):
    """The key held by the key Secret (a dict as the API returns it, data base64-encoded)."""
    meta = secret.get("metadata") or {}
    value = (secret.get("data") or {}).get(SECRET_KEY)
    try:
        raw = base64.b64decode(value or "", validate=True)
    except (ValueError, TypeError):
        raw = b""
    if len(raw) < MIN_KEY_BYTES:
        raise InvalidInput("Secret %s/%s holds no usable snapshot key (data.%s: at least %d bytes)"
                           % (meta.get("namespace"), meta.get("name"), SECRET_KEY, MIN_KEY_BYTES))
    return BundleKey(raw, "secret")


def key_secret(namespace, key_bytes):
    """The key Secret to create (``key_bytes``: random, from ``secrets.token_bytes``)."""
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": SECRET_NAME, "namespace": namespace,
                         "labels": dict(MANAGED_BY, **{"tensorfusion.ops/purpose": "snapshot-signing"}),
                         "annotations": {"tensorfusion.ops/description":
                                         "Signs the index of tensorfusion.ops snapshot bundles and keys the "
                                         "fingerprints of Secret values in them; deleting it makes every "
                                         "bundle signed with it unusable."}},
            "data": {SECRET_KEY: base64.b64encode(key_bytes).decode("ascii")}}


# ---- the signed index ---------------------------------------------------------------------------
def index_payload(files, key_id):
    """The bytes a signature covers: every file's checksum and the key id, canonical JSON."""
    return json.dumps({"files": files, "key_id": key_id, "algorithm": ALGORITHM},
                      sort_keys=True, separators=(",", ":")).encode("utf-8")


def signature_of(files, key):
    return {"algorithm": ALGORITHM, "key_id": key.key_id, "value": key.sign(index_payload(files, key.key_id))}


# What check_signature says (also the ``signature`` of a helm_snapshot_info bundle).
VERIFIED, INVALID, UNSIGNED, OTHER_KEY, NO_KEY = "verified", "invalid", "unsigned", "other_key", "no_key"


def check_signature(index, key, allow_unsigned=False):
    """(status, problem or None) of an index (a dict as read) against ``key`` (None: none known)."""
    signature = index.get("signature")
    if not isinstance(signature, dict) or not signature.get("value"):
        if allow_unsigned:
            return UNSIGNED, None
        return UNSIGNED, ("the bundle is not signed (taken before signed bundles, or its signature was "
                          "removed); refused unless allow_unsigned is set")
    if key is None:
        return NO_KEY, ("the signature cannot be checked: no snapshot key (Secret %s in the release's "
                        "namespace, or signing_key)" % SECRET_NAME)
    if signature.get("algorithm") != ALGORITHM:
        return INVALID, "the signature's algorithm %r is not %s" % (signature.get("algorithm"), ALGORITHM)
    if signature.get("key_id") != key.key_id:
        return OTHER_KEY, ("signed with another key (key id %s; the key here is %s)"
                           % (signature.get("key_id"), key.key_id))
    files = index.get("files") if isinstance(index.get("files"), dict) else {}
    expected = key.sign(index_payload(files, key.key_id))
    if not hmac.compare_digest(expected, str(signature.get("value"))):
        return INVALID, "the index's signature does not verify (the bundle was changed after capture)"
    return VERIFIED, None


# ---- fingerprints -------------------------------------------------------------------------------
def is_fingerprint(value):
    return isinstance(value, str) and bool(_FINGERPRINT.match(value))


def matches(fingerprint, value, key):
    """Whether ``value`` is the one behind a bundle's fingerprint: keyed (needs ``key``), or the
    bare sha256 of a bundle taken before keyed fingerprints."""
    if fingerprint.startswith(PREFIX):
        return key is not None and hmac.compare_digest(key.fingerprint(value), fingerprint)
    data = value if isinstance(value, bytes) else str(value).encode("utf-8")
    return hmac.compare_digest("sha256:" + hashlib.sha256(data).hexdigest(), fingerprint)
