# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection asks of an object's dict, said once: is a Pod Ready, is an object live
(not being deleted), which containers wait and why (pure functions)."""

from __future__ import annotations


def condition(obj, kind):
    """The status condition of type ``kind`` (a dict) or None."""
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return cond
    return None


def condition_true(obj, kind):
    return (condition(obj, kind) or {}).get("status") == "True"


def pod_ready(pod):
    """The Pod's Ready condition is True (its containers pass their readiness probes)."""
    return condition_true(pod, "Ready")


def live(obj):
    """Not being deleted: an object with a deletionTimestamp is on its way out, whatever it says."""
    return not (obj.get("metadata") or {}).get("deletionTimestamp")


def live_only(objects):
    return [o for o in objects if live(o)]


def waiting_containers(pod):
    """(container name, reason) of every container of the Pod that waits, in order."""
    return [(c.get("name"), ((c.get("state") or {}).get("waiting") or {}).get("reason"))
            for c in (pod.get("status") or {}).get("containerStatuses") or []
            if (c.get("state") or {}).get("waiting")]
