# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Business workloads' Pod templates changed during a rollout, as pure functions: which
Deployments, StatefulSets and DaemonSets are business workloads (their Pod template opts in to
TensorFusion), what of a template may be shown (images, resource requests and limits,
TensorFusion's own annotations and labels - never an env value, a command or a volume), what
changed between two versions of it, the book of changes kept over a rollout (also across the
calls of a rollout followed batch by batch), and the gate that warns or pauses the pools when
changes reach the scale a team sets.

A team is asked not to change business workloads' resource requests at scale while components
roll, so that upgrade problems and scheduling problems are not mixed: this is how the collection
notices when someone does."""

from __future__ import annotations

import hashlib
import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_ENABLED
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.values import describe_changes

KINDS = ("Deployment", "StatefulSet", "DaemonSet")
GATES = ("off", "warn", "pause")
# What a template shows by value: TensorFusion's own annotations and labels (its GPU requests
# are annotations: tensor-fusion.ai/tflops-request, vram-request, ...; docs/operator-behaviour.md 6)
# and the restart stamp of ``kubectl rollout restart``. Every other annotation, label, container
# field (env, command, volume mounts, probes) and Pod spec field is named only when it changes.
SHOWN_PREFIXES = ("tensor-fusion.ai/",)
SHOWN_KEYS = ("kubectl.kubernetes.io/restartedAt",)
CONTAINER_GROUPS = ("initContainers", "containers", "ephemeralContainers")
# At most this many fields of one workload are recorded (the count of its writes is kept).
MAX_FIELDS = 20
# Workloads named in one message (the result and the report list them all).
MAX_NAMED = 5


class Hidden:
    """A value that is compared, never shown: its digest, held in memory only."""

    __slots__ = ("digest",)

    def __init__(self, value):
        self.digest = hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode("utf-8")).hexdigest()

    def __eq__(self, other):
        return isinstance(other, Hidden) and other.digest == self.digest

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash(self.digest)


def template_of(obj):
    return ((obj or {}).get("spec") or {}).get("template") or {}


def is_business(obj):
    """A business workload: its Pod template opts in to TensorFusion (label tensor-fusion.ai/enabled)."""
    return ((template_of(obj).get("metadata") or {}).get("labels") or {}).get(TF_ENABLED) == "true"


def _shown_key(key):
    return key.startswith(SHOWN_PREFIXES) or key in SHOWN_KEYS


def _resources(view, base, resources):
    for kind, items in sorted((resources or {}).items()):
        if kind in ("requests", "limits") and isinstance(items, dict):
            for name, quantity in sorted(items.items()):
                view["%s.resources.%s.%s" % (base, kind, name)] = str(quantity)
        else:  # claims, ...
            view["%s.resources.%s" % (base, kind)] = Hidden(items)


def template_view(obj):
    """{field: value} of a workload's Pod template, a path per field (``spec.containers[app].
    resources.requests.cpu``); values that may be shown as they are, all others as ``Hidden``."""
    template = template_of(obj)
    meta, spec = template.get("metadata") or {}, template.get("spec") or {}
    view = {}
    for part in ("labels", "annotations"):
        for key, value in sorted((meta.get(part) or {}).items()):
            view["metadata.%s[%s]" % (part, key)] = value if _shown_key(key) else Hidden(value)
    for group in CONTAINER_GROUPS:
        for container in spec.get(group) or []:
            base = "spec.%s[%s]" % (group, container.get("name"))
            view[base + ".image"] = container.get("image")
            _resources(view, base, container.get("resources"))
            for key, value in sorted(container.items()):
                if key not in ("name", "image", "resources"):
                    view["%s.%s" % (base, key)] = Hidden(value)
    for key, value in sorted(spec.items()):
        if key == "resources":  # Pod-level requests and limits
            _resources(view, "spec", value)
        elif key not in CONTAINER_GROUPS:
            view["spec.%s" % key] = Hidden(value)
    return view


def view_diff(before, after):
    """What differs from ``before`` to ``after`` (views; None: no workload), field by field, as
    plans say it: {field, from, to} (None: unset) or {field, hidden: true}. A workload that appears
    shows only what may be shown of it."""
    before, after = before or {}, after or {}
    out = []
    for field in sorted(set(before) | set(after)):
        old, new = before.get(field), after.get(field)
        if old == new:
            continue
        if isinstance(old, Hidden) or isinstance(new, Hidden):
            if before:
                out.append({"field": field, "hidden": True})
        else:
            out.append({"field": field, "from": old, "to": new})
    return out


def merge_fields(recorded, newer):
    """The fields of a workload's changes so far with those of a later write: a field keeps its
    first ``from`` and takes the later ``to``; one back at its first value is dropped (a hidden
    one cannot be told, it stays)."""
    by_field = dict((item["field"], dict(item)) for item in recorded or [])
    for item in newer:
        known = by_field.get(item["field"])
        if known is None:
            by_field[item["field"]] = dict(item)
        elif not known.get("hidden") and not item.get("hidden"):
            known["to"] = item.get("to")
            if known.get("from") == known["to"]:
                del by_field[item["field"]]
        else:
            by_field[item["field"]] = {"field": item["field"], "hidden": True}
    return [by_field[f] for f in sorted(by_field)][:MAX_FIELDS]


def workload_key(kind, obj):
    meta = obj.get("metadata") or {}
    return "%s/%s/%s" % (kind, meta.get("namespace"), meta.get("name"))


# ---- the gate ----------------------------------------------------------------------------------
def check_spec(spec, option="business_changes", names=None):
    """The gate's settings ({gate, workloads, percent}, None values left out), or InvalidInput
    naming ``option`` (``names``: {key: the name to say instead of ``option.key``}, as a runbook's
    variables). Neither a count nor a share given: the gate acts on the first change."""
    def name(key):
        return (names or {}).get(key) or "%s.%s" % (option, key)
    spec = dict((k, v) for k, v in (spec or {}).items() if v is not None and k != "since")
    gate = spec.get("gate", "warn")
    if gate not in GATES:
        raise InvalidInput("%s: %r is not one of %s" % (name("gate"), gate, ", ".join(GATES)))
    for key, low, high in (("workloads", 1, None), ("percent", 1, 100)):
        value = spec.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < low or (high and value > high):
            raise InvalidInput("%s: %r is not a whole number %s" % (
                name(key), value, "%d-%d" % (low, high) if high else "of %d or more" % low))
    return {"gate": gate, "workloads": spec.get("workloads"), "percent": spec.get("percent")}


def threshold_text(spec):
    workloads = spec.get("workloads")
    if workloads is None and spec.get("percent") is None:
        workloads = 1
    parts = (["%d workload%s" % (workloads, "" if workloads == 1 else "s")] if workloads is not None else []) + \
        (["%d%% of them" % spec["percent"]] if spec.get("percent") is not None else [])
    return " or ".join(parts)


def gate_reached(spec, changed, total):
    """Whether ``changed`` business workloads out of ``total`` reach the gate's scale: at least
    ``workloads`` of them, or at least ``percent`` % (neither set: the first change)."""
    workloads, percent = spec.get("workloads"), spec.get("percent")
    if workloads is None and percent is None:
        workloads = 1
    if workloads is not None and changed >= workloads:
        return True
    return percent is not None and changed > 0 and changed * 100 >= percent * max(total, 1)


def share(changed, total):
    return int(round(100.0 * changed / max(total, 1)))


def describe_entry(entry):
    """``Deployment shop/api: spec.containers[app].resources.requests.cpu 100m -> 2``."""
    kind, namespace, name = entry["kind"], entry["namespace"], entry["name"]
    what = {"created": "created", "deleted": "deleted", "recreated": "deleted and created again"}.get(entry["change"])
    fields = describe_changes(entry.get("fields") or [])
    if what:
        text = what + (" (%s)" % fields if fields else "")
    else:
        text = fields or "changed and changed back (%d template writes)" % entry.get("writes", 0)
    return "%s %s/%s: %s" % (kind, namespace, name, text)


def describe(summary, limit=MAX_NAMED):
    """The changes of a summary in a sentence: the first ``limit`` workloads, and how many more."""
    entries = summary.get("changes") or []
    named = "; ".join(describe_entry(e) for e in entries[:limit])
    more = len(entries) - limit
    return named + ("; and %d more" % more if more > 0 else "")


# ---- the book of a rollout ---------------------------------------------------------------------
class ChangeLog:
    """The business workloads' Pod templates over a rollout: their views as last seen, and the
    changes recorded since the rollout began. Pure: the caller feeds it what it lists and watches
    (workloads/business.py) and the time. ``since``: the summary of the rollout's previous call,
    whose changes go on counting (and whose list resourceVersions it resumes from)."""

    def __init__(self, spec, since=None):
        self.spec = spec
        since = since or {}
        self.started = since.get("started")
        self.total = int(since.get("business_workloads") or 0)
        self.resource_versions = dict(since.get("resource_versions") or {})
        self.entries = dict((workload_key(e["kind"], {"metadata": e}), dict(e)) for e in since.get("changes") or [])
        self.warned = int(since.get("warned") or 0)
        self.unseen = list(since.get("unseen") or [])
        self.unseen_before = len(self.unseen)  # the notes of the rollout's earlier calls
        self.views = {}
        self.continued = bool(since)

    # the lists and events the caller feeds in
    def listed(self, kind, objects, first=False):
        """A complete list of ``kind``: the views it gives; compared with the views known before
        (after a watch broke off) unless ``first`` (the start of a call: its baseline)."""
        found = {}
        for obj in objects:
            if is_business(obj):
                found[workload_key(kind, obj)] = (obj, template_view(obj))
        if first:
            for key, (_obj, view) in found.items():
                self.views[key] = view
            if not self.continued:
                self.total += len(found)
            return []
        events = []
        for key in sorted(set(self.views) | set(found)):
            if key.split("/", 1)[0] != kind:
                continue
            if key in found:
                events += self.seen(kind, found[key][0])
            else:
                events += self.gone(key)
        return events

    def seen(self, kind, obj):
        """An added or modified workload; returns the entries it changed (empty: no template change)."""
        key = workload_key(kind, obj)
        before = self.views.get(key)
        if not is_business(obj):
            if before is None:
                return []
            view = template_view(obj)  # it left TensorFusion: the label's removal shows
            del self.views[key]
            return [self._record(key, obj, "changed", view_diff(before, view))]
        view = template_view(obj)
        self.views[key] = view
        if before is None:
            self.total += 1
            return [self._record(key, obj, "created", view_diff(None, view))]
        fields = view_diff(before, view)
        return [self._record(key, obj, "changed", fields)] if fields else []

    def gone(self, key):
        if self.views.pop(key, None) is None:
            return []
        kind, namespace, name = key.split("/", 2)
        return [self._record(key, {"metadata": {"namespace": namespace, "name": name}}, "deleted", [])]

    def _record(self, key, obj, change, fields):
        kind = key.split("/", 1)[0]
        meta = obj.get("metadata") or {}
        entry = self.entries.get(key)
        if entry is None:
            entry = {"kind": kind, "namespace": meta.get("namespace"), "name": meta.get("name"),
                     "change": change, "writes": 0, "fields": []}
            self.entries[key] = entry
        else:
            entry["change"] = _combined(entry["change"], change)
        entry["writes"] += 1
        entry["fields"] = merge_fields(entry["fields"], fields)
        return entry

    # what the caller reports
    @property
    def changed(self):
        return len(self.entries)

    def reached(self):
        return gate_reached(self.spec, self.changed, self.total)

    def verdict_text(self):
        return "%d of %d business workload%s (%d%%) changed their Pod template during the rollout, " \
               "at or above the gate's %s" % (
                   self.changed, self.total, "" if self.total == 1 else "s", share(self.changed, self.total),
                   threshold_text(self.spec))

    def warning(self, where):
        """The warning of gate ``warn`` when the changes reach its scale and have grown since the
        last warning of the rollout (None otherwise); notes that it was given."""
        if self.spec["gate"] != "warn" or not self.reached() or self.changed <= self.warned:
            return None
        self.warned = self.changed
        return "%s %s: %s" % (self.verdict_text(), where, describe(self.summary()))

    def summary(self, ended=None):
        """The result's ``business_changes`` (and what the rollout's next call resumes from)."""
        entries = [self.entries[k] for k in sorted(self.entries)]
        return {"gate": self.spec["gate"], "workloads": self.spec.get("workloads"), "percent": self.spec.get("percent"),
                "started": self.started, "ended": ended, "business_workloads": self.total,
                "changed": len(entries), "share": share(len(entries), self.total), "reached": self.reached(),
                "warned": self.warned, "changes": [dict(e, fields=list(e["fields"])) for e in entries],
                "unseen": list(self.unseen), "resource_versions": dict(self.resource_versions)}


def _combined(first, later):
    """One word for a workload's changes over the rollout."""
    if later == "deleted":
        return "deleted"
    if first == "deleted":
        return "recreated"
    if first in ("created", "recreated"):
        return first
    return later
