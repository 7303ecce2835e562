# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who a rollout needs was away while a task waited: the TensorFusion operator (no Ready Pod of
its controller Deployment) or kube-controller-manager (its leader Lease not renewed). A wait that
sees no progress looks every LOOK_SECONDS; what it found is said at the end, with how long, so a
run that waited says why (an API server or etcd that could not be reached is said by the retries,
core/retry.py, and so is a storage, etcd, that keeps reads waiting). The tracking is pure
(clocks injected); the looks are two small reads."""

from __future__ import annotations

import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, parse_time, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError, Forbidden
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages

LOOK_SECONDS = 10.0  # how often a wait without progress looks, and so the shortest absence seen
OPERATOR = "the TensorFusion operator (its controller and the webhook its Pods serve)"
CONTROLLER_MANAGER = "kube-controller-manager"
CM_LEASE = ("kube-system", "kube-controller-manager")
CLOCK_SLACK_SECONDS = 10  # past a Lease's duration before its holder counts as away


class Absences:
    """Since when each one was away, and the spans it was away for (monotonic seconds)."""

    def __init__(self, clock=time.monotonic, wall=utcnow):
        self.clock, self.wall = clock, wall
        self.away = {}  # name -> (since, since as ISO text, why)
        self.spans = []  # (name, from ISO, seconds, why)

    def saw(self, name, present, why=""):
        now = self.clock()
        if not present and name not in self.away:
            self.away[name] = (now, micro_time(self.wall()), why)
        elif present and name in self.away:
            since, at, was = self.away.pop(name)
            self.spans.append((name, at, now - since, was))

    def notes(self):
        """One warning per absence (those still going on too), in the order they began."""
        now = self.clock()
        found = self.spans + [(name, at, now - since, why) for name, (since, at, why) in self.away.items()]
        out = []
        for name, at, seconds, why in sorted(found, key=lambda s: s[1]):
            ongoing = name in self.away and self.away[name][1] == at
            out.append("%s was away for %ds%s while this task waited (from %s): %s" % (
                name, max(seconds, 0), " and still is" if ongoing else "", at, why))
        return out


def operator_present(deployments):
    """(present, why) from the operator's Deployments (raw dicts): a Ready replica is presence."""
    if not deployments:
        return False, "no controller Deployment (label tensor-fusion.ai/component=operator)"
    ready = sum(int((d.get("status") or {}).get("readyReplicas") or 0) for d in deployments)
    return ready > 0, "its controller Deployment %s has no Ready Pod" % ", ".join(
        d["metadata"]["name"] for d in deployments)


def controller_manager_present(lease, now):
    """(present, why) from kube-controller-manager's leader Lease (a raw dict) at ``now`` (aware)."""
    spec = (lease or {}).get("spec") or {}
    renewed = spec.get("renewTime")
    duration = int(spec.get("leaseDurationSeconds") or 15)
    if not renewed:
        return False, "its leader Lease kube-system/kube-controller-manager names no renewal"
    age = (now - parse_time(renewed)).total_seconds()
    # A leader renews every 2 s of its 15; the clocks of this host and the API server's may
    # differ by seconds.
    return age <= duration + CLOCK_SLACK_SECONDS, "its leader Lease was last renewed %ds before (at %s)" % (age, renewed)


class Looker:
    """The two reads, each given up (said once in ``notes``) when the API server refuses it."""

    def __init__(self, kube, namespace, notes):
        self.kube, self.namespace, self.notes = kube, namespace, notes
        self.absences = Absences()
        self.readable = {OPERATOR: True, CONTROLLER_MANAGER: True}
        self.next_look = None

    def look(self, force=False):
        now = time.monotonic()
        if not force and self.next_look is not None and now < self.next_look:
            return
        self.next_look = now + LOOK_SECONDS
        for name, read in ((OPERATOR, self._operator), (CONTROLLER_MANAGER, self._controller_manager)):
            if not self.readable[name]:
                continue
            try:
                present, why = read()
            except Forbidden as exc:
                self.readable[name] = False
                self.notes.append("whether %s is up is not watched while the rollout waits (%s)" % (name, exc.msg))
                continue
            except ApiError:  # the API server or its storage is away: the retries say so (core/retry.py)
                continue
            self.absences.saw(name, present, why)

    def _operator(self):
        deployments = self.kube.resource("Deployment", api_version="apps/v1")
        return operator_present(list(list_pages(self.kube, deployments, namespace=self.namespace,
                                                label_selector="tensor-fusion.ai/component=operator")))

    def _controller_manager(self):
        namespace, name = CM_LEASE
        leases = self.kube.resource("Lease", group="coordination.k8s.io")
        try:
            lease = self.kube.call("get", "leases/%s in %s" % (name, namespace), leases.get,
                                   name=name, namespace=namespace).to_dict()
        except ApiError as exc:
            if exc.status == 404:  # no leader election (a single control plane without it): unknown
                self.readable[CONTROLLER_MANAGER] = False
                return True, ""
            raise
        return controller_manager_present(lease, utcnow())
