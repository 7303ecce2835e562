# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Helm's Secret storage of a release, the one place it is read: the revisions and their status
from the storage Secrets' labels (a metadata-only list, no Secret data), a revision's stored
release decoded (a rollback that helm rollback cannot do rebuilds its chart from it, helm/cli.py),
and the release's last rendering as a caller reads it.

The rendering is the one read of Secret data for tf_cluster_info: one GET of the newest deployed
revision's storage Secret, decoded in memory by the caller's ``render`` (gpupool/chart_drift.py
keeps only the compared pool fields of the manifest's TensorFusionCluster documents). The values,
the chart, the config and every other manifest document are dropped there, never returned,
logged or put in a finding."""

from __future__ import annotations

import base64
import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError, Forbidden
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages


class RenderingError(Exception):
    """A stored rendering that cannot be read; the message never quotes its content."""


class ReleaseStorage:
    """Helm's storage Secrets, each release read at most once per module run."""

    def __init__(self, kube):
        self.kube = kube
        self._revisions = {}  # (namespace, release) -> [{name, status, revision, secret}]
        self._renderings = {}  # (namespace, release) -> (revision, rendered, unchecked)

    def revisions(self, namespace, release):
        """Every stored revision of a release, from the storage labels (metadata only)."""
        key = (namespace, release)
        if key not in self._revisions:
            def project(obj):
                labels = obj["metadata"].get("labels") or {}
                return {"name": labels.get("name"), "status": labels.get("status", "unknown"),
                        "revision": int(labels.get("version", 0)), "secret": obj["metadata"]["name"]}
            resource = self.kube.resource("Secret", api_version="v1")
            self._revisions[key] = list(list_pages(self.kube, resource, namespace=namespace, metadata_only=True,
                                                   label_selector="owner=helm,name=%s" % release, project=project))
        return self._revisions[key]

    def rendering(self, namespace, release, render):
        """(revision, render(stored release), None) of the release's newest deployed revision, or
        (revision or None, None, why it cannot be read): the check is advice, so a refusal or an
        unreadable record (``render`` raises RenderingError) is said, not raised. Read once per
        release."""
        if (namespace, release) not in self._renderings:
            self._renderings[(namespace, release)] = self._read(namespace, release, render)
        return self._renderings[(namespace, release)]

    def _read(self, namespace, release, render):
        try:
            deployed = [r for r in self.revisions(namespace, release) if r["status"] == "deployed"]
        except Forbidden:  # only in another namespace than the module's, which was listed already
            return None, None, "forbidden: list secrets in %s (Helm's storage labels of release %s)" % (
                namespace, release)
        if not deployed:
            return None, None, "Helm release %s/%s has no deployed revision in Helm's Secret storage" % (
                namespace, release)
        newest = max(deployed, key=lambda r: r["revision"])
        revision, name = newest["revision"], newest["secret"]
        secrets = self.kube.resource("Secret", api_version="v1")
        self.kube.requests += 1
        try:
            response = self.kube.call("get", "secrets/%s/%s" % (namespace, name), self.kube.dynamic.request,
                                      "GET", secrets.path(name=name, namespace=namespace), serialize=False)
        except Forbidden:
            return revision, None, ("forbidden: get secrets in %s (Helm's storage Secret %s holds the release's "
                                    "last rendering; roles/rbac/files/precheck.yml grants it)" % (namespace, name))
        except ApiError as exc:
            if exc.status != 404:
                raise
            return revision, None, "Helm's storage Secret %s/%s is gone (the release changed meanwhile)" % (
                namespace, name)
        try:
            stored = (json.loads(response.data).get("data") or {}).get("release")
            rendered = render(stored)
        except ValueError:
            return revision, None, "the API server's answer for %s/%s is not JSON" % (namespace, name)
        except RenderingError as exc:
            return revision, None, "revision %d of Helm release %s/%s: %s" % (revision, namespace, release, exc)
        return revision, rendered, None


# ---- a revision's stored release --------------------------------------------------------------
def decode_release(data):
    """The release JSON helm keeps in a storage Secret's ``release`` key (as the API returns it:
    base64 of helm's base64 of gzipped JSON)."""
    import gzip
    raw = base64.b64decode(base64.b64decode(data))
    if raw[:3] == b"\x1f\x8b\x08":
        raw = gzip.decompress(raw)
    return json.loads(raw)


def stored_release(kube, name, namespace, revision):
    """The stored release of one revision, read from helm's Secret storage driver."""
    secrets = kube.resource("Secret", api_version="v1")
    secret_name = "sh.helm.release.v1.%s.v%s" % (name, revision)
    obj = kube.call("get", "secrets/%s/%s" % (namespace, secret_name), secrets.get,
                    name=secret_name, namespace=namespace).to_dict()
    return decode_release((obj.get("data") or {})["release"])
