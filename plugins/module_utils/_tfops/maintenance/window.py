# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Maintenance windows as pure functions: Go durations, cron schedules in a time zone, and where
an instant stands relative to the windows they open.

A cron window opens at each fire time of its expression, read on the wall clock of its time zone,
and lasts a duration of elapsed time. Daylight-saving changes follow cron's own rule (Vixie cron,
cronie): a wall-clock time that the clock skips opens the window at the moment of the jump, and a
wall-clock time that occurs twice opens it once, at its first occurrence. Windows that overlap or
touch merge into one. Everything here is UTC inside; only cron matching uses the local wall clock.
"""

from __future__ import annotations

import datetime
import math
import heapq
import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.tfcluster import pool_index
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import durations
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    MissingDependency,
    OutsideWindow,
)

try:
    from croniter import croniter, CroniterBadDateError
    HAS_CRONITER = True
    CRONITER_IMPORT_ERROR = None
except ImportError as exc:  # reported by require_croniter() from main()
    HAS_CRONITER = False
    CRONITER_IMPORT_ERROR = exc

try:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError
    HAS_ZONEINFO = True
except ImportError:  # Python < 3.9; reported by get_zone()
    HAS_ZONEINFO = False

UTC = datetime.timezone.utc
ZERO = datetime.timedelta(0)
# Overlapping windows merge; a schedule that never closes is followed this far and no further.
MERGE_HORIZON = datetime.timedelta(days=7)
MAX_FIRES = 20000
# robfig/cron (the Go library the operator's ecosystem uses) accepts these, croniter too.
DESCRIPTORS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")


def require_croniter():
    if not HAS_CRONITER:
        raise MissingDependency(
            "the Python library 'croniter' is required on the host that runs this module for cron "
            "windows (pip install -r requirements.txt of tensorfusion.ops): %s" % CRONITER_IMPORT_ERROR)


# --- durations ---------------------------------------------------------------------------------

MAX_DURATION_SECONDS = 366 * 24 * 3600  # a window, a margin: never more than a year


def parse_duration(value, what="duration"):
    """A timedelta from a Go duration (``10m``, ``1h30m``, ``1.5h``, ``90s``) or a number of seconds.

    Go's own syntax is what the GPUPool's ``maxDuration`` holds; days are not part of it (use ``24h``)."""
    if isinstance(value, datetime.timedelta):
        return value
    if isinstance(value, bool) or value is None:
        raise InvalidInput("%s: %r is not a duration such as 4h, 90m or 1h30m" % (what, value))
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        text = str(value).strip()
        if re.match(r"^[0-9]+(\.[0-9]+)?$", text):
            seconds = float(text)
        else:
            seconds = _go_duration_seconds(text, what)
    if not math.isfinite(seconds) or seconds > MAX_DURATION_SECONDS:
        raise InvalidInput("%s: %r is not a duration such as 4h, 90m or 1h30m (at most a year)" % (what, value))
    if seconds < 0:
        raise InvalidInput("%s: %r is negative" % (what, value))
    return datetime.timedelta(seconds=seconds)


def _go_duration_seconds(text, what):
    return durations.go_duration_seconds(text, what)


def format_duration(delta):
    """``2h5m0s``-style text (Go's String()) for a non-negative timedelta, whole seconds."""
    total = int(delta.total_seconds())
    sign = "-" if total < 0 else ""
    total = abs(total)
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    if hours:
        return "%s%dh%dm%ds" % (sign, hours, minutes, seconds)
    if minutes:
        return "%s%dm%ds" % (sign, minutes, seconds)
    return "%s%ds" % (sign, seconds)


# --- time zones and instants -----------------------------------------------------------------

def get_zone(name):
    """A tzinfo for an IANA name (``Europe/Berlin``); ``UTC`` always works."""
    if name in (None, "", "UTC", "Etc/UTC", "Z"):
        return UTC
    if not HAS_ZONEINFO:
        raise MissingDependency("time zones other than UTC need Python 3.9 or later (zoneinfo)")
    try:
        return ZoneInfo(str(name))
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidInput("unknown time zone %r: give an IANA name such as Europe/Berlin or "
                           "Asia/Shanghai (the host needs the tz database)" % (name,))


def zone_name(tz):
    return "UTC" if tz is UTC else str(getattr(tz, "key", tz))


def _exists(naive, aware):
    return aware.astimezone(UTC).astimezone(aware.tzinfo).replace(tzinfo=None) == naive


def local_to_utc(naive, tz):
    """The instant at which the wall clock of ``tz`` shows ``naive``, the way cron reads it.

    Shown twice (clocks go back): the first time. Never shown (clocks jump forward): the instant
    of the jump, so that a window due in the skipped hour opens right after it, as cron does."""
    if tz is UTC:
        return naive.replace(tzinfo=UTC)
    first = naive.replace(tzinfo=tz, fold=0)
    if _exists(naive, first):
        second = naive.replace(tzinfo=tz, fold=1)
        return min(first.astimezone(UTC), second.astimezone(UTC))
    # In a gap: the jump lies between the two readings; find it to the second.
    low, high = sorted((first.astimezone(UTC), naive.replace(tzinfo=tz, fold=1).astimezone(UTC)))
    before = low.astimezone(tz).utcoffset()
    while high - low > datetime.timedelta(seconds=1):
        mid = low + (high - low) / 2
        if mid.astimezone(tz).utcoffset() == before:
            low = mid
        else:
            high = mid
    high = high.replace(microsecond=0)
    return high if high.astimezone(tz).utcoffset() != before else high + datetime.timedelta(seconds=1)


def utc_to_local(instant, tz):
    """The wall-clock reading (naive) of ``tz`` at an aware instant."""
    return instant.astimezone(tz).replace(tzinfo=None)


def parse_instant(value, tz=UTC, what="time"):
    """An aware UTC datetime from ISO 8601 text; a time without an offset is read in ``tz``."""
    if isinstance(value, datetime.datetime):
        parsed = value
    else:
        text = str(value).strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            parsed = datetime.datetime.fromisoformat(text)
        except ValueError:
            raise InvalidInput("%s: %r is not an ISO 8601 time such as 2026-11-30T02:00:00Z or "
                               "2026-11-30T02:00:00+01:00" % (what, value))
    if parsed.tzinfo is None:
        return local_to_utc(parsed, tz)
    return parsed.astimezone(UTC)


def iso(instant):
    """ISO 8601 in UTC with a ``Z``, as every result of the collection gives times."""
    if instant is None:
        return None
    instant = instant.astimezone(UTC)
    spec = "microseconds" if instant.microsecond else "seconds"
    return instant.replace(tzinfo=None).isoformat(timespec=spec) + "Z"


def local_text(instant, tz):
    """``2026-11-30 02:00 CET`` for messages that people read."""
    if instant is None:
        return None
    local = instant.astimezone(tz)
    fmt = "%Y-%m-%d %H:%M:%S" if local.second else "%Y-%m-%d %H:%M"
    return "%s %s" % (local.strftime(fmt), local.tzname() or zone_name(tz))


# --- cron schedules --------------------------------------------------------------------------

class CronSchedule:
    """One cron expression read in one time zone. ``CRON_TZ=<zone>`` or ``TZ=<zone>`` before the
    fields (robfig/cron's syntax, which Go tools write) picks the zone for that expression."""

    def __init__(self, expression, default_tz=UTC):
        require_croniter()
        text = " ".join(str(expression).split())
        self.source = text
        tz = default_tz
        match = re.match(r"^(CRON_TZ|TZ)=(\S+)\s+(.*)$", text)
        if match:
            tz = get_zone(match.group(2))
            text = match.group(3)
        self.tz = tz
        self.expression = text
        if text.startswith("@"):
            if text not in DESCRIPTORS:
                raise InvalidInput("cron %r: %s is not supported; use five fields (minute hour "
                                   "day-of-month month day-of-week) or one of %s" % (
                                       self.source, text.split()[0], ", ".join(DESCRIPTORS)))
        elif len(text.split()) != 5:
            raise InvalidInput("cron %r has %d fields; a crontab expression has five: minute hour "
                               "day-of-month month day-of-week (for example '0 2 * * 6')" % (
                                   self.source, len(text.split())))
        if not croniter.is_valid(text):
            raise InvalidInput("cron %r is not a valid crontab expression (minute hour day-of-month "
                               "month day-of-week, for example '0 2 * * 6')" % (self.source,))

    def _iter(self, local_start):
        return croniter(self.expression, local_start)

    def fires_after(self, instant):
        """UTC fire times strictly after ``instant``, ascending (an endless generator)."""
        # The mapping from wall clock to instants never decreases, so no wall-clock time before
        # the one shown at ``instant`` can map after it.
        it = self._iter(utc_to_local(instant, self.tz))
        last = None
        while True:
            fire = local_to_utc(self._next(it, "get_next"), self.tz)
            if fire <= instant or fire == last:
                continue
            last = fire
            yield fire

    def fires_until(self, instant):
        """UTC fire times at or before ``instant``, descending (an endless generator)."""
        # While the clock repeats an hour, later wall-clock times map to earlier instants: start
        # past the repeated stretch and skip what maps after ``instant``.
        fold = abs(instant.astimezone(self.tz).utcoffset()
                   - (instant + datetime.timedelta(days=1)).astimezone(self.tz).utcoffset())
        fold = max(fold, abs(instant.astimezone(self.tz).utcoffset()
                             - (instant - datetime.timedelta(days=1)).astimezone(self.tz).utcoffset()))
        start = utc_to_local(instant, self.tz) + max(fold, datetime.timedelta(hours=2)) \
            + datetime.timedelta(microseconds=1)
        it = self._iter(start)
        last = None
        while True:
            fire = local_to_utc(self._next(it, "get_prev"), self.tz)
            if fire > instant or fire == last:
                continue
            last = fire
            yield fire

    def _next(self, it, method):
        try:
            return getattr(it, method)(datetime.datetime)
        except CroniterBadDateError:
            raise InvalidInput("cron %r never fires (no such date)" % (self.source,))


def parse_schedules(expressions, default_tz=UTC):
    if not expressions:
        raise InvalidInput("no cron expression given")
    return [CronSchedule(e, default_tz) for e in expressions]


def _merged(generators, descending=False):
    if descending:
        return heapq.merge(*generators, reverse=True)
    return heapq.merge(*generators)


def _extend_forward(schedules, end, duration, after):
    """The end of a window that reaches ``end``, with every later window that overlaps it merged."""
    limit = after + MERGE_HORIZON
    for count, fire in enumerate(_merged([s.fires_after(after) for s in schedules])):
        if fire > end or count >= MAX_FIRES or end > limit:
            break
        end = max(end, fire + duration)
    return end


def _extend_backward(schedules, start, duration):
    """The start of a window that opened at ``start``, with every earlier overlapping one merged."""
    limit = start - MERGE_HORIZON
    for count, fire in enumerate(_merged([s.fires_until(start) for s in schedules], descending=True)):
        if fire >= start:
            continue
        if fire + duration < start or count >= MAX_FIRES or start < limit:
            break
        start = fire
    return start


def cron_window(schedules, duration, now):
    """(start, end) of the window that holds ``now`` (None, None when outside) and (next_start,
    next_end) of the next window after it, for windows opening at the schedules' fire times."""
    if duration <= ZERO:
        raise InvalidInput("a window's duration must be longer than zero")
    last = max(next(s.fires_until(now)) for s in schedules)
    start = end = None
    if last + duration > now:
        start = _extend_backward(schedules, last, duration)
        end = _extend_forward(schedules, last + duration, duration, now)
    following = min(next(s.fires_after(end or now)) for s in schedules)
    next_end = _extend_forward(schedules, following + duration, duration, following)
    return start, end, following, next_end


# --- the evaluation ----------------------------------------------------------------------------

def evaluate(now, start, end, next_start, next_end, margin, tz, always_open=False):
    """Where ``now`` stands: the result a module returns (times as ISO text, UTC)."""
    result = dict(now=iso(now), timezone=zone_name(tz), inside=False, always_open=always_open,
                  window_start=None, window_end=None, time_left_seconds=None, deadline=None,
                  deadline_passed=False, next_start=iso(next_start), next_end=iso(next_end),
                  safety_margin_seconds=int(margin.total_seconds()))
    if always_open:
        result.update(inside=True, msg="no maintenance window is declared: maintenance may run "
                                       "at any time")
        return result
    if start is not None and start <= now < end:
        deadline = end - margin
        left = end - now
        result.update(inside=True, window_start=iso(start), window_end=iso(end),
                      time_left_seconds=int(left.total_seconds()), deadline=iso(deadline),
                      deadline_passed=deadline <= now)
        if deadline <= now:
            result["msg"] = ("inside the window %s to %s, but only %s is left, within the safety "
                             "margin of %s: too late to start" % (
                                 local_text(start, tz), local_text(end, tz),
                                 format_duration(left), format_duration(margin)))
        else:
            result["msg"] = "inside the window %s to %s: %s left, deadline %s" % (
                local_text(start, tz), local_text(end, tz), format_duration(left),
                local_text(deadline, tz))
        return result
    if next_start is not None:
        result["msg"] = "outside the maintenance window: the next one opens %s (in %s) and " \
                        "closes %s" % (local_text(next_start, tz), format_duration(next_start - now),
                                       local_text(next_end, tz))
    elif end is not None:
        result["msg"] = "outside the maintenance window: it closed %s and no other is scheduled" % (
            local_text(end, tz))
    else:
        result["msg"] = "outside the maintenance window and no window is scheduled"
    return result


def explicit_window(start, end, now, margin, tz):
    """The evaluation for one window given by its start and end."""
    if end <= start:
        raise InvalidInput("the window's end %s is not after its start %s" % (iso(end), iso(start)))
    if now < start:
        return evaluate(now, None, None, start, end, margin, tz)
    if now >= end:
        return evaluate(now, None, end, None, None, margin, tz)
    return evaluate(now, start, end, None, None, margin, tz)


def scheduled_window(schedules, duration, now, margin, tz):
    """The evaluation for windows opening at cron fire times and lasting ``duration``."""
    start, end, next_start, next_end = cron_window(schedules, duration, now)
    return evaluate(now, start, end, next_start, next_end, margin, tz)


def enforce(result):
    """Raise OutsideWindow (carrying the result) unless work may start now."""
    if not result["inside"] or result["deadline_passed"]:
        details = dict(result)
        msg = details.pop("msg")
        raise OutsideWindow(msg, **details)
    return result


# --- the GPU pool's declared window ---------------------------------------------------------------

POLICY_PATH = ("nodeManagerConfig", "nodePoolRollingUpdatePolicy")
# The CRD's default for maxDuration; it applies when the policy exists without the field.
DEFAULT_MAX_DURATION = "10m"


def pool_policy_window(pool_spec):
    """(includes, maxDuration) declared by a GPUPool spec (or a TFC pool's specTemplate)."""
    node = pool_spec or {}
    for key in POLICY_PATH:
        node = (node or {}).get(key) or {}
    includes = [str(e) for e in ((node.get("maintenanceWindow") or {}).get("includes") or [])
                if str(e).strip()]
    return includes, node.get("maxDuration") or DEFAULT_MAX_DURATION


def find_cluster_pool(tfc, pool_name):
    """The ``spec.gpuPools[]`` entry of a TensorFusionCluster named ``pool_name``, either by its
    own name or by the GPUPool name the operator gives it (``<cluster>-<name>``)."""
    cluster = tfc["metadata"]["name"]
    pools = (tfc.get("spec") or {}).get("gpuPools") or []
    names = [entry.get("name") or "" for entry in pools]
    if pool_name is None:
        if len(pools) == 1:
            return pools[0]
        raise InvalidInput("TensorFusionCluster %s has %d GPU pools (%s): say which with pool" % (
            cluster, len(pools), ", ".join(names) or "none"))
    index = pool_index(tfc, pool_name)
    if index is not None:
        return pools[index]
    raise InvalidInput("TensorFusionCluster %s has no GPU pool %s (it has: %s)" % (
        cluster, pool_name, ", ".join(names) or "none"))


# --- reading the declared window from the cluster (the only API calls here) ----------------------


def gpupool_spec(kube, name=None):
    """(spec, name) of the GPUPool ``name``; without a name, of the only GPUPool there is."""
    pools = kube.resource("GPUPool", group=TF_GROUP)
    if name:
        obj = kube.call("get", "gpupools/%s" % name, pools.get, name=name).to_dict()
        return obj.get("spec") or {}, name
    items = kube.call("list", "gpupools", pools.get).to_dict().get("items") or []
    if len(items) != 1:
        raise InvalidInput("the cluster has %d GPUPools (%s): say which with pool" % (
            len(items), ", ".join(i["metadata"]["name"] for i in items) or "none"))
    return items[0].get("spec") or {}, items[0]["metadata"]["name"]


def cluster_pool_spec(kube, cluster, pool=None):
    """(specTemplate, GPUPool name) of a pool inside the TensorFusionCluster ``cluster``."""
    clusters = kube.resource("TensorFusionCluster", group=TF_GROUP)
    tfc = kube.call("get", "tensorfusionclusters/%s" % cluster, clusters.get, name=cluster).to_dict()
    entry = find_cluster_pool(tfc, pool)
    return entry.get("specTemplate") or {}, "%s-%s" % (cluster, entry.get("name") or "")
