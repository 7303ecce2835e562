# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run's report kept in the cluster: one ConfigMap per run in the release namespace, so it
outlives the machine (an AWX execution environment) that ran the runbook.

The decisions are pure functions (the ConfigMap's name and labels, what fits under the object
size limit, which old reports go); ``store_in_cluster`` does the few requests. The ConfigMap holds
the record the run_report module built, which copies only named fields - never a Secret value."""

from __future__ import annotations

import base64
import datetime
import gzip
import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import MANAGED_BY, selector_terms
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError, InvalidInput

REPORT_OF = "tensorfusion.ops/report-of"
RUN_STARTED = "tensorfusion.ops/run-started"
RUN_ID = "tensorfusion.ops/run-id"
CONTENT = "tensorfusion.ops/report-content"
# On the report of a run that took a restore point: whether the run then changed the cluster
# (label, "true"/"false") and when that restore point was captured (annotation). A rollback
# without a chosen snapshot skips the restore points of runs that changed nothing.
RUN_CHANGED = "tensorfusion.ops/run-changed"
RESTORE_POINT_CAPTURED = "tensorfusion.ops/restore-point-captured"
# etcd refuses objects over 1.5 MiB and the API server ConfigMaps over 1 MiB of data; the budget
# leaves room for the metadata and the JSON framing of the keys.
DATA_BUDGET = 1000 * 1000
NAME_PREFIX = "tfops-report-"
MAX_NAME = 253  # a ConfigMap's name is a DNS subdomain
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)$")


def _dns_part(text):
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", str(text).lower())).strip("-") or "x"


def configmap_name(playbook, host, started, run_id=None):
    """``tfops-report-<runbook>-<host>-<UTC time of the run's start>[-<run id>]``, a valid DNS
    subdomain. Every report write of one run (before and after the lock's release) names the same
    one; the run's token (``run_id``) keeps apart two runs started in the same second."""
    stamp = parse_time(started).astimezone(datetime.timezone.utc).strftime("%Y%m%dt%H%M%Sz")
    if run_id:
        stamp += "-" + _dns_part(run_id)
    head = NAME_PREFIX + _dns_part(playbook) + "-"
    room = MAX_NAME - len(head) - len(stamp) - 1
    return "%s%s-%s" % (head, _dns_part(host)[:room].strip("-") or "x", stamp)


def report_labels(playbook):
    if not _LABEL_VALUE.match(playbook or ""):
        raise InvalidInput("playbook %r cannot label a report ConfigMap: up to 63 letters, digits, "
                           "'-', '_' or '.', beginning and ending with a letter or digit" % (playbook,))
    return dict(MANAGED_BY, **{REPORT_OF: playbook})


def label_selector(playbook):
    return ",".join(selector_terms(report_labels(playbook)))


def _gzip64(text):
    # mtime=0: the same report gives the same bytes
    return base64.b64encode(gzip.compress(text.encode("utf-8"), mtime=0)).decode("ascii")


def _size(data, binary):
    return sum(len(k) + len(v) for part in (data, binary) for k, v in part.items())


def payload(files, budget=DATA_BUDGET):
    """What the ConfigMap holds of ``files`` ({name: text}: report.json, report.md, report.html)
    under ``budget`` bytes: every file as text when it fits; else gzip-compressed in binaryData
    (``<name>.gz``); else without the HTML page (rendered again from report.json when needed).
    Returns (data, binary_data, content, dropped) - ``content`` one of V(plain), V(gzip),
    V(gzip-without-html) - or raises InvalidInput when not even the compressed JSON fits."""
    plain = dict(files)
    if _size(plain, {}) <= budget:
        return plain, {}, "plain", []
    packed = dict((name + ".gz", _gzip64(text)) for name, text in files.items())
    if _size({}, packed) <= budget:
        return {}, packed, "gzip", []
    slim = dict((k, v) for k, v in packed.items() if k != "report.html.gz")
    if _size({}, slim) <= budget:
        return {}, slim, "gzip-without-html", ["report.html"]
    raise InvalidInput("the report is too large for a ConfigMap: %d bytes compressed, over %d" % (
        _size({}, {"report.json.gz": packed["report.json.gz"]}), budget))


def configmap_body(namespace, name, playbook, started, files, budget=DATA_BUDGET, run_id=None,
                   restore_point=None):
    """The ConfigMap of a run's report, and how its content was packed (see payload).
    ``restore_point``: (when the run's restore point was captured, whether the run changed the
    cluster), for a run that took one."""
    data, binary, content, dropped = payload(files, budget)
    annotations = {RUN_STARTED: started, CONTENT: content}
    labels = report_labels(playbook)
    if run_id:
        annotations[RUN_ID] = run_id
    if dropped:
        annotations["tensorfusion.ops/report-dropped"] = ",".join(dropped)
    if restore_point and restore_point[0]:
        annotations[RESTORE_POINT_CAPTURED] = restore_point[0]
        labels[RUN_CHANGED] = "true" if restore_point[1] else "false"
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels,
                         "annotations": annotations}}
    if data:
        body["data"] = data
    if binary:
        body["binaryData"] = binary
    return body, content, dropped


def _age_key(meta):
    annotations = meta.get("annotations") or {}
    return (annotations.get(RUN_STARTED) or meta.get("creationTimestamp") or "", meta.get("name") or "")


def to_prune(items, keep, current):
    """Names of the reports beyond the newest ``keep`` (newest by the run's start, then name),
    from the metadata of one runbook's report ConfigMaps; ``current`` (this run's) is never one."""
    metas = sorted((i.get("metadata") or {} for i in items), key=_age_key, reverse=True)
    names = [m.get("name") for m in metas if m.get("name")]
    kept = [n for n in names if n == current] + [n for n in names if n != current][:max(0, keep - 1)]
    return [n for n in names if n not in kept]


def reference(namespace, name):
    return "configmap://%s/%s" % (namespace, name)


def same_run(existing, started, run_id):
    """Whether an existing report ConfigMap is this run's own earlier write (the report before the
    lock's release), which this one replaces; another run's report is never overwritten."""
    annotations = (existing.get("metadata") or {}).get("annotations") or {}
    return annotations.get(RUN_ID) == (run_id or None) and annotations.get(RUN_STARTED) == started


def unchanged_restore_points(items):
    """When the restore points of runs that changed nothing were captured, from the metadata of
    report ConfigMaps (those labelled RUN_CHANGED=false). Pure."""
    found = set()
    for item in items:
        meta = item.get("metadata") or {}
        if (meta.get("labels") or {}).get(RUN_CHANGED) == "false":
            captured = (meta.get("annotations") or {}).get(RESTORE_POINT_CAPTURED)
            if captured:
                found.add(captured)
    return found


def read_unchanged_restore_points(kube, namespace):
    """unchanged_restore_points of the reports kept in ``namespace`` (one list, metadata only)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages

    configmaps = kube.resource("ConfigMap", api_version="v1")
    return unchanged_restore_points(list_pages(
        kube, configmaps, namespace=namespace, metadata_only=True,
        label_selector=",".join(selector_terms(dict(MANAGED_BY, **{RUN_CHANGED: "false"})))))


def store_in_cluster(kube, namespace, playbook, started, host, files, keep, run_id=None, restore_point=None,
                     replace=True):
    """Create this run's report ConfigMap (replace it when the run wrote it before: the report
    before the lock's release), then delete this runbook's reports beyond ``keep``. Without
    ``replace`` (the record of a run that did not finish) a report the run wrote itself stays."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages

    name = configmap_name(playbook, host, started, run_id)
    body, content, dropped = configmap_body(namespace, name, playbook, started, files, run_id=run_id,
                                            restore_point=restore_point)
    configmaps = kube.resource("ConfigMap", api_version="v1")
    desc = "configmaps/%s in %s" % (name, namespace)
    pruned = []
    try:
        kube.call("create", desc, configmaps.create, body=body, namespace=namespace)
        created = True
    except ApiError as exc:
        if exc.status != 409:
            raise
        existing = kube.call("get", desc, configmaps.get, name=name, namespace=namespace).to_dict()
        if not same_run(existing, started, run_id):
            raise ApiError("configmaps/%s in %s holds the report of another run (started %s, run %s); "
                           "not overwritten" % (name, namespace, ((existing.get("metadata") or {}).get(
                               "annotations") or {}).get(RUN_STARTED),
                               ((existing.get("metadata") or {}).get("annotations") or {}).get(RUN_ID)),
                           status=409, verb="update", resource=desc)
        if not replace:
            return {"ref": reference(namespace, name), "namespace": namespace, "name": name, "created": False,
                    "kept": True, "content": None, "dropped": [], "pruned": []}
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        kube.call("update", desc, configmaps.replace, body=body, namespace=namespace)
        created = False
    if created:
        items = list_pages(kube, configmaps, namespace=namespace, label_selector=label_selector(playbook),
                           metadata_only=True)
        for old in to_prune(items, keep, name):
            try:
                kube.call("delete", "configmaps/%s in %s" % (old, namespace), configmaps.delete,
                          name=old, namespace=namespace)
            except ApiError as exc:
                if exc.status != 404:  # another run pruned it first
                    raise
            pruned.append(old)
    return {"ref": reference(namespace, name), "namespace": namespace, "name": name, "created": created,
            "content": content, "dropped": dropped, "pruned": pruned}
