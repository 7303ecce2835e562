# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""While a pool rolls, the business workloads' Pod templates followed beside the rollout's own
wait: each kind (Deployment, StatefulSet, DaemonSet) listed once, then watched from that list's
resourceVersion in a thread of its own (no polling), every change kept in the pure ChangeLog
(workloads/changes.py). A rollout followed batch by batch (one module call per batch) goes on from
where its previous call stopped: the lists are read as they were at that call's last
resourceVersion, and the watches resume from there, so that nothing between two calls is missed."""

from __future__ import annotations

import threading

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import retry
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError, Forbidden
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import api_error, list_versioned
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import MAX_WATCH_SECONDS
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.changes import KINDS, ChangeLog, describe

try:
    from kubernetes import watch as _watch
except ImportError:  # reported by require_kubernetes()
    _watch = None

# After the gate's pause was asked for, the rollout's wait is nudged this often until it stops.
NUDGE_SECONDS = 1.0
# How long stop() waits for a watch thread to end (they are daemon threads, stopped by a flag and
# a broken-off read; none writes anything).
JOIN_SECONDS = 5.0


class BusinessWatch:
    """The business workloads' Pod templates during a rollout. ``spec``: the gate's settings
    (workloads/changes.check_spec); ``since``: the summary of the rollout's previous call;
    ``on_pause()``: called from a watch thread when gate ``pause`` is reached (the rollout's wait
    interrupts itself), again every NUDGE_SECONDS until ``stop()``."""

    def __init__(self, kube, spec, since=None, on_pause=None):
        self.main_kube = kube
        self.kube = kube.for_thread()
        self.log = ChangeLog(spec, since)
        self.on_pause = on_pause
        self.resources = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._threads = []
        self._watches = {}
        self._versions = {}

    @property
    def spec(self):
        return self.log.spec

    # ---- in the task's thread -------------------------------------------------------------------
    def start(self):
        """List each kind (as it was where the rollout's previous call stopped, if any) and, on a
        rollout's first call, make sure the credentials may watch it - both in the calling thread,
        before the rollout's write, so that a refusal is the caller's to judge (Forbidden) - then
        follow each kind with a watch in a thread."""
        first_call = not self.log.continued
        if not self.log.started:
            self.log.started = micro_time(utcnow())
        for kind in KINDS:
            resource = self.main_kube.resource(kind, api_version="apps/v1")
            self.resources[kind] = resource
            items, version = self._first_list(kind, resource)
            self.log.listed(kind, items, first=True)
            self._versions[kind] = version
            self.log.resource_versions[kind] = version
            if first_call:
                self._probe(kind, resource, version)
        for kind in KINDS:
            thread = threading.Thread(target=self._follow, args=(kind,), name="tfops-business-%s" % kind.lower())
            thread.daemon = True
            thread.start()
            self._threads.append(thread)

    def _first_list(self, kind, resource):
        at = self.log.resource_versions.get(kind)
        if at:
            try:
                return list_versioned(self.main_kube, resource, at=at)
            except ApiError as exc:
                if exc.status != 410:
                    raise
                self.log.unseen.append(
                    "%ss changed between the rollout's previous call and this one were not seen (the API "
                    "server no longer has resourceVersion %s)" % (kind, at))
        return list_versioned(self.main_kube, resource, cached=True)

    def _probe(self, kind, resource, version):
        """A watch request answered at once (its body not read): the permission to watch ``kind``."""
        response = self.main_kube.call(
            "watch", resource.name, self.main_kube.dynamic.request, "GET", resource.path(),
            query_params=[("watch", "true"), ("resourceVersion", version), ("timeoutSeconds", "1")],
            serialize=False)
        for close in ("close", "release_conn"):
            if callable(getattr(response, close, None)):
                getattr(response, close)()

    def stop(self):
        """Stop the watches, then list each kind once more and count what the watches had not
        delivered yet (the summary() after it is what the rollout's next call resumes from)."""
        self._stopped.set()
        # A Watch stopped before its request began forgets it (Watch.stream starts by clearing the
        # flag): a thread still following after a moment is stopped again, its read then cut.
        for _attempt in range(10):
            alive = [t for t in self._threads if t.is_alive()]
            if not alive:
                break
            for watcher in list(self._watches.values()):
                watcher.stop()
            for thread in alive:
                thread.join(JOIN_SECONDS / 10)
        for kind, resource in self.resources.items():
            try:
                items, version = list_versioned(self.main_kube, resource, cached=True)
            except ApiError as exc:  # the books close without it: the next call resumes from the watch
                with self._lock:
                    self.log.unseen.append("the last list of %ss failed: %s" % (kind, exc.msg))
                continue
            with self._lock:
                self.log.listed(kind, items)
                self.log.resource_versions[kind] = version

    def summary(self, ended=None):
        with self._lock:
            return self.log.summary(ended)

    def pause_reached(self):
        """Gate ``pause`` and the changes at its scale: the sentence that says so and names the
        changes, else None."""
        with self._lock:
            if self.spec["gate"] != "pause" or not self.log.reached():
                return None
            return "%s: %s" % (self.log.verdict_text(), describe(self.log.summary()))

    def warning(self, where):
        with self._lock:
            return self.log.warning(where)

    def new_unseen(self):
        """What this call could not see (a list or a watch refused, a gap too old to read again)."""
        with self._lock:
            return ["business workloads: %s" % note for note in self.log.unseen[self.log.unseen_before:]]

    # ---- in the watch threads -------------------------------------------------------------------
    def _follow(self, kind):
        """List (after a 410) and watch ``kind`` until stop(); what fails is tried again after a
        pause (the rollout's own wait judges an outage), a refusal ends the watch with a note."""
        backoff = retry.Backoff()
        resource = self.resources[kind]
        while not self._stopped.is_set():
            try:
                if self._versions.get(kind) is None:
                    items, version = list_versioned(self.kube, resource, cached=True)
                    with self._lock:
                        self.log.listed(kind, items)
                        self.log.resource_versions[kind] = version
                    self._versions[kind] = version
                    self._after_change()
                self._stream(kind, resource)
                backoff.reset()
            except Exception as exc:  # pylint: disable=broad-except
                if self._stopped.is_set():
                    return
                error = exc if isinstance(exc, ApiError) else (
                    api_error(exc, "watch", resource.name) if hasattr(exc, "status") else None)
                if error is not None and error.status == 410:
                    self._versions[kind] = None
                    continue
                if isinstance(error, Forbidden) and not self.kube.outages.just_back():
                    with self._lock:
                        self.log.unseen.append("%ss were not watched to the end: %s" % (kind, error.msg))
                    return
                if error is None or not isinstance(error, Forbidden):
                    self.kube.outages.failed(exc, unreachable=error is None)
                self._stopped.wait(backoff.next())

    def _stream(self, kind, resource):
        watcher = _watch.Watch()
        self._watches[kind] = watcher
        if self._stopped.is_set():
            return
        for event in self.kube.dynamic.watch(resource, resource_version=self._versions[kind],
                                             timeout=MAX_WATCH_SECONDS, watcher=watcher):
            if self._stopped.is_set():
                return
            obj = event["raw_object"]
            if event["type"] == "ERROR":
                if obj.get("code") == 410:
                    self._versions[kind] = None
                    return
                raise ApiError("watch %s failed: %s" % (resource.name, obj.get("message")), status=obj.get("code"))
            version = (obj.get("metadata") or {}).get("resourceVersion")
            if event["type"] != "BOOKMARK":
                with self._lock:
                    if event["type"] == "DELETED":
                        self.log.gone("%s/%s/%s" % (kind, obj["metadata"].get("namespace"), obj["metadata"]["name"]))
                    else:
                        self.log.seen(kind, obj)
                    self.log.resource_versions[kind] = version
            self._versions[kind] = version
            self._after_change()

    def _after_change(self):
        """Gate ``pause`` reached: have the rollout's wait stop (and nudge it until it has)."""
        with self._lock:
            if self.on_pause is None or self.spec["gate"] != "pause" or not self.log.reached():
                return
            on_pause, self.on_pause = self.on_pause, None
        threading.Thread(target=self._nudge, args=(on_pause,), name="tfops-business-pause", daemon=True).start()

    def _nudge(self, on_pause):
        while not self._stopped.is_set():
            on_pause()
            self._stopped.wait(NUDGE_SECONDS)
