# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fencing a module run by the maintenance lock of the runbook that started it.

A runbook takes the lock (a Lease) and hands its holder identity to the modules it runs
(``fence``). Before each write such a module checks that the Lease still names that holder, and
while it waits it renews the Lease, so that a module whose run lost the lock (released by force,
taken over after its TTL) stops instead of writing. It also watches the ``ansible-playbook``
process that started it: after a ``kill -9`` of that process its worker and the module live on
(reparented), and such an orphan stops before its next write and renews nothing.

The check is a read before the write, not a server-side precondition: a takeover between the
two cannot be excluded, only narrowed to one request's time.
"""

from __future__ import annotations

import os
import socket
import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ControllerGone,
    LockLost,
)

# How often a waiting module looks at its controller process: a killed run's module stops
# waiting (and renewing) within this many seconds.
CONTROLLER_CHECK_SECONDS = 15.0
MAX_CHAIN = 64


# --- the controller process (pure parsing, /proc reading) --------------------------------------

def parse_stat(text):
    """(ppid, starttime) from the text of /proc/<pid>/stat; the command name may hold spaces
    and parentheses, so fields are counted after its last ')'."""
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19])


def is_ansible_playbook(argv):
    """ansible-playbook as its own executable or run by a Python interpreter (a worker process
    forked from it has the same command line)."""
    return any(os.path.basename(arg).startswith("ansible-playbook") for arg in argv[:2])


def ended(text):
    """Whether /proc/<pid>/stat's text is of a process that has ended and not been reaped yet
    (a zombie, or dead): its run is over although the pid still shows."""
    return text[text.rindex(")") + 2:][:1] in ("Z", "X", "x")


def _stat(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            text = handle.read()
        return None if ended(text) else parse_stat(text)
    except (OSError, ValueError, IndexError):
        return None


def _argv(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return []


def controller_chain(stat=_stat, argv=_argv, start=None):
    """The processes from this one up to the topmost ``ansible-playbook`` ancestor, as
    [(pid, ppid, starttime)]; the topmost's ppid is None (it may be reparented harmlessly, e.g.
    under nohup). Empty when there is no such ancestor (a module run by another tool) or no
    /proc: then no controller check is made. This process is in the chain: a module run inside
    ansible-playbook's worker (plugin_utils/in_process.py) is itself the process that a killed
    ansible-playbook leaves reparented."""
    chain, top = [], None
    pid = os.getpid() if start is None else start
    while pid > 1 and len(chain) < MAX_CHAIN:
        found = stat(pid)
        if found is None:
            break
        chain.append((pid, found[0], found[1]))
        if is_ansible_playbook(argv(pid)):
            top = len(chain)
        pid = found[0]
    if top is None:
        return []
    chain = chain[:top]
    pid, _ppid, started = chain[-1]
    chain[-1] = (pid, None, started)
    return chain


def chain_alive(chain, stat=_stat):
    """Every process of the chain still runs (same start time: not a reused pid) under the same
    parent: a worker whose ansible-playbook was killed has been reparented."""
    for pid, ppid, started in chain:
        found = stat(pid)
        if found is None or found[1] != started or (ppid is not None and found[0] != ppid):
            return False
    return True


def writer_alive(writer, stat=None, host=None):
    """Whether the process a Lease's WRITING names (lock.parse_writing) still runs here: same host,
    same pid and start time. A writer on another host cannot be judged: False."""
    stat = stat or _stat
    if not writer or writer.get("host") != (host or socket.gethostname()):
        return False
    found = stat(writer["pid"])
    return found is not None and found[1] == writer["started"]


def controller_pid(chain=None):
    """The pid of the ansible-playbook process that runs this module (None outside one)."""
    chain = controller_chain() if chain is None else chain
    return chain[-1][0] if chain else None


# --- the fence ---------------------------------------------------------------------------------

class Fence:
    """The lock ``holder`` must hold ``namespace/name`` for this module to write."""

    def __init__(self, kube, namespace, name, holder, chain=None, clock=time.monotonic):
        self.kube = kube
        self.lock = locks.LeaseLock(kube, namespace, name)
        self.holder = holder
        self.chain = controller_chain() if chain is None else chain
        self.clock = clock
        self.busy = False  # the fence's own requests are not fenced
        # From the Lease as first read: what a renewal writes back (its TTL, the run's identity).
        self.me = self.ttl = self.renew_every = self.last_renew = None

    def _controller(self):
        if self.chain and not chain_alive(self.chain):
            raise ControllerGone(
                "the ansible-playbook process (pid %d) that started this module is gone: stopping "
                "before the next write; the maintenance lock %s stays as it is until its TTL or a "
                "release" % (self.chain[-1][0], self.lock.desc), lock_holder=self.holder)

    def _ours(self, view, doing):
        """The Lease view when it names this run; LockLost otherwise."""
        if view is not None and view["holder"] == self.holder:
            return view
        now_held = view["holder"] if view else None
        raise LockLost(
            "the maintenance lock %s is no longer this run's (%s): it is %s; stopping before %s" % (
                self.lock.desc, self.holder,
                "held by %s" % locks.describe_holder(view) if now_held else "released",
                doing), lock_holder=self.holder, held_by=now_held)

    def _remember(self, view):
        self.ttl = int(view["lease_duration_seconds"] or 0) or 60
        self.me = dict(holder=self.holder, user=view.get("user"), host=view.get("host"),
                       job_id=view.get("job_id"), purpose=view.get("purpose") or "tensorfusion.ops")
        self.renew_every = max(5.0, self.ttl / 3.0)
        self.last_renew = self.clock()

    def _guarded(self, action):
        """Run one of the fence's own steps, unfenced (their Lease requests are not checked)."""
        if self.busy:
            return
        self.busy = True
        try:
            self._controller()
            action()
        finally:
            self.busy = False

    def _read_ours(self, doing):
        view = self._ours(locks.lease_view(self.lock.read()), doing)
        if self.me is None:
            self._remember(view)

    def _renew(self):
        if self.me is None:
            self._read_ours("renewing it")
        # One read and a write at its resourceVersion (LeaseLock.change), refused if not ours.
        self.lock.change(self._decide_renew, self.me, self.ttl, check_mode=False)
        self.last_renew = self.clock()

    def _decide_renew(self, view, _now):
        self._ours(view, "renewing it")
        return "renew", None

    def rolling(self, items):
        """Say in the Lease which rollouts this module now waits for ([] when it no longer
        does): a warden whose run is interrupted pauses those still under way (warden.py). One
        renewal of the Lease that carries them."""
        def mark():
            if self.me is None:
                self._read_ours("marking its rollouts")
            self.lock.change(self._decide_renew, dict(self.me, rolling=list(items)), self.ttl, check_mode=False)
            self.last_renew = self.clock()
        self._guarded(mark)

    def writing(self, pid=None, what=""):
        """Say in the Lease that process ``pid`` of this host now writes ``what`` (None: it no
        longer does): a warden whose run is interrupted waits for it to end before it releases
        the lock. One renewal of the Lease that carries it."""
        def mark():
            if self.me is None:
                self._read_ours("marking its write")
            found = _stat(pid) if pid else None
            writer = dict(pid=pid, started=found[1], host=socket.gethostname(), what=what) if found else {}
            self.lock.change(self._decide_renew, dict(self.me, writing=writer), self.ttl, check_mode=False)
            self.last_renew = self.clock()
        self._guarded(mark)

    def check(self, doing="the next write"):
        """Before a write: the controller runs and the Lease still names this run."""
        self._guarded(lambda: self._read_ours(doing))

    def heartbeat(self):
        """While waiting: stop when the controller is gone; renew the Lease when a third of its
        TTL has passed since the last renewal (a lost lock ends the wait)."""
        def beat():
            if self.last_renew is None or self.clock() - self.last_renew >= self.renew_every:
                self._renew()
        self._guarded(beat)

    def keep(self):
        """heartbeat's renewal whatever became of the controller: the warden of a run that is
        gone keeps its lock while a write of that run (the Lease's WRITING) finishes."""
        if self.last_renew is None or self.clock() - self.last_renew >= self.renew_every:
            self._renew()

    def seconds_to_next(self):
        """How long a wait may block before the next heartbeat is due (None: no limit)."""
        due = [CONTROLLER_CHECK_SECONDS] if self.chain else []
        if self.last_renew is not None:
            due.append(max(1.0, self.last_renew + self.renew_every - self.clock()))
        return min(due) if due else None
