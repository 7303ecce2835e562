# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Deadlines: a relative timeout and an absolute end (such as a maintenance window's) in one,
measured on the monotonic clock so that a wall-clock jump cannot stretch or cut a wait."""

from __future__ import annotations

import datetime
import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput


def parse_time(value, what=None):
    """An aware datetime from an ISO 8601 string (``Z`` accepted) or a datetime; naive means UTC.
    ``what``: the option a refusal names."""
    if isinstance(value, datetime.datetime):
        parsed = value
    else:
        text = str(value).strip()
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInput("%s%r is not an ISO 8601 time such as 2026-11-30T03:00:00Z" % (
                "%s: " % what if what else "", value))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=datetime.timezone.utc)
    return parsed


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc)


def micro_time(instant):
    """Kubernetes MicroTime text: RFC 3339 in UTC with six fractional digits (also the form of
    every time the collection writes into a result, report or snapshot)."""
    return instant.astimezone(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def refuse_passed(deadline, given):
    """A ``deadline`` option (``given``) that has passed before a task starts: refused before any
    write."""
    if given and deadline.expired():
        raise InvalidInput("deadline %s has already passed" % given)


class Deadline:
    """The earlier of ``now + timeout`` and ``end`` (an absolute time); None for either means unset.
    ``options``: the names of the task options the two come from, for a refusal to name."""

    def __init__(self, timeout=None, end=None, now=None, clock=time.monotonic, options=("timeout", "deadline")):
        self._clock = clock
        start = clock()
        wall_now = now or utcnow()
        candidates = []
        if timeout is not None:
            if timeout < 0:
                raise InvalidInput("%s: a timeout cannot be negative (%s)" % (options[0], timeout))
            candidates.append((start + float(timeout), "timeout of %ss" % timeout))
        if end is not None:
            end_at = parse_time(end, options[1])
            candidates.append((start + (end_at - wall_now).total_seconds(),
                               "deadline %s" % end_at.isoformat()))
        if candidates:
            self._at, self.reason = min(candidates)
        else:
            self._at, self.reason = None, "no deadline"

    @property
    def bounded(self):
        return self._at is not None

    def remaining(self):
        if self._at is None:
            return float("inf")
        return max(0.0, self._at - self._clock())

    def expired(self):
        return self.remaining() <= 0
