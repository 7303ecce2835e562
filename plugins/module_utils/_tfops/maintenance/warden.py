# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lock's warden: a small process that a runbook's lock starts beside its ansible-playbook.

A run holds the maintenance lock for as long as it works, also between tasks and while a module
that is not fenced runs (helm, a report). So that a short TTL (the runbooks' 120 s) is safe, the
warden renews the Lease whenever a third of its TTL has passed, for as long as the run's
ansible-playbook process runs (the one named in the Lease: pid, start time). When that process
ends while the Lease still names the run - Ctrl-C, SIGTERM (an AWX job cancelled), kill -9 - the
warden pauses the rollouts the run was waiting for that are still under way (as a deadline
does: the same change run again resumes them) - once a write of the run that a signal cannot stop
halfway (helm, the Lease's WRITING) has ended, renewing the lock meanwhile - then releases the
lock, saying why in the Lease, and ends; a run from any host then takes it. When the Lease no longer names the run (the run
released it, or lost it), the warden ends without writing anything. An API server that cannot be reached is waited out until the
Lease's TTL would have ended anyway. A warden that dies with its run (the container of an AWX
job torn down) leaves a Lease that nobody renews: any host takes it over once its TTL has passed.

The warden's own session (not the terminal's process group, which a Ctrl-C reaches) and its
settings on its standard input (the connection's credentials never in its command line or a
file); it writes nothing but the Lease and, for an interrupted run, the pause of its rollouts and
the run's record (its report ConfigMap, and a local copy).
``Starting`` is used by the lock module; ``main`` runs in the warden."""

from __future__ import annotations

import importlib
import json
import os
import select
import subprocess
import sys
import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ControllerGone,
    LockLost,
    NotLockHolder,
    TfopsError,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import remove_client_temp_files
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import Kube
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import retry
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import Fence, writer_alive

READY = "ready"
POLL_SECONDS = 1.0  # how soon the end of ansible-playbook is noticed
START_SECONDS = 60  # how long the lock module waits for the warden to connect (a loaded host)
LIFETIME_SECONDS = 24 * 3600  # a bound for a run that never ends (the process is also watched)
TLS_FILES = ("ssl_ca_cert", "cert_file", "key_file")  # of a kubernetes.client Configuration


def collections_root(module_file=__file__):
    """The sys.path entry that holds ``ansible_collections`` (a folder, or AnsiballZ's zip)."""
    path = os.path.abspath(module_file)
    for _level in range(7):  # maintenance, _tfops, module_utils, plugins, ops, tensorfusion, ansible_collections
        path = os.path.dirname(path)
    return os.path.dirname(path)


def gone_reason(pid, paused=(), pause_failed=None, record=None, record_failed=None):
    """What the Lease says when the warden releases it for its run; ``paused``: the rollouts it
    paused first; ``pause_failed``: why it could not pause them; ``record``: where it wrote the
    run's record, or ``record_failed``: why it could not. Pure."""
    if pause_failed:
        then = ", which could not pause the run's rollouts (%s): look at the pools" % pause_failed
    elif paused:
        then = ", which first paused the rollout of %s (autoUpdate false; the same change run again " \
               "resumes it)" % ", ".join(paused)
    else:
        then = ""
    if record:
        then += "; its record: %s" % record
    elif record_failed:
        then += "; its record could not be written (%s)" % record_failed
    return ("the run's ansible-playbook (pid %d) ended without releasing the lock (interrupted, "
            "cancelled or killed): released by its warden%s" % (pid, then))


class Starting:
    """A warden started before the lock is taken: ``with Starting(...) as warden:`` starts it (its
    settings on its standard input) and returns once it is connected and ready; the block takes
    the lock and calls ``warden.go()`` when it holds it. Leaving the block without ``go`` (the lock
    was held by another, or the take failed) tells the warden to stop. Started first, so that a
    run interrupted at any point after the Lease is written has a warden that saw it happen: one
    whose module died before a word (a killed worker) watches whatever the Lease says."""

    def __init__(self, auth, namespace, name, holder, process, ttl, python=None, timeout=START_SECONDS,
                 before_release=None, record=None, report_dest=None):
        # before_release: "module:function" the warden calls with (kube, the Lease's view) before it
        # releases an interrupted run's lock; it returns what it did, for the Lease's reason.
        # record: "module:function" called next with (kube, view, paused, pause_failed, dest) to
        # write the run's record (its report_dest: a local folder too); returns (reference, failure).
        self.settings = dict(auth=auth, namespace=namespace, name=name, holder=holder, ttl=ttl,
                             pid=process["pid"], started=process["started"], before_release=before_release,
                             record=record, report_dest=report_dest)
        self.python, self.timeout = python or sys.executable, timeout
        self.proc = None
        self.pid = None

    def __enter__(self):
        code = "import sys; sys.path.insert(0, %r); " \
               "from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import warden; " \
               "warden.main()" % collections_root()
        # Its command line names it (ps), never its settings.
        argv = [self.python, "-c", code, "tensorfusion.ops-lock-warden",
                "lease=%s/%s" % (self.settings["namespace"], self.settings["name"]),
                "ansible-playbook=%d" % self.settings["pid"]]
        # Not AnsibleModule.run_command: the warden outlives the module, in a session of its own.
        # The credentials travel in the settings: not also in its environment.
        env = dict((k, v) for k, v in os.environ.items() if not k.startswith("K8S_AUTH_"))
        self.proc = subprocess.Popen(argv,  # pylint: disable=ansible-bad-function
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, close_fds=True, cwd="/", env=env)
        self.proc.stdin.write((json.dumps(self.settings) + "\n").encode())
        self.proc.stdin.flush()
        line = b""
        if select.select([self.proc.stdout], [], [], self.timeout)[0]:
            line = self.proc.stdout.readline()
        if line.strip() != READY.encode():
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            err = self.proc.stderr.read().decode(errors="replace")
            self._close()
            raise TfopsError("the lock's warden did not start within %ds: %s" % (
                self.timeout, (line.decode(errors="replace") + err).strip()[-2000:] or "no word from it"))
        return self

    def go(self):
        """The lock is held: the warden watches it."""
        try:
            self.proc.stdin.write(b"go\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise TfopsError("the lock's warden (pid %d) ended before it could watch the lock: %s" % (
                self.proc.pid, exc))
        self.pid = self.proc.pid

    def __exit__(self, *exc):
        if self.pid is None:
            try:
                self.proc.stdin.write(b"stop\n")
            except OSError:  # it ended already
                pass
        self._close()
        return False

    def _close(self):
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except OSError:
                pass


def pin_files(api_client):
    """Open the connection's TLS files now and name them by their descriptors (/proc/self/fd/N):
    a job's private folder that goes when its ansible-playbook ends (ansible-runner's, AWX's)
    cannot take away what the warden needs to release the lock then. The client library's own
    temporary copies of a kubeconfig's data are removed at once: the warden leaves no file.
    Returns the open files (kept for the warden's life)."""
    cfg = api_client.configuration
    kept = []
    for attr in TLS_FILES:
        path = getattr(cfg, attr, None)
        if path:
            handle = open(path, "rb")  # pylint: disable=consider-using-with  # held while the warden lives
            kept.append(handle)
            setattr(cfg, attr, "/proc/self/fd/%d" % handle.fileno())
    if kept:
        api_client.rest_client = type(api_client.rest_client)(cfg)
    remove_client_temp_files()
    return kept


def refused(exc):
    """The API server does not accept the warden's credentials (401, 403)."""
    return getattr(exc, "status", None) in (401, 403)


class Trouble:
    """Since when the warden's requests fail, and whether the API server was out of reach moments
    ago (core/retry's rule: a kube-apiserver that has just started refuses credentials for seconds,
    until its caches are filled). Its verdict ends the watch: 'refused' for a refusal that is not
    such a restart's, 'unreachable' once failures outlast the TTL."""

    def __init__(self, clock):
        self.clock, self.failing_since, self.refusal = clock, None, False
        self.outages = retry.Outages(clock=clock)

    def ok(self):
        self.failing_since, self.refusal = None, False

    def failed(self, exc):
        self.failing_since = self.failing_since or self.clock()
        self.outages.failed(exc)
        self.refusal = refused(exc) and not self.outages.just_back()

    def verdict(self, ttl):
        if self.refusal:
            return "refused"
        if self.failing_since is not None and self.clock() - self.failing_since > ttl:
            return "unreachable"
        return None


class StillWriting(Exception):
    """The run is gone but a write of it (the Lease's WRITING: helm) still runs: not yet."""


def watch(fence, release, sleep=time.sleep, clock=time.monotonic, lifetime=LIFETIME_SECONDS, ttl=None):
    """The warden's loop, given its ``fence`` (maintenance/fence.Fence over the run's
    ansible-playbook process) and ``release()``: first a look (the Lease names the run, its
    process runs); then renew while the process runs; release once it is gone and the Lease
    still names the run; end when the Lease no longer does. What it did: 'released', 'not ours',
    'refused' (its credentials no longer accepted: the job's token revoked with its end),
    'unreachable' (could not release before the TTL - the fence's, else ``ttl`` - ran out)
    or 'lifetime'."""
    end = clock() + lifetime
    trouble = Trouble(clock)
    look = fence.check
    while clock() < end:
        try:
            look()
            look = fence.heartbeat
            trouble.ok()
        except ControllerGone:
            try:
                release()
                return "released"
            except StillWriting:  # a write of the run finishes first; the lock stays the run's
                try:
                    fence.keep()
                    trouble.ok()
                except (LockLost, NotLockHolder):
                    return "not ours"
                except TfopsError as exc:
                    trouble.failed(exc)
            except (LockLost, NotLockHolder):
                return "not ours"
            except TfopsError as exc:  # the API server is away or starting: try again
                trouble.failed(exc)
        except LockLost:
            return "not ours"
        except TfopsError as exc:
            trouble.failed(exc)
        verdict = trouble.verdict(fence.ttl or ttl or lifetime)
        if verdict:
            return verdict
        sleep(min(POLL_SECONDS, fence.seconds_to_next() or POLL_SECONDS))
    return "lifetime"


def hook(spec):
    """The function a "module:function" names (None for none)."""
    if not spec:
        return None
    module, _sep, function = spec.partition(":")
    return getattr(importlib.import_module(module), function)


def release(kube, lease, settings, before=None, record=None):
    """Release the lock of a run that is gone, once ``before(kube, view)`` has done its part (the
    pause of the rollouts the run waited for) and ``record`` has written the run's record. Tried
    again after an outage: ``before`` is too, and must be idempotent."""
    view = locks.lease_view(lease.read())
    if view is None or view["holder"] != settings["holder"]:
        raise NotLockHolder("the lock is no longer the run's")
    if writer_alive(view.get("writing")):
        raise StillWriting(view["writing"]["what"])
    paused, failed = [], None
    try:
        paused = before(kube, view) if before is not None else []
    except TfopsError as exc:
        if retry.retriable("get", getattr(exc, "status", None), unreachable=bool(exc.details.get("unreachable"))):
            raise  # the API server is away or overloaded: the release waits for it too
        failed = exc.msg
    except Exception as exc:  # pylint: disable=broad-except  # a fault there must not keep the lock held
        failed = "%s: %s" % (type(exc).__name__, exc)
    written, unwritten = None, None
    if record is not None:
        try:
            written, unwritten = record(kube, view, paused, failed, settings.get("report_dest"))
        except Exception as exc:  # pylint: disable=broad-except  # nor may a fault of the record's
            unwritten = "%s: %s" % (type(exc).__name__, exc)
    lease.release(dict(holder=settings["holder"], why=gone_reason(settings["pid"], paused, failed, written, unwritten)))


def main():
    """In the warden: read the settings, connect, say ready; then, told to go (or left without a
    word by a module that died), watch; told to stop, end."""
    settings = json.loads(sys.stdin.readline())
    try:
        kube = Kube(settings["auth"])
        pinned = pin_files(kube.api_client)
        lease = locks.LeaseLock(kube, settings["namespace"], settings["name"])
        before = hook(settings.get("before_release"))
        record = hook(settings.get("record"))
        lease.read()  # the first request: every path the warden takes is imported now
        fence = Fence(kube, settings["namespace"], settings["name"], settings["holder"],
                      chain=[(settings["pid"], None, settings["started"])])
    except Exception as exc:  # pylint: disable=broad-except  # said to the module that starts it
        sys.stdout.write("cannot watch the lock: %s: %s\n" % (type(exc).__name__, exc))
        sys.stdout.flush()
        return
    try:
        sys.stdout.write(READY + "\n")
        sys.stdout.flush()
    except OSError:  # the module that started it is gone (its run interrupted meanwhile)
        pass
    word = sys.stdin.readline().strip()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if word != "stop":
        watch(fence, lambda: release(kube, lease, settings, before, record), ttl=settings["ttl"])
    kube.close()
    for handle in pinned:
        handle.close()
