# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The maintenance lock: a ``coordination.k8s.io/v1`` Lease that at most one runbook holds.

The decisions ("may I take this Lease?", "may I release it?") and the Lease each one writes are
pure functions of the Lease as read, the caller's identity and the time. ``LeaseLock`` does the
API calls: it reads, decides, and writes with the resourceVersion it read (create when there is
no Lease), so that of two acquirers who read the same Lease only one write succeeds; the other
gets a conflict, reads again and finds the lock held.
"""

from __future__ import annotations

import datetime
import email.utils
import getpass
import json
import os
import re
import socket
import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import option_text
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import MANAGED_BY
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import (
    micro_time,
    parse_time,
    utcnow,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    InvalidInput,
    LockHeld,
    NotLockHolder,
    TfopsError,
)

try:
    from kubernetes.client import VersionApi
except ImportError:  # require_kubernetes() reports it
    VersionApi = None

LEASE_GROUP = "coordination.k8s.io"
LEASE_API_VERSION = "coordination.k8s.io/v1"  # what a new Lease says when discovery is not asked
PREFIX = "tensorfusion.ops/"
ANNOTATION_KEYS = ("purpose", "user", "host", "job-id")
RELEASED_BY = PREFIX + "released-by"
RELEASED_AT = PREFIX + "released-at"
# Why a lock was released by other than its run's own release (maintenance/warden.py).
RELEASED_WHY = PREFIX + "released-why"
# The ansible-playbook process of a runbook's holder (maintenance/holder.py): a run on the same
# host takes over at once the lock of a holder that provably no longer runs.
PROCESS = PREFIX + "process"
# The rollouts the holder's modules are waiting for: "<cluster>/<pool entry>:<component>,...;..."
# (set by gpupool_rollout through its fence while it waits, cleared when it returns). A warden
# whose run was interrupted pauses those still under way before it releases the lock.
ROLLING = PREFIX + "rolling"
# A write of the holder's run that a signal cannot stop halfway, in flight: "pid=<pid>
# started=<ticks> host=<host> what=<text>" (helm, in a session of its own; set and cleared through
# the fence). An interrupted run's warden waits for that process to end before it releases.
WRITING = PREFIX + "writing"
# Where the holder's run keeps its report (JSON: namespace, configmap, playbook, host, started,
# run_id, keep, release, store): a run that ends without releasing the lock gets its record there, written by its
# warden or by the run that takes the lock over (runbook/interrupted.py).
RECORD = PREFIX + "record"
RECORD_FIELDS = ("namespace", "configmap", "playbook", "host", "started", "run_id", "keep", "release", "store")
JOB_ID_VARIABLES = ("JOB_ID", "AWX_JOB_ID", "TOWER_JOB_ID")
MAX_ATTEMPTS = 5
RUN_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# Times in the Lease follow the API server's clock, read from a response's Date header (whole
# seconds): offsets below the tolerance are noise and ignored; above the warning level, said.
CLOCK_TOLERANCE = 2.0
CLOCK_WARNING = 30.0


class Hooks:
    """What tests inject, and production code never sets: ``host_clock`` (this host's clock in
    epoch seconds; a test sets a wrong one to show that it does not matter) and ``before_write``
    (called between the first read and the write, so that two real runs can read the same Lease
    before either writes: the race the design is for). A ``LeaseLock`` takes its own, else these
    (set in ``ansible-playbook`` by the tests' callback plugin, inherited by the workers)."""

    host_clock = staticmethod(time.time)
    before_write = None


# --- identity --------------------------------------------------------------------------------

def _user():
    try:
        return getpass.getuser()
    except (KeyError, OSError, ImportError):
        return "uid-%d" % os.getuid()


def job_id(environ=None):
    """The AWX / Automation Controller job id, when the run is such a job."""
    environ = os.environ if environ is None else environ
    for name in JOB_ID_VARIABLES:
        if environ.get(name):
            return str(environ[name])
    return None


# A lock nobody renews for longer than a day is one nobody would wait out (the runbooks' is 120 s
# with its warden); a holder is a line of a log and an annotation, not a document.
MAX_TTL_SECONDS = 24 * 3600
MAX_HOLDER_LENGTH = 256


def check_ttl(ttl, name="ttl"):
    """The lock's TTL, within 1 second to MAX_TTL_SECONDS."""
    if ttl < 1:
        raise InvalidInput("%s must be at least 1 second" % name)
    if ttl > MAX_TTL_SECONDS:
        raise InvalidInput("%s: %d seconds is more than a day (%d): a lock held that long without "
                           "renewal is one nobody would wait out" % (name, ttl, MAX_TTL_SECONDS))
    return ttl


def check_holder(holder, name="holder"):
    """A holder (or purpose) given by the user: one line of printable text, at most
    MAX_HOLDER_LENGTH characters (it is written to logs, reports and the Lease)."""
    if holder is None:
        return holder
    if not isinstance(holder, str) or not holder.strip():
        raise InvalidInput("%s must be non-empty text" % name)
    if len(holder) > MAX_HOLDER_LENGTH:
        raise InvalidInput("%s is %d characters long; at most %d" % (name, len(holder), MAX_HOLDER_LENGTH))
    return option_text.check(holder, name)


def check_run_id(run):
    """A run's token (the runbooks' tfops_run_id): it names the run in the lock and its report."""
    if run is not None and not RUN_ID.match(str(run)):
        raise InvalidInput("run_id must be 1 to 64 letters, digits, '.', '_' or '-', not %r" % run)


def make_identity(purpose, holder=None, user=None, host=None, job=None, run=None, pid=None, process=None):
    """Who asks: ``holder`` is the Lease's holderIdentity; the rest is recorded beside it. A
    ``run`` token (and the controller's ``pid``) tell apart two runs of one user on one host;
    ``process`` (holder.format_process) names the holding process for a takeover once it is gone."""
    if not purpose or not str(purpose).strip():
        raise InvalidInput("purpose must not be empty")
    check_run_id(run)
    user = user or _user()
    host = host or socket.gethostname()
    if not holder:
        tags = "".join(" %s=%s" % (key, value) for key, value in
                       (("job", job), ("pid", pid), ("run", run)) if value)
        holder = "%s@%s%s purpose=%s" % (user, host, tags, purpose)
    return dict(holder=holder, user=user, host=host, job_id=job, purpose=str(purpose), process=process or None)


# --- clocks ----------------------------------------------------------------------------------

def clock_offset(date_header, sent, received):
    """Seconds to add to this host's clock to read the API server's, from the Date header of a
    response and this host's clock when the request went out and when the answer came back.
    Within CLOCK_TOLERANCE (the header's one-second steps plus latency): 0."""
    if not date_header:
        return 0.0
    try:
        server = email.utils.parsedate_to_datetime(date_header).timestamp() + 0.5
    except (TypeError, ValueError):
        return 0.0
    offset = server - (sent + received) / 2.0
    return offset if abs(offset) >= CLOCK_TOLERANCE else 0.0


# --- reading a Lease -------------------------------------------------------------------------

def _time(value):
    return parse_time(value) if value else None


def lease_view(lease, now=None):
    """What a Lease says about its lock (None for no Lease); times as aware datetimes."""
    if lease is None:
        return None
    meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
    annotations = meta.get("annotations") or {}
    view = dict(
        name=meta.get("name"), namespace=meta.get("namespace"),
        holder=spec.get("holderIdentity") or None,
        acquire_time=_time(spec.get("acquireTime")), renew_time=_time(spec.get("renewTime")),
        lease_duration_seconds=spec.get("leaseDurationSeconds"),
        transitions=int(spec.get("leaseTransitions") or 0),
        resource_version=meta.get("resourceVersion"),
        purpose=annotations.get(PREFIX + "purpose"), user=annotations.get(PREFIX + "user"),
        host=annotations.get(PREFIX + "host"), job_id=annotations.get(PREFIX + "job-id"),
        process=annotations.get(PROCESS),
        # Who released it last, when and why (a warden's release of an interrupted run says why).
        released_by=annotations.get(RELEASED_BY), released_at=annotations.get(RELEASED_AT),
        released_why=annotations.get(RELEASED_WHY),
        rolling=parse_rolling(annotations.get(ROLLING)),
        writing=parse_writing(annotations.get(WRITING)),
        record=parse_record(annotations.get(RECORD)))
    last = view["renew_time"] or view["acquire_time"]
    if view["holder"] and last is not None and view["lease_duration_seconds"]:
        view["expires"] = last + datetime.timedelta(seconds=int(view["lease_duration_seconds"]))
    else:
        view["expires"] = None
    view["stale"] = bool(view["holder"]) and stale(view, now or utcnow())
    return view


def stale(view, now):
    """A held lock whose holder stopped renewing: past renewTime + leaseDurationSeconds.

    A holder without any time, or without a duration, is taken as stale: such a Lease was not
    written by a working holder (client-go's leader election reads it the same way)."""
    if view["expires"] is None:
        return True
    return now >= view["expires"]


def parse_rolling(text):
    """[{cluster, pool, components}] from a ROLLING annotation. Pure."""
    out = []
    for part in filter(None, (text or "").split(";")):
        where, _sep, comps = part.partition(":")
        cluster, _sep, pool = where.partition("/")
        if cluster and pool:
            out.append({"cluster": cluster, "pool": pool, "components": [c for c in comps.split(",") if c]})
    return out


def parse_writing(text):
    """The WRITING annotation as {pid, started, host, what}, or None. Pure."""
    head, _sep, what = (text or "").partition(" what=")
    found = dict(part.partition("=")[::2] for part in head.split())
    try:
        return {"pid": int(found["pid"]), "started": int(found["started"]), "host": found.get("host"), "what": what}
    except (KeyError, ValueError):
        return None


def format_writing(writer):
    return "pid=%d started=%d host=%s what=%s" % (writer["pid"], writer["started"], writer["host"], writer["what"])


def parse_record(text):
    """The RECORD annotation as a dict, or None when there is none or it is not one. Pure."""
    try:
        found = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(found, dict) or not all(found.get(k) for k in ("namespace", "configmap", "playbook", "started")):
        return None
    return dict((k, found.get(k)) for k in RECORD_FIELDS)


def format_record(ref):
    return json.dumps(dict((k, ref.get(k)) for k in RECORD_FIELDS), sort_keys=True, separators=(",", ":"))


def format_rolling(items):
    return ";".join("%s/%s:%s" % (i["cluster"], i["pool"], ",".join(i["components"])) for i in items or [])


def public_view(view):
    """The view with ISO times, for results and messages."""
    if view is None:
        return None
    out = dict(view)
    for key in ("acquire_time", "renew_time", "expires"):
        out[key] = micro_time(view[key]) if view[key] else None
    return out


def describe_holder(view):
    since = micro_time(view["acquire_time"]) if view["acquire_time"] else "an unknown time"
    renewed = micro_time(view["renew_time"]) if view["renew_time"] else "never"
    expires = micro_time(view["expires"]) if view["expires"] else "unknown"
    return "%s since %s (last renewed %s, expires %s)" % (view["holder"], since, renewed, expires)


# --- decisions (pure) ------------------------------------------------------------------------

def decide_acquire(view, holder, now, gone=None):
    """What acquiring means for a Lease as read: (action, warning).

    create (no Lease), take (a Lease nobody holds), renew (held by ``holder``), take_over (held
    by another holder who stopped renewing past its TTL, or whose process ``gone(view)`` proves
    gone - a reason, or None when nothing is proven). Held by another live holder: LockHeld."""
    if view is None:
        return "create", None
    if not view["holder"]:
        return "take", interrupted_before(view)
    if view["holder"] == holder:
        return "renew", None
    if stale(view, now):
        return "take_over", ("took over the maintenance lock %s/%s from %s: its holder stopped "
                             "renewing it" % (view["namespace"], view["name"], describe_holder(view)))
    reason = gone(view) if gone is not None else None
    if reason:
        return "take_over", ("took over the maintenance lock %s/%s from %s at once: its holder is "
                             "gone - %s" % (view["namespace"], view["name"], describe_holder(view), reason))
    raise LockHeld("the maintenance lock %s/%s is held by %s" % (
        view["namespace"], view["name"], describe_holder(view)),
        holder=view["holder"], lease=public_view(view))


def interrupted_before(view):
    """The warning a run gives that takes a lock which the run before it did not release itself
    (ended by a signal or killed; its warden released it): that run's report may be missing and
    what it changed is what the cluster shows. None otherwise. Pure."""
    if not view.get("released_why"):
        return None
    return ("the run before this one (%s) did not finish: %s, at %s; what it changed is what the "
            "cluster shows (this run's precheck)" % (
                view.get("released_by") or "unknown", view["released_why"], view.get("released_at") or "an unknown time"))


def decide_release(view, holder, force=False):
    """What releasing means: (action, warning). none (no Lease or nobody holds it), release (held
    by ``holder``), force_release (held by another and ``force``); otherwise NotLockHolder."""
    if view is None or not view["holder"]:
        return "none", None
    if view["holder"] == holder:
        return "release", None
    if force:
        return "force_release", "released the maintenance lock %s/%s held by %s (force)" % (
            view["namespace"], view["name"], describe_holder(view))
    msg = "refusing to release the maintenance lock %s/%s: it is held by %s, not by %s " \
          "(force=true breaks it)" % (view["namespace"], view["name"], describe_holder(view), holder)
    raise NotLockHolder(msg, holder=view["holder"], lease=public_view(view))


def lease_after(lease, action, me, namespace, name, now, ttl, api_version=LEASE_API_VERSION):
    """The whole Lease to write for ``action`` (pure; ``lease`` is the one read, or None)."""
    if lease is None:
        body = {"apiVersion": api_version, "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
                "spec": {"leaseTransitions": 0}}
    else:
        body = {"apiVersion": lease.get("apiVersion") or api_version, "kind": "Lease",
                "metadata": dict((k, v) for k, v in (lease.get("metadata") or {}).items()
                                 if k != "managedFields"),
                "spec": dict(lease.get("spec") or {})}
    meta, spec = body["metadata"], body["spec"]
    annotations = dict(meta.get("annotations") or {})
    stamp = micro_time(now)
    if action in ("create", "take", "take_over", "renew"):
        if action != "renew":
            spec["acquireTime"] = stamp
        if action in ("take", "take_over") and (spec.get("holderIdentity") or annotations.get(
                RELEASED_BY)) != me["holder"]:
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        spec.update(holderIdentity=me["holder"], leaseDurationSeconds=int(ttl), renewTime=stamp)
        for key in ANNOTATION_KEYS:
            value = me.get(key.replace("-", "_"))
            if value:
                annotations[PREFIX + key] = str(value)
            else:
                annotations.pop(PREFIX + key, None)
        if me.get("process"):
            annotations[PROCESS] = me["process"]
        elif action != "renew":  # a renewal without it (a fence's) keeps the holder's
            annotations.pop(PROCESS, None)
        if action != "renew" or me.get("rolling") == []:
            annotations.pop(ROLLING, None)
        elif me.get("rolling"):  # a renewal that does not say keeps what the holder rolls
            annotations[ROLLING] = format_rolling(me["rolling"])
        if action != "renew" or me.get("writing") == {}:
            annotations.pop(WRITING, None)
        elif me.get("writing"):  # a renewal that does not say keeps what the holder writes
            annotations[WRITING] = format_writing(me["writing"])
        if me.get("record"):
            annotations[RECORD] = format_record(me["record"])
        elif action != "renew":  # a renewal without it (a fence's) keeps the holder's
            annotations.pop(RECORD, None)
        annotations.pop(RELEASED_BY, None)
        annotations.pop(RELEASED_AT, None)
        annotations.pop(RELEASED_WHY, None)
    elif action in ("release", "force_release"):
        for key in ("holderIdentity", "acquireTime", "renewTime"):
            spec.pop(key, None)
        for key in ANNOTATION_KEYS:
            annotations.pop(PREFIX + key, None)
        annotations.pop(PROCESS, None)
        annotations.pop(ROLLING, None)
        annotations.pop(WRITING, None)
        annotations.pop(RECORD, None)
        annotations[RELEASED_BY] = me["holder"]
        annotations[RELEASED_AT] = stamp
        if me.get("why"):
            annotations[RELEASED_WHY] = me["why"]
        else:
            annotations.pop(RELEASED_WHY, None)
    else:
        raise ValueError("no Lease to write for %s" % action)
    meta["annotations"] = annotations
    return body


def diff_view(lease):
    """The parts of a Lease a person reviews in --diff."""
    if lease is None:
        return {}
    meta = lease.get("metadata") or {}
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace"),
                         "annotations": meta.get("annotations") or {}},
            "spec": lease.get("spec") or {}}


# --- the API side ------------------------------------------------------------------------------

class Conflict(Exception):
    """Another writer changed the Lease between our read and our write."""


class LeaseLock:
    """One Lease, read and written with optimistic concurrency."""

    def __init__(self, kube, namespace, name, host_clock=None, before_write=None):
        self.kube = kube
        self.host_clock = host_clock or Hooks.host_clock
        self.before_write = before_write or Hooks.before_write
        self.namespace = namespace
        self.name = name
        self.leases = kube.resource("Lease", group=LEASE_GROUP)  # the served version, by discovery
        self.desc = "leases/%s in %s" % (name, namespace)
        self.clock_offset = None

    def server_clock(self):
        """A clock that reads the API server's time (this host's, corrected by one request), so
        that hosts whose clocks disagree still agree on when a lock expires."""
        host_time = self.host_clock
        sent = host_time()
        _info, _status, headers = self.kube.call(
            "get", "/version", VersionApi(self.kube.api_client).get_code_with_http_info)
        received = host_time()
        self.clock_offset = clock_offset((headers or {}).get("Date"), sent, received)
        offset = self.clock_offset
        return lambda: datetime.datetime.fromtimestamp(host_time() + offset, tz=datetime.timezone.utc)

    def read(self):
        try:
            return self.kube.call("get", self.desc, self.leases.get, name=self.name,
                                  namespace=self.namespace).to_dict()
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def write(self, before, body):
        """Create (when there was no Lease) or replace at the read resourceVersion."""
        try:
            if before is None:
                return self.kube.call("create", self.desc, self.leases.create, body=body,
                                      namespace=self.namespace).to_dict()
            return self.kube.call("update", self.desc, self.leases.replace, body=body,
                                  namespace=self.namespace).to_dict()
        except ApiError as exc:
            if exc.status == 409:  # AlreadyExists on create, Conflict on a stale resourceVersion
                raise Conflict(str(exc))
            raise

    def change(self, decide, me, ttl, check_mode, clock=None):
        """Read, decide, write; again from a fresh read after a conflict. ``decide(view, now)``
        returns (action, warning) or raises. Returns the result for the module. ``clock``
        defaults to the API server's (see server_clock)."""
        clock = clock or self.server_clock()
        offset = round(self.clock_offset or 0.0, 1)
        notes = []
        if abs(offset) >= CLOCK_WARNING:
            notes.append("this host's clock is %.0f s %s the API server's; the lock's times follow "
                         "the server's clock" % (abs(offset), "ahead of" if offset < 0 else "behind"))
        for conflicts in range(MAX_ATTEMPTS):
            before = self.read()
            now = clock()
            view = lease_view(before, now)
            try:
                action, warning = decide(view, now)
            except TfopsError as exc:
                exc.details.update(conflicts=conflicts, clock_offset_seconds=offset)
                raise
            result = dict(action=action, changed=action != "none", holder=me["holder"],
                          previous=public_view(view), conflicts=conflicts,
                          clock_offset_seconds=offset, warnings=notes + ([warning] if warning else []))
            if action == "none":
                result.update(lease=public_view(view), diff=dict(before=diff_view(before),
                                                                 after=diff_view(before)))
                return result
            after = lease_after(before, action, me, self.namespace, self.name, now, ttl,
                                self.leases.group_version)
            result["diff"] = dict(before=diff_view(before), after=diff_view(after))
            if check_mode:
                result["lease"] = public_view(lease_view(after, now))
                return result
            if conflicts == 0 and self.before_write is not None:
                self.before_write()
            try:
                written = self.write(before, after)
            except Conflict:
                continue
            result["lease"] = public_view(lease_view(written, now))
            result["diff"]["after"] = diff_view(written)
            return result
        raise ApiError("the Lease %s kept changing under us: %d conflicting writes in a row" % (
            self.desc, MAX_ATTEMPTS), status=409, verb="update", resource=self.desc)

    def acquire(self, me, ttl, check_mode=False, clock=None, gone=None):
        """``gone``: see decide_acquire (holder.gone_checker judges on this host)."""
        return self.change(lambda view, now: decide_acquire(view, me["holder"], now, gone),
                           me, ttl, check_mode, clock)

    def release(self, me, force=False, check_mode=False, clock=None):
        return self.change(lambda view, now: decide_release(view, me["holder"], force),
                           me, None, check_mode, clock)
