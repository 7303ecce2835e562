# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Snapshot bundles of a Helm release and its TensorFusion state: what goes in (pure: cleaning,
redaction, the Secret references), its signed index (the sha256 of every file, signed with the
cluster's snapshot key: helm/signing.py), how its contents are verified (whichever store they come
from: a folder here, Secrets in helm/store.py), and how a local bundle is written (0700
folder, 0600 files, a temporary folder renamed at the end), listed and pruned."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import shutil
import tempfile

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.redact import mask_object

FORMAT = 2  # 2: a signed index and keyed fingerprints; 1: checksums and bare sha256 only
INDEX = "index.json"
META = "meta.json"
TEMP_PREFIX = ".tmp-"
LOCAL, CLUSTER, BOTH = "local", "cluster", "both"  # the stores of helm_snapshot's ``store``
_SERVER_SET_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp",
                        "managedFields", "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds",
                        "ownerReferences")


# ---- pure: what goes into a bundle --------------------------------------------------------------
def clean_object(obj):
    """An object without status and server-set metadata (what a restore can write back)."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in _SERVER_SET_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    annotations.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if not annotations:
        meta.pop("annotations", None)
    return out


def pool_record(pool):
    """A GPUPool's spec and componentStatus."""
    return {"name": pool["metadata"]["name"], "spec": pool.get("spec") or {},
            "componentStatus": (pool.get("status") or {}).get("componentStatus") or {}}


def secret_references(objects, default_namespace):
    """Sorted unique (namespace, name) of every Secret that objects define or reference."""
    found = set()

    def walk(node, namespace):
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "secretName" and isinstance(value, str) and value:
                    found.add((namespace, value))
                elif key in ("secretKeyRef", "secretRef") and isinstance(value, dict) \
                        and value.get("name"):
                    found.add((value.get("namespace") or namespace, value["name"]))
                elif key == "imagePullSecrets" and isinstance(value, list):
                    for item in value:
                        if isinstance(item, dict) and item.get("name"):
                            found.add((namespace, item["name"]))
                walk(value, namespace)
        elif isinstance(node, list):
            for item in node:
                walk(item, namespace)

    for obj in objects:
        namespace = (obj.get("metadata") or {}).get("namespace") or default_namespace
        if obj.get("kind") == "Secret" and (obj.get("metadata") or {}).get("name"):
            found.add((namespace, obj["metadata"]["name"]))
        walk(obj, namespace)
    return sorted(found)


def secret_record(secret, key):
    """Name, type, keys and the keyed fingerprint (``key``: a signing.BundleKey) of each decoded
    value; never the value, nor a bare hash of it that could be guessed offline."""
    data = secret.get("data") or {}
    hashes = {}
    for name, value in sorted(data.items()):
        try:
            raw = base64.b64decode(value or "")
        except (ValueError, TypeError):
            raw = (value or "").encode("utf-8")
        hashes[name] = key.fingerprint(raw)
    meta = secret.get("metadata") or {}
    return {"namespace": meta.get("namespace"), "name": meta.get("name"),
            "type": secret.get("type"), "keys": sorted(data), "fingerprints": hashes}


def mask_cluster(tfc, key, keep_secrets=False):
    """A cleaned TensorFusionCluster with secret-looking env values replaced by their keyed
    fingerprint (unless kept)."""
    cleaned = clean_object(tfc)
    return cleaned if keep_secrets else mask_object(cleaned, key.fingerprint)


def bundle_name(release, namespace, captured_at, revision):
    stamp = re.sub(r"[^0-9TZ]", "", captured_at)
    return "%s_%s_%s_rev%s" % (release, namespace, stamp, revision)


def dumps(value):
    return json.dumps(value, indent=2, sort_keys=True) + "\n"


def text_sha256(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def signed_index(files, key):
    """The index of {file name: text}: each file's sha256 (of its UTF-8 bytes, what a local bundle
    holds on disk) signed with ``key`` (a signing.BundleKey). One index for every store."""
    index = dict((name, text_sha256(text)) for name, text in files.items())
    return {"format": FORMAT, "files": index, "signature": signing.signature_of(index, key)}


# ---- writing ------------------------------------------------------------------------------------
def _write_private(path, text):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(text.encode("utf-8"))


def write_bundle(dest, name, files, key):
    """Write {file name: text} as dest/name with its index signed with ``key`` (a
    signing.BundleKey); atomic by rename. Returns the path."""
    if not os.path.isdir(dest):
        os.makedirs(dest, mode=0o700)
    final = os.path.join(dest, name)
    if os.path.exists(final):
        raise InvalidInput("bundle %s already exists" % final)
    temp = tempfile.mkdtemp(prefix=TEMP_PREFIX + name + "-", dir=dest)
    try:
        os.chmod(temp, 0o700)
        for file_name, text in sorted(files.items()):
            _write_private(os.path.join(temp, file_name), text)
        _write_private(os.path.join(temp, INDEX), dumps(signed_index(files, key)))
        os.rename(temp, final)
    except BaseException:
        shutil.rmtree(temp, ignore_errors=True)
        raise
    return final


# ---- reading, verifying, listing, pruning -------------------------------------------------------
def read_json(bundle, file_name):
    with open(os.path.join(bundle, file_name)) as handle:
        return json.load(handle)


def read_folder(bundle):
    """{entry name: bytes, or None for an entry that is not a regular file} of a bundle folder."""
    contents = {}
    for entry in os.listdir(bundle):
        path = os.path.join(bundle, entry)
        if os.path.isfile(path):
            with open(path, "rb") as handle:
                contents[entry] = handle.read()
        else:
            contents[entry] = None
    return contents


def verify_bundle(bundle, cluster_uid=None, key=None, allow_unsigned=False, signed=True):
    """verify_contents of a bundle folder."""
    try:
        contents = read_folder(bundle)
    except OSError as exc:
        return None, ["unreadable bundle folder: %s" % exc], (signing.INVALID if signed else None)
    return verify_contents(contents, cluster_uid, key, allow_unsigned, signed)


def verify_contents(contents, cluster_uid=None, key=None, allow_unsigned=False, signed=True):
    """(meta or None, problems, signature status) of a bundle's contents ({file name: bytes, or
    None for an entry that is not a file}, the index included), from a folder or from Secrets:
    checksums of every indexed file, no unindexed file, the index complete, and when
    ``cluster_uid`` is given, the bundle's cluster; with ``signed``, the index's signature against
    ``key`` (a signing.BundleKey, None when none is known, or a function of the bundle's meta that
    returns one), an unsigned bundle being a problem unless ``allow_unsigned``. Without ``signed``
    the status is None (a listing that restores nothing)."""
    problems = []
    try:
        if contents.get(INDEX) is None:
            raise ValueError("missing")
        index = json.loads(contents[INDEX].decode("utf-8"))
        if not isinstance(index, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return None, ["no readable %s (an incomplete or foreign bundle): %s" % (INDEX, exc)], \
            (signing.INVALID if signed else None)
    files = index.get("files") if isinstance(index.get("files"), dict) else {}
    if META not in files:
        problems.append("%s is not in the index" % META)
    for file_name, expected in sorted(files.items()):
        if os.path.basename(file_name) != file_name:
            problems.append("index names a path outside the bundle: %s" % file_name)
            continue
        data = contents.get(file_name)
        if data is None:
            problems.append("%s is missing" % file_name)
        elif hashlib.sha256(data).hexdigest() != expected:
            problems.append("%s does not match its checksum (changed after capture)" % file_name)
    extra = sorted(set(contents) - set(files) - {INDEX})
    if extra:
        problems.append("files not in the index: %s" % ", ".join(extra))
    meta = None
    if META in files and contents.get(META) is not None:
        try:
            meta = json.loads(contents[META].decode("utf-8"))
        except ValueError as exc:
            problems.append("%s unreadable: %s" % (META, exc))
    if meta is not None and cluster_uid and meta.get("cluster_uid") != cluster_uid:
        problems.append("captured on another cluster (kube-system UID %s at %s; this cluster is %s)"
                        % (meta.get("cluster_uid"), meta.get("api_server"), cluster_uid))
    status = None
    if signed:
        status, problem = signing.check_signature(index, key(meta) if callable(key) else key,
                                                  allow_unsigned)
        if problem:
            problems.insert(0, problem)
    return meta, problems, status


def list_bundles(dest):
    """Paths of the complete-looking bundles in dest (temporary folders skipped), sorted."""
    if not os.path.isdir(dest):
        return []
    return sorted(os.path.join(dest, n) for n in os.listdir(dest)
                  if not n.startswith(TEMP_PREFIX) and os.path.isdir(os.path.join(dest, n))
                  and os.path.isfile(os.path.join(dest, n, INDEX)))


def describe(bundle, meta, problems, signature=None, store=LOCAL):
    """A bundle as helm_snapshot_info lists it; ``bundle`` is its location (a folder, or the
    secret:// reference of a cluster bundle), also its ``path`` (what helm_release takes)."""
    meta = meta or {}
    return {"path": bundle, "location": bundle, "store": store,
            "name": bundle.rsplit("/", 1)[-1], "release": meta.get("release"),
            "namespace": meta.get("namespace"), "revision": meta.get("revision"),
            "status": meta.get("status"), "chart": meta.get("chart"),
            "chart_version": meta.get("chart_version"), "app_version": meta.get("app_version"),
            "captured_at": meta.get("captured_at"), "api_server": meta.get("api_server"),
            "cluster_uid": meta.get("cluster_uid"), "helm_flags": meta.get("helm_flags"),
            "signature": signature, "usable": not problems, "problems": problems}


def select(items, release=None, namespace=None, cluster_uid=None):
    """Bundle descriptions of a release (and cluster), of either store, newest capture first (the
    copies of one capture: the cluster's first)."""
    chosen = [i for i in items
              if (release is None or i["release"] == release)
              and (namespace is None or i["namespace"] == namespace)
              and (cluster_uid is None or i["cluster_uid"] == cluster_uid)]
    return sorted(chosen, key=lambda i: (i["captured_at"] or "", i.get("store") == CLUSTER, i["name"]),
                  reverse=True)


def to_prune(items, keep):
    """Of one release's bundles (newest first), those beyond the newest ``keep``."""
    if keep is None:
        return []
    if keep < 1:
        raise InvalidInput("keep must be at least 1")
    return items[keep:]


def remove_bundle(path):
    """Remove one bundle folder (refuses anything that does not look like a bundle)."""
    if not os.path.isfile(os.path.join(path, INDEX)):
        raise InvalidInput("%s does not look like a snapshot bundle (no %s); not removing it"
                           % (path, INDEX))
    shutil.rmtree(path)


# ---- restoring secret-looking values that a bundle holds only as hashes -------------------------
def unmask_like(saved, current, where="componentConfig", key=None):
    """``saved`` with every fingerprinted secret value taken from ``current`` when its fingerprint
    matches (keyed with ``key``, or a bare sha256 of an older bundle); a fingerprint that no current
    value matches cannot be restored and is refused."""
    if isinstance(saved, dict):
        out = {}
        for name, value in saved.items():
            out[name] = unmask_like(value, (current or {}).get(name) if isinstance(current, dict) else None,
                                    "%s.%s" % (where, name), key)
        return out
    if isinstance(saved, list):
        named = isinstance(current, list) and all(isinstance(c, dict) and "name" in c for c in current)
        by_name = dict((c["name"], c) for c in current) if named else {}
        result = []
        for index, item in enumerate(saved):
            if isinstance(item, dict) and "name" in item and by_name:
                peer = by_name.get(item["name"])
            else:
                peer = current[index] if isinstance(current, list) and index < len(current) else None
            label = item.get("name", index) if isinstance(item, dict) else index
            result.append(unmask_like(item, peer, "%s[%s]" % (where, label), key))
        return result
    if signing.is_fingerprint(saved):
        if current is not None and signing.matches(saved, current, key):
            return current
        raise InvalidInput("%s was captured as a hash only (the bundle was taken without "
                           "keep_secrets) and the cluster no longer holds that value; it cannot be "
                           "restored from this bundle" % where)
    return saved
