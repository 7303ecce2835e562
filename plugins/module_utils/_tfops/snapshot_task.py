# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Capturing a snapshot bundle from the cluster (helm + API) and the cluster's identity; the
bundle format itself lives in snapshots.py."""

from __future__ import annotations

import hashlib

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import helm as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import redact, snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.deadline import utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.errors import ApiError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.release import (
    recorded_flags,
    secrets_in,
)

GROUP = "tensor-fusion.ai"


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


def _list(kube, kind):
    try:
        api = kube.resource(kind, group=GROUP)
    except ApiError as exc:
        if exc.status == 404:
            return []
        raise
    return kube.call("list", kind, api.get).to_dict()["items"]


def _secrets(kube, refs):
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
        records.append(snapshots.secret_record(secret))
    return records


def capture(kube, helm, params, on_secret):
    """{file name: text} and meta of a bundle of the release, read now."""
    name, namespace = params["name"], params["namespace"]
    info, history = helm.release(name, namespace, all_values=True)
    on_secret(secrets_in(info))
    keep = params.get("keep_secrets")
    uid, server_version = cluster_identity(kube)
    clusters = _list(kube, "TensorFusionCluster")
    pools = _list(kube, "GPUPool")
    for tfc in clusters:
        on_secret(redact.secret_leaves(tfc.get("spec") or {}))
    objects = redact.parse_manifest(info["manifest"]) + clusters
    secrets = _secrets(kube, snapshots.secret_references(objects, namespace))
    captured_at = utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    meta = {"format": snapshots.FORMAT, "release": name, "namespace": namespace,
            "revision": info["revision"], "status": info["status"], "chart": info["chart"],
            "chart_version": info["chart_version"], "app_version": info["app_version"],
            "captured_at": captured_at, "helm_version": helmcli.version_text(helm.version),
            "server_version": server_version, "api_server": kube.server, "cluster_uid": uid,
            "keep_secrets": bool(keep),
            # The helm flags of the upgrade this restore point precedes: a rollback to it uses them.
            "helm_flags": recorded_flags(params.get("helm_flags")),
            # The stored revision's exact manifest and values, to recognise it at restore time.
            "manifest_sha256": hashlib.sha256(info["manifest"].encode("utf-8")).hexdigest(),
            "values_sha256": hashlib.sha256(snapshots.dumps(info["values"]).encode("utf-8")).hexdigest(),
            "clusters": sorted(c["metadata"]["name"] for c in clusters),
            "gpupools": sorted(p["metadata"]["name"] for p in pools),
            "secrets": len(secrets)}
    files = {
        snapshots.META: snapshots.dumps(meta),
        "values.json": snapshots.dumps(info["values"] if keep else redact.redact_values(info["values"])),
        "computed-values.json": snapshots.dumps(info["computed_values"] if keep else
                                                redact.redact_values(info["computed_values"])),
        "manifest.yaml": redact.mask_manifest(info["manifest"]),
        "history.json": snapshots.dumps(history),
        "tensorfusionclusters.json": snapshots.dumps(
            [snapshots.mask_cluster(c, keep) for c in clusters]),
        "gpupools.json": snapshots.dumps([snapshots.pool_record(p) for p in pools]),
        "secrets.json": snapshots.dumps(secrets),
    }
    bundle = snapshots.bundle_name(name, namespace, captured_at, info["revision"])
    return bundle, meta, files
