# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one retry policy of the collection: what may be tried again (an API server that restarts,
fails over or sheds load), how long to back off (capped exponential, with jitter, never past the
deadline), and a record of the outages ridden out, for the task's warnings.

Only the deadline, or an error that cannot heal (401, 403, 404, 409, 422, ...), ends a retry. A
write is tried again only when it cannot have been applied (the connection was refused, or the
server answered 429 or 503 without processing it); every write of this collection that changes
an object carries its resourceVersion, so a retried update cannot overwrite a newer one."""

from __future__ import annotations

import random
import time

READS = ("get", "list", "watch", "discover", "read")
# 500/502/504 may come after a write was applied; a read is always safe to repeat.
READ_STATUSES = (429, 500, 502, 503, 504)
WRITE_STATUSES = (429, 503)
CAP_SECONDS = 5.0
# A kube-apiserver that has just started answers 401 and 403 until its authenticator and RBAC
# caches have synced (seen for seconds after each restart of the lab's): right after an outage
# these are retried for this long; at any other time they end the task at once. So is the router's
# plain-text 404 it answers for custom resources until it serves their CRDs (``route_missing``).
AUTH_SETTLE_SECONDS = 30.0
AUTH_STATUSES = (401, 403)


def is_read(verb):
    return (verb or "").split()[0] in READS


def retriable(verb, status=None, unreachable=False, refused=False, just_back=False,
              route_missing=False):
    """Whether a failed request may be sent again. ``just_back``: the API server could not be
    reached moments ago (a refused 401/403, or a 404 from its router - ``route_missing`` - was
    not applied, so a write may be sent again too)."""
    if unreachable:
        return is_read(verb) or refused
    if status in AUTH_STATUSES or (status == 404 and route_missing):
        return just_back
    return status in (READ_STATUSES if is_read(verb) else WRITE_STATUSES)


class Backoff:
    """Capped exponential backoff with full jitter: 0.5 s, 1 s, 2 s, ... up to ``cap``."""

    def __init__(self, base=0.5, cap=CAP_SECONDS, rand=random.random):
        self.base, self.cap, self.rand, self.attempt = base, cap, rand, 0

    def next(self):
        ceiling = min(self.cap, self.base * (2 ** self.attempt))
        self.attempt += 1
        return ceiling * (0.5 + 0.5 * self.rand())

    def reset(self):
        self.attempt = 0


# A read the API server answers only after this long was waiting for its storage (etcd away: a
# list waits until etcd is back, measured 17 s of a 20 s outage on the lab) or an overload.
SLOW_READ_SECONDS = 5.0


class Outages:
    """The stretches of time during which the API server could not be used, as seen by retries,
    and the reads it answered only after SLOW_READ_SECONDS."""

    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.spans = []   # [started, ended, failures, last error]
        self.slow = []    # [seconds, what was read]
        self._open = None
        self._last_unreachable = None

    def answered(self, seconds, what):
        """A read answered after ``seconds``; kept when it is slow."""
        if seconds >= SLOW_READ_SECONDS:
            self.slow.append([seconds, what])

    def failed(self, error, unreachable=False):
        """One failed request; ``unreachable``: it got no answer (a typed error says so itself)."""
        now = self.clock()
        if unreachable or (getattr(error, "details", None) or {}).get("unreachable"):
            self._last_unreachable = now
        if self._open is None:
            self._open = [now, now, 0, ""]
        self._open[1] = now
        self._open[2] += 1
        self._open[3] = str(error)

    def just_back(self):
        """The API server could not be reached less than AUTH_SETTLE_SECONDS ago."""
        return self._last_unreachable is not None and \
            self.clock() - self._last_unreachable < AUTH_SETTLE_SECONDS

    def recovered(self):
        if self._open is not None:
            self._open[1] = self.clock()
            self.spans.append(self._open)
            self._open = None

    def warnings(self):
        out = []
        for started, ended, failures, error in self.spans + ([self._open] if self._open else []):
            out.append("the API server could not be used for %.0fs (%d failed requests, retried; "
                       "last: %s)" % (max(0.0, ended - started), failures, error))
        if self.slow:
            seconds, what = max(self.slow)
            out.append("the API server kept %d read%s waiting for %.0fs in all, the longest %.0fs (%s): its "
                       "storage, etcd, was away or it was overloaded" % (
                           len(self.slow), "" if len(self.slow) == 1 else "s", sum(s for s, _w in self.slow),
                           seconds, what))
        return out


def pause(deadline, backoff):
    """Sleep the next backoff step, never past the deadline; False when the deadline is gone."""
    if deadline is None or deadline.expired():
        return False
    time.sleep(min(backoff.next(), deadline.remaining()))
    return not deadline.expired()
