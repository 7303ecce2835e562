# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The live identity a change plan is made from and checked against (reads only): the cluster's
UID, the Helm release's newest revision, and every TensorFusionCluster's and GPUPool's
generation with a salted digest of the pool settings the runbooks read. Generations move only
with the spec (never with the operator's status updates), so an idle cluster keeps its identity."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import plans
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.storage import ReleaseStorage
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP


def _cluster_entry(salt):
    def project(obj):
        pools = dict((entry.get("name") or str(i), plans.digest(entry.get("specTemplate") or {}, salt))
                     for i, entry in enumerate((obj.get("spec") or {}).get("gpuPools") or []))
        return ("TensorFusionCluster/" + obj["metadata"]["name"],
                {"generation": obj["metadata"].get("generation"), "pools": pools})
    return project


def _pool_entry(salt):
    def project(obj):
        return ("GPUPool/" + obj["metadata"]["name"],
                {"generation": obj["metadata"].get("generation"), "settings": plans.digest(obj.get("spec") or {}, salt)})
    return project


def live_identity(kube, namespace, release, salt):
    namespaces = kube.resource("Namespace", api_version="v1")
    uid = kube.call("get", "namespaces/kube-system", namespaces.get, name="kube-system").metadata.uid
    revisions = ReleaseStorage(kube).revisions(namespace, release)
    newest = max(revisions, key=lambda r: r["revision"]) if revisions else None
    objects = dict(list_pages(kube, kube.resource("TensorFusionCluster", group=TF_GROUP), project=_cluster_entry(salt)))
    objects.update(list_pages(kube, kube.resource("GPUPool", group=TF_GROUP), project=_pool_entry(salt)))
    return {"cluster": {"uid": uid},
            "release": {"name": release, "namespace": namespace,
                        "revision": newest["revision"] if newest else None,
                        "status": newest["status"] if newest else None},
            "objects": objects}
