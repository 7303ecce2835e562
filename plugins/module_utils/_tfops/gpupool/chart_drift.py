# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the live pools of a Helm-owned TensorFusionCluster differ from the release's last
rendering of it, as pure functions (the reading is in cluster/info.py).

Helm patches a custom resource with a JSON merge patch from the old rendering to the new one, and
a merge patch replaces a list whole: the next chart upgrade that changes anything in the rendered
``spec.gpuPools`` makes the live list the chart's again. The differences found here are what
that upgrade would revert. Only the settings that start rollouts (the hashed component fields)
and the rolling policy are compared, with the defaults the API server and the operator apply, so
that a default the server filled in is not a difference."""

from __future__ import annotations

import json
import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.storage import RenderingError, decode_release
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.redact import value_hash

MANAGED_BY = "app.kubernetes.io/managed-by"
RELEASE_NAME = "meta.helm.sh/release-name"
RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
# Written by the chart step's post-renderer (gpupool/chart_pools.py).
CHART_POOLS = chart_pools.CHART_POOLS

# The compared fields of a pool entry's specTemplate: (path, kind, value when the field is absent
# but its parent object is present (the CRD default the API server fills in), value when the
# parent is absent too (the operator's Go fallback)). Kinds: "value" is shown in findings (images,
# numbers, short strings), "flag" is a boolean that is false when absent, "opaque" is an embedded
# object (Pod templates, patches) that may carry secret env values: compared, never shown.
_HYP, _WORKER, _CLIENT = "componentConfig.hypervisor.", "componentConfig.worker.", "componentConfig.client."
_POLICY = "nodeManagerConfig.nodePoolRollingUpdatePolicy."
FIELDS = (
    (_HYP + "image", "value", None, None),
    (_HYP + "vectorImage", "value", None, None),
    (_HYP + "portNumber", "value", 8000, 8001),
    (_HYP + "enableVector", "flag", False, False),
    (_HYP + "podTemplate", "opaque", None, None),
    (_WORKER + "image", "value", None, None),
    (_WORKER + "podTemplate", "opaque", None, None),
    (_CLIENT + "image", "value", None, None),
    (_CLIENT + "operatorEndpoint", "value", None, None),
    (_CLIENT + "patchToPod", "opaque", None, None),
    (_CLIENT + "patchToContainer", "opaque", None, None),
    (_CLIENT + "remoteModeImage", "value", None, None),
    (_CLIENT + "embeddedModeImage", "value", None, None),
    (_POLICY + "autoUpdateHypervisor", "flag", False, False),
    (_POLICY + "autoUpdateWorker", "flag", False, False),
    (_POLICY + "autoUpdateClient", "flag", False, False),
    (_POLICY + "batchPercentage", "value", 100, 100),
    (_POLICY + "batchInterval", "value", "1s", "1s"),
)
_USERINFO = re.compile(r"(://)[^/@\s]+@")
_CLUSTER_DOC = re.compile(r"^kind:[ \t]*[\"']?TensorFusionCluster[\"']?[ \t]*$", re.MULTILINE)
_DOC_SPLIT = re.compile(r"^---[ \t]*$", re.MULTILINE)


class ChartRenderingError(RenderingError):
    """The release's stored rendering cannot be read; the message never quotes its content."""


# ---- ownership and the post-renderer's record ---------------------------------------------------
def helm_owner(obj):
    """{name, namespace} of the Helm release that owns an object (Helm's ownership metadata:
    the managed-by label and both release annotations), else None."""
    meta = obj.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if (meta.get("labels") or {}).get(MANAGED_BY) != "Helm":
        return None
    if not annotations.get(RELEASE_NAME) or not annotations.get(RELEASE_NAMESPACE):
        return None
    return {"name": annotations[RELEASE_NAME], "namespace": annotations[RELEASE_NAMESPACE]}


def recorded_chart_pools(obj):
    """None without the post-renderer's annotation; else the chart's own rendering of the pools it
    recorded ({entry: specTemplate}, {} when unreadable), every env value replaced by its hash."""
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(CHART_POOLS)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return mask_env_values(value) if isinstance(value, dict) else {}


def mask_env_values(node):
    """Every ``value`` of an ``env`` list replaced by its hash, whatever the variable's name: env
    values in Pod templates and patches can be secrets (a licence, a token)."""
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key == "env" and isinstance(value, list):
                out[key] = [dict(item, value=value_hash(item["value"]))
                            if isinstance(item, dict) and item.get("value") not in (None, "") else mask_env_values(item)
                            for item in value]
            else:
                out[key] = mask_env_values(value)
        return out
    if isinstance(node, list):
        return [mask_env_values(v) for v in node]
    return node


# ---- the release's rendering ---------------------------------------------------------------------
def rendered_clusters(release_data):
    """{name: TensorFusionCluster document} of a release's manifest, from a storage Secret's
    ``release`` field as the API returns it. Only those documents are parsed and kept: the rest of
    the release (values, chart, config, other manifests) is dropped as soon as it is decoded."""
    if not yamldoc.HAS_YAML:
        raise ChartRenderingError("PyYAML is required to read the release's manifest")
    try:
        manifest = decode_release(release_data).get("manifest") or ""
    except (ValueError, TypeError, OSError, EOFError, AttributeError):
        # binascii.Error and json's errors are ValueErrors, gzip's are OSError / EOFError.
        raise ChartRenderingError("the release's stored data cannot be decoded")
    found = {}
    for chunk in _DOC_SPLIT.split(manifest):
        if not _CLUSTER_DOC.search(chunk):
            continue  # never parse (or hold) another document of the release
        try:
            doc = yamldoc.load(chunk)
        except yamldoc.YAMLError:
            # A YAML error message quotes the offending line, which may hold a secret.
            raise ChartRenderingError("a TensorFusionCluster document of the release's manifest cannot be parsed")
        if isinstance(doc, dict) and doc.get("kind") == "TensorFusionCluster" and \
                str(doc.get("apiVersion", "")).startswith("tensor-fusion.ai/"):
            found[(doc.get("metadata") or {}).get("name")] = doc
    return found


# ---- the comparison --------------------------------------------------------------------------------
def _effective(template, path, default, fallback):
    node = template
    *parents, last = path.split(".")
    for part in parents:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return fallback
    value = node.get(last)
    # "" is the Go zero value of a string field, as good as absent; so is {} for an object.
    return default if value in (None, "", {}) else value


def pool_settings(cluster):
    """{entry name: {field path: effective value}} of a TensorFusionCluster's pools: the compared
    fields only, with the defaults filled in."""
    out = {}
    for entry in ((cluster or {}).get("spec") or {}).get("gpuPools") or []:
        template = entry.get("specTemplate") or {}
        out[entry.get("name")] = dict((path, _effective(template, path, default, fallback))
                                      for path, _kind, default, fallback in FIELDS)
    return out


def rendered_pool_settings(release_data):
    """{cluster: pool settings} of a release's stored rendering (rendered_clusters, pool_settings):
    what helm/storage.py's ReleaseStorage.rendering keeps of it for the chart drift check."""
    return dict((cluster, pool_settings(doc)) for cluster, doc in rendered_clusters(release_data).items())


def _safe(value):
    # A URL with credentials in it (operatorEndpoint) loses them; images and numbers pass.
    return _USERINFO.sub(r"\1***@", value) if isinstance(value, str) else value


def diff_pools(live, rendered):
    """Every difference between live pool settings and the rendered ones (both from
    pool_settings), by entry name then field, each one of:
    {pool, only: live|rendered} (a whole entry on one side only),
    {pool, field, live, rendered} (a shown field; values safe to print),
    {pool, field, hidden: true} (an embedded object that differs; never its content)."""
    out = []
    for name in sorted(set(live) | set(rendered), key=lambda n: (n is None, n or "")):
        if name not in rendered or name not in live:
            out.append({"pool": name, "only": "live" if name in live else "rendered"})
            continue
        for path, kind, _default, _fallback in FIELDS:
            mine, chart = live[name].get(path), rendered[name].get(path)
            if mine == chart:
                continue
            if kind == "opaque":
                out.append({"pool": name, "field": path, "hidden": True})
            else:
                out.append({"pool": name, "field": path, "live": _safe(mine), "rendered": _safe(chart)})
    return out


def _show(value):
    return "unset" if value is None else json.dumps(value)


def describe(difference):
    """One difference as a phrase of a finding's message."""
    if difference.get("hidden"):
        return "%s differs (not shown: env values can be secrets)" % difference["field"]
    return "%s live %s, chart %s" % (difference["field"], _show(difference["live"]), _show(difference["rendered"]))
