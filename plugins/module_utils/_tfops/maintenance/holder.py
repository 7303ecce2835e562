# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Whether the holder of the maintenance lock is provably gone.

A runbook's lock names the ``ansible-playbook`` process that holds it (its pid, the start time
of that process, the host's boot and the pid namespace, in the Lease's ``tensorfusion.ops/process``
annotation). A run on the same host, in the same boot and pid namespace, can then tell for sure
that the holder is gone: that pid no longer runs (or is a zombie), or it runs but started at
another time (the pid was reused). Such a lock is taken over at once; anywhere else nothing is
provable, and the lock's TTL decides.

The decision (``gone_reason``) is a pure function; reading /proc is kept to a few small readers."""

from __future__ import annotations

import os
import socket

PROC = "/proc"
FIELDS = ("pid", "started", "boot", "pidns")


# --- the recorded process (pure) ---------------------------------------------------------------

def format_process(process):
    """``pid=4242 started=123456 boot=<boot id> pidns=<pid namespace>``: the annotation's value."""
    return " ".join("%s=%s" % (key, process[key]) for key in FIELDS if process.get(key) not in (None, ""))


def parse_process(text):
    """The annotation's value as a dict (pid and started as numbers); None when it names no pid."""
    found = {}
    for part in str(text or "").split():
        key, sep, value = part.partition("=")
        if sep and key in FIELDS and value:
            found[key] = value
    try:
        found["pid"] = int(found["pid"])
        found["started"] = int(found["started"]) if "started" in found else None
    except (KeyError, ValueError):
        return None
    return found


def gone_reason(recorded, holder_host, here, start_now):
    """Why the holder recorded as ``recorded`` (parse_process) on ``holder_host`` is gone, or None
    when that cannot be proven. ``here``: this run's host, boot and pidns (local_facts);
    ``start_now``: the start time of the recorded pid as it runs here now (None: not running).

    Only a holder on this host, in this boot and this pid namespace can be judged: the same pid
    elsewhere is another process, and a host name alone can be shared (containers, copies)."""
    if not recorded or not holder_host or holder_host != here.get("host"):
        return None
    for key in ("boot", "pidns"):
        if not recorded.get(key) or recorded.get(key) != here.get(key):
            return None
    if start_now is None:
        return "its process (pid %d on %s) is no longer running" % (recorded["pid"], holder_host)
    if recorded.get("started") is not None and start_now != recorded["started"]:
        return "pid %d on %s is another process now (started at tick %d, the holder at tick %d)" % (
            recorded["pid"], holder_host, start_now, recorded["started"])
    return None


# --- this host (small readers of /proc) -----------------------------------------------------------

def _read(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


def _pid_namespace():
    try:
        return os.readlink(os.path.join(PROC, "self", "ns", "pid")).replace("pid:", "").strip("[]")
    except OSError:
        return None


def local_facts():
    """This host's name (as the lock's identity records it), boot id and pid namespace."""
    return {"host": socket.gethostname(), "boot": _read(os.path.join(PROC, "sys", "kernel", "random", "boot_id")),
            "pidns": _pid_namespace()}


def process_start(pid):
    """The start time (clock ticks after boot) of ``pid`` as it runs now; None when no such
    process runs (a zombie, killed and not yet reaped, runs no more)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.fence import parse_stat
    text = _read(os.path.join(PROC, str(int(pid)), "stat"))
    if not text:
        return None
    try:
        state = text[text.rindex(")") + 2:].split()[0]
        return None if state in ("Z", "X") else parse_stat(text)[1]
    except (ValueError, IndexError):
        return None


def controller_process(chain):
    """The recorded process of the ansible-playbook that runs this module (fence.controller_chain),
    or None outside one (then only the TTL can end the lock)."""
    if not chain:
        return None
    pid, _ppid, started = chain[-1]
    facts = local_facts()
    if not facts["boot"] or not facts["pidns"]:
        return None
    return {"pid": pid, "started": started, "boot": facts["boot"], "pidns": facts["pidns"]}


def gone_checker():
    """``gone(view) -> reason or None`` for lock.decide_acquire, judged on this host now."""
    here = local_facts()

    def gone(view):
        recorded = parse_process(view.get("process"))
        if not recorded:
            return None
        same_place = view.get("host") == here["host"] and recorded.get("boot") == here["boot"] \
            and recorded.get("pidns") == here["pidns"]
        return gone_reason(recorded, view.get("host"), here, process_start(recorded["pid"]) if same_place else None)
    return gone
