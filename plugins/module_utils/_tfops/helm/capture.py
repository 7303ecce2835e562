# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Capturing a snapshot bundle from the cluster (helm + API), the cluster's identity and the
bundle key (the Secret in the release's namespace, created on first use, or the task's own key);
the bundle format itself lives in helm/snapshots.py, the signature and fingerprints in helm/signing.py."""

from __future__ import annotations

import secrets as random_source

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.release import (
    recorded_flags,
    secrets_in,
)


def cluster_identity(kube):
    """(kube-system namespace UID, API server git version)."""
    namespaces = kube.resource("Namespace", api_version="v1")
    uid = kube.call("get", "namespaces/kube-system", namespaces.get, name="kube-system").metadata.uid
    try:
        from kubernetes import client as k8s_client
        version = kube.call("get", "version", k8s_client.VersionApi(kube.api_client).get_code).git_version
    except ImportError:
        version = None
    return uid, version


def read_key(kube, namespace, given=None):
    """The bundle key: the task's ``given`` key (text), else the key Secret of ``namespace``;
    None when that Secret does not exist."""
    if given:
        return signing.key_from_text(given)
    api = kube.resource("Secret", api_version="v1")
    try:
        secret = kube.call("get", "secrets/%s/%s" % (namespace, signing.SECRET_NAME), api.get,
                           name=signing.SECRET_NAME, namespace=namespace).to_dict()
    except ApiError as exc:
        if exc.status == 404:
            return None
        raise
    return signing.key_from_secret(secret)


def ensure_key(kube, namespace, given=None, check_mode=False):
    """(key, created): the bundle key, the key Secret created with 32 random bytes when there is
    none (in check mode: a throwaway key, nothing created). Two snapshots racing: the one whose
    create loses reads the winner's key."""
    key = read_key(kube, namespace, given)
    if key is not None:
        return key, False
    raw = random_source.token_bytes(signing.KEY_BYTES)
    if check_mode:
        return signing.BundleKey(raw, "would be created"), True
    api = kube.resource("Secret", api_version="v1")
    try:
        kube.call("create", "secrets/%s" % namespace, api.create,
                  body=signing.key_secret(namespace, raw), namespace=namespace)
    except ApiError as exc:
        if exc.status != 409:
            raise
        return read_key(kube, namespace), False
    return signing.BundleKey(raw, "secret"), True


def _list(kube, kind):
    try:
        api = kube.resource(kind, group=TF_GROUP)
    except ApiError as exc:
        if exc.status == 404:
            return []
        raise
    return kube.call("list", kind, api.get).to_dict()["items"]


def _secrets(kube, refs, key):
    api = kube.resource("Secret", api_version="v1")
    records = []
    for namespace, name in refs:
        try:
            secret = kube.call("get", "secrets/%s/%s" % (namespace, name), api.get,
                               name=name, namespace=namespace).to_dict()
        except ApiError as exc:
            if exc.status != 404:
                raise
            records.append({"namespace": namespace, "name": name, "missing": True})
            continue
        records.append(snapshots.secret_record(secret, key))
    return records


def capture(kube, helm, params, on_secret, get_key):
    """(bundle name, meta, {file name: text}, key) of a bundle of the release, read now; every
    Secret value in it as its fingerprint keyed with the key ``get_key()`` returns (a
    signing.BundleKey; asked for once the release is known to exist, so that a snapshot of a
    release that is not there creates no key Secret)."""
    name, namespace = params["name"], params["namespace"]
    info, history = helm.release(name, namespace, all_values=True)
    key = get_key()
    on_secret(secrets_in(info))
    keep = params.get("keep_secrets")
    uid, server_version = cluster_identity(kube)
    clusters = _list(kube, "TensorFusionCluster")
    pools = _list(kube, "GPUPool")
    for tfc in clusters:
        on_secret(redact.secret_leaves(tfc.get("spec") or {}))
    objects = redact.parse_manifest(info["manifest"]) + clusters
    secrets = _secrets(kube, snapshots.secret_references(objects, namespace), key)
    captured_at = micro_time(utcnow())
    meta = {"format": snapshots.FORMAT, "release": name, "namespace": namespace,
            "revision": info["revision"], "status": info["status"], "chart": info["chart"],
            "chart_version": info["chart_version"], "app_version": info["app_version"],
            "captured_at": captured_at, "helm_version": helmcli.version_text(helm.version),
            "server_version": server_version, "api_server": kube.server, "cluster_uid": uid,
            "keep_secrets": bool(keep),
            # The helm flags of the upgrade this restore point precedes: a rollback to it uses them.
            "helm_flags": recorded_flags(params.get("helm_flags")),
            # The stored revision's exact manifest and values, to recognise it at restore time
            # (keyed: with the redacted values beside it, a bare hash would test guesses offline).
            "manifest_fingerprint": key.fingerprint(info["manifest"]),
            "values_fingerprint": key.fingerprint(snapshots.dumps(info["values"])),
            "key_id": key.key_id,
            "clusters": sorted(c["metadata"]["name"] for c in clusters),
            "gpupools": sorted(p["metadata"]["name"] for p in pools),
            "secrets": len(secrets)}
    files = {
        snapshots.META: snapshots.dumps(meta),
        "values.json": snapshots.dumps(info["values"] if keep else
                                       redact.redact_values(info["values"], fingerprint=key.fingerprint)),
        "computed-values.json": snapshots.dumps(info["computed_values"] if keep else redact.redact_values(
            info["computed_values"], fingerprint=key.fingerprint)),
        "manifest.yaml": redact.mask_manifest(info["manifest"], key.fingerprint),
        "history.json": snapshots.dumps(history),
        "tensorfusionclusters.json": snapshots.dumps(
            [snapshots.mask_cluster(c, key, keep) for c in clusters]),
        "gpupools.json": snapshots.dumps([snapshots.pool_record(p) for p in pools]),
        "secrets.json": snapshots.dumps(secrets),
    }
    bundle = snapshots.bundle_name(name, namespace, captured_at, info["revision"])
    return bundle, meta, files, key
