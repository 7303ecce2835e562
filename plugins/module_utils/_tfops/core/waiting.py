# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Watch-based waiting: list once, then follow a watch from that list's resourceVersion, re-listing
when the watch expires (410 Gone) or the server ends it; every wait is bounded by a Deadline and a
timeout says what is stuck and why."""

from __future__ import annotations

import json
import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import retry
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    InvalidInput,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import (
    api_error,
    list_versioned,
    may_resend,
    unreachable,
)

try:
    from kubernetes import watch as _watch
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic.exceptions import DynamicApiError
    from urllib3.exceptions import HTTPError as _Urllib3Error
    _CONNECTION_ERRORS = (_Urllib3Error, ConnectionError, OSError)
except ImportError:  # reported by require_kubernetes()
    _watch = ApiException = DynamicApiError = None
    _CONNECTION_ERRORS = (ConnectionError, OSError)

# A server-side watch is cut after this long so that a silent connection cannot outlive it.
MAX_WATCH_SECONDS = 60
RESYNC_SECONDS = 300


def _key(obj):
    meta = obj["metadata"]
    return (meta.get("namespace"), meta["name"])


class ObjectWatcher:
    """A live view of the objects of one resource that match a namespace and selectors.

    ``objects`` maps (namespace, name) to the object as a dict. ``events`` counts the changes seen,
    ``requests`` the list and watch calls made (for the benchmarks' API-load figures).
    """

    def __init__(self, kube, resource, namespace=None, label_selector=None, field_selector=None,
                 name=None, cached_list=False):
        self.kube = kube
        self.cached_list = cached_list  # list from the watch cache (see list_versioned)
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        if name:
            self.field_selector = "metadata.name=%s" % name
        self.objects = {}
        self.resource_version = None
        self.requests = 0
        self.events = 0
        self._current = None  # the watch being followed (interrupt() ends it)
        self._interrupted = False
        self.desc = "%s%s%s" % (resource.name, " in %s" % namespace if namespace else "",
                                " (%s)" % (self.field_selector or self.label_selector)
                                if (self.field_selector or self.label_selector) else "")

    def relist(self):
        self.requests += 1
        items, self.resource_version = list_versioned(
            self.kube, self.resource, namespace=self.namespace, label_selector=self.label_selector,
            field_selector=self.field_selector, cached=self.cached_list)
        self.objects = dict((_key(o), o) for o in items)

    def _stream(self, seconds):
        """Yield once per change until the server closes the watch after ``seconds``."""
        self.requests += 1
        self._current = _watch.Watch() if _watch is not None else None
        watcher = self.kube.dynamic.watch(
            self.resource, namespace=self.namespace, label_selector=self.label_selector,
            field_selector=self.field_selector, resource_version=self.resource_version,
            timeout=max(1, int(seconds)), watcher=self._current)
        for event in watcher:
            kind = event["type"]
            obj = event["raw_object"]
            if kind == "ERROR":
                if obj.get("code") == 410:  # expired resourceVersion: start again from a list
                    self.resource_version = None
                    return
                raise api_error(_Status(obj), "watch", self.resource.name)
            self.resource_version = obj["metadata"].get("resourceVersion", self.resource_version)
            if kind == "BOOKMARK":
                continue
            self.events += 1
            if kind == "DELETED":
                self.objects.pop(_key(obj), None)
            else:
                self.objects[_key(obj)] = obj
            yield kind

    def interrupt(self):
        """From another thread of the task (a watch beside this wait whose news cannot wait): end
        the watch being followed now, so that ``check`` runs at once. A client whose Watch.stop()
        cannot break off a read ends it at its next event or at the wait's next wakeup."""
        self._interrupted = True
        current = self._current
        if current is not None:
            current.stop()

    def wait(self, check, deadline, on_change=None, wakeup=None):
        """Until ``check(objects)`` returns (True, detail); return that detail.

        ``check`` returns (done, detail): detail says, in a sentence, where things stand; it is
        the message of the timeout when the deadline passes first. ``check`` may also raise a
        typed error to fail fast (a rollout that can never finish, a stall). ``wakeup()`` says
        in how many seconds ``check`` must run again even if nothing changes (stall detection).
        Lists first unless ``start()`` already did (to see every event after a snapshot)."""
        if not deadline.bounded:
            raise InvalidInput("every wait needs a deadline: set wait_timeout or deadline")
        if self.resource_version is None:
            self.relist()
        last_list = time.monotonic()
        backoff = retry.Backoff()
        done, detail = self._check(check, on_change)
        fence = getattr(self.kube, "fence", None)
        while not done:
            # After a 410, and as a periodic resync (it guards against an event lost by a proxy,
            # at a cost that does not grow with events), list again before the next watch; a list
            # that fails in a way that heals is tried again, never skipped for a watch from "now".
            if self.resource_version is None or time.monotonic() - last_list > RESYNC_SECONDS:
                try:
                    self.relist()
                    last_list = time.monotonic()
                except ApiError as exc:
                    if not self.kube.heals("list", exc):
                        raise
                    self._outage(exc, deadline, backoff)
                    self.resource_version = None
                else:
                    done, detail = self._check(check, on_change)
                    if done:
                        break
            if deadline.expired():
                raise WaitTimeout("timed out (%s) waiting for %s: %s" % (
                    deadline.reason, self.desc, detail), waited_for=self.desc, last_state=detail)
            if self.resource_version is None:
                continue
            if fence is not None:
                fence.heartbeat()  # a run that lost its lock, or was killed, stops waiting
            limits = [deadline.remaining(), MAX_WATCH_SECONDS, wakeup() if wakeup else None,
                      fence.seconds_to_next() if fence is not None else None]
            seconds = min(limit for limit in limits if limit is not None)
            try:
                stream = self._stream(seconds)
                try:
                    for _kind in stream:
                        done, detail = self._check(check, on_change)
                        if done or deadline.expired():
                            break
                finally:
                    stream.close()
                backoff.reset()
                self.kube.outages.recovered()
            except (ApiException, DynamicApiError, ApiError) as exc:
                if not self._interrupted:
                    status = getattr(exc, "status", None)
                    if status == 410:  # the resourceVersion expired: start again from a list
                        self.resource_version = None
                    elif self.kube.heals("watch", exc):
                        self._outage(exc, deadline, backoff)  # resumes from the last resourceVersion
                    else:
                        raise exc if isinstance(exc, ApiError) else api_error(exc, "watch", self.resource.name)
            except _CONNECTION_ERRORS as exc:
                # The API server went away (restart, failover): back off, then resume the watch
                # from the last resourceVersion (a 410 then says to list again). A watch that
                # interrupt() broke off is no outage.
                if not self._interrupted:
                    if not may_resend("watch", exc):
                        raise unreachable(self.kube.server, "watch", self.resource.name, exc)
                    self._outage(exc, deadline, backoff, unreachable=True)
            self._interrupted = False
            if not done and self.resource_version is not None and \
                    time.monotonic() - last_list <= RESYNC_SECONDS:
                # No list comes next: check again anyway (a wakeup ends a quiet watch for this).
                done, detail = self._check(check, on_change)
        return detail

    def _outage(self, exc, deadline, backoff, unreachable=False):
        self.kube.outages.failed(exc, unreachable=unreachable)
        retry.pause(deadline, backoff)

    start = relist

    def _check(self, check, on_change):
        done, detail = check(self.objects)
        if on_change:
            on_change(self.objects, detail)
        return done, detail


class _Status:
    """Adapter so that a watch ERROR event reads like an ApiException for api_error()."""

    def __init__(self, status):
        self.status = status.get("code")
        self.reason = status.get("reason")
        # The Status as the API server sends it: api_error() reads its message from the body.
        self.body = json.dumps(status)
        self.message = status.get("message")

    def __str__(self):
        return self.message or str(self.reason)


def sleep_until(deadline, seconds):
    """Pause for a fixed gap (not a wait for state), never past the deadline."""
    time.sleep(max(0.0, min(seconds, deadline.remaining())))
