# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Change plans (pure, stdlib): the identity a check-mode run records of what it planned from,
the plan document with its checksum and expiry, and the
comparison an apply makes of a saved plan with the cluster before it writes anything.

Digests of anything that may hold a secret (Helm values, the runbook's inputs, pool settings
with Pod templates) are salted and slow (PBKDF2, a fresh salt per plan), so a plan file never
gives a short secret away to a dictionary attack; the chart's digest is a plain sha256."""

from __future__ import annotations

import datetime
import hashlib
import json
import os

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import parse_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    PlanRefused,
)

SCHEMA = 1
KIND = "tensorfusion.ops/plan"
DIGEST_ROUNDS = 20000


def canonical(value):
    """One byte string per JSON value: sorted keys, no spaces (the digests' and checksum's input)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")


def new_salt():
    return os.urandom(16).hex()


def digest(value, salt):
    """A salted, slow digest of a value that may hold secrets."""
    if not salt:
        raise InvalidInput("a plan digest needs the plan's salt")
    return "pbkdf2-sha256:" + hashlib.pbkdf2_hmac("sha256", canonical(value), bytes.fromhex(salt),
                                                  DIGEST_ROUNDS).hex()


def plain_digest(value):
    """The sha256 of a value that holds no secret (a chart's files)."""
    return "sha256:" + hashlib.sha256(canonical(value)).hexdigest()


def checksum(plan):
    """The checksum over everything of a plan but the checksum itself."""
    return "sha256:" + hashlib.sha256(canonical(dict((k, v) for k, v in plan.items() if k != "checksum"))).hexdigest()


def seal(plan):
    return dict(plan, checksum=checksum(plan))


# ---- the saved plan -----------------------------------------------------------------------------
def utc_text(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def document(plans):
    """A plan file: one plan per inventory host (a fleet's plan run writes one file)."""
    return {"kind": KIND, "schema": SCHEMA, "hosts": plans}


def merge_host(existing, host, plan):
    """The file's document with ``host``'s plan replaced (other hosts' plans kept)."""
    doc = existing if isinstance(existing, dict) and existing.get("kind") == KIND else document({})
    return document(dict(doc.get("hosts") or {}, **{host: plan}))


def plan_of(source, host, where="the plan"):
    """The plan of ``host`` from a plan document (a file's content, or set_stats' tfops_plan)."""
    if not isinstance(source, dict) or source.get("kind") != KIND:
        raise PlanRefused("%s is not a tensorfusion.ops plan (no kind %s)" % (where, KIND))
    if source.get("schema") != SCHEMA:
        raise PlanRefused("%s has schema %r; this collection reads schema %d" % (where, source.get("schema"), SCHEMA))
    plans = source.get("hosts") or {}
    if host not in plans:
        raise PlanRefused("%s holds no plan for host %s (it has: %s)" % (
            where, host, ", ".join(sorted(plans)) or "none"))
    return plans[host]


def check_sealed(plan, max_age_seconds, now, playbook, host):
    """Refuse a plan that was altered, is for another runbook or host, or is too old."""
    if not isinstance(plan, dict) or not plan.get("checksum"):
        raise PlanRefused("the plan has no checksum: it was not written by tensorfusion.ops")
    if plan["checksum"] != checksum(plan):
        raise PlanRefused("the plan was altered after it was made (its checksum does not match): make a new plan",
                          drift=["checksum"])
    if plan.get("status") != "planned":
        raise PlanRefused("the plan is %s, not planned: %s" % (plan.get("status"), "; ".join(
            b.get("message") or "" for b in plan.get("blocking") or []) or "make a new plan"))
    if plan.get("playbook") != playbook:
        raise PlanRefused("the plan is for the %s runbook, not %s" % (plan.get("playbook"), playbook))
    if plan.get("host") != host:
        raise PlanRefused("the plan is for host %s, not %s" % (plan.get("host"), host))
    created = parse_time(plan["created"])
    age = (now - created).total_seconds()
    if age > max_age_seconds:
        raise PlanRefused("the plan expired: made %s, %ds ago, and plans are good for %ds (plan_max_age); "
                          "make a new plan" % (plan["created"], age, max_age_seconds), drift=["age"])
    if age < -300:
        raise PlanRefused("the plan was made in the future (%s): the controllers' clocks disagree" % plan["created"])


def _flat(prefix, value, out):
    if isinstance(value, dict) and value:
        for key in sorted(value):
            _flat("%s.%s" % (prefix, key) if prefix else str(key), value[key], out)
    else:
        out[prefix] = value
    return out


def drift(recorded, live):
    """What differs between the identity a plan recorded and the live one, one line each
    (``GPUPool/tf-shared generation: 3 -> 4``). Only what the plan recorded is compared."""
    rec, now = _flat("", recorded or {}, {}), _flat("", live or {}, {})
    lines = []
    for key in sorted(set(rec) | set(now)):
        if key not in now and any(k.startswith(key + ".") for k in now):
            continue
        before, after = rec.get(key, "absent"), now.get(key, "absent")
        if before != after:
            if str(before).startswith("pbkdf2-") or str(after).startswith("pbkdf2-") or str(before).startswith("sha256:"):
                lines.append("%s: changed" % key)
            else:
                lines.append("%s: %s -> %s" % (key, before, after))
    return lines


def expires(created_text, max_age_seconds):
    return utc_text(parse_time(created_text) + datetime.timedelta(seconds=max_age_seconds))


def saved_plan(record, salt, identity, helm=None, max_age_seconds=86400):
    """The sealed plan of one host from a check-mode run's record and the identity it was made
    from (``helm``: what helm_release's plan_identity returned, checked by the chart step)."""
    ident = dict(identity or {})
    if helm:
        ident["helm"] = dict((k, helm.get(k)) for k in ("chart_digest", "values_digest"))
    created = record["ended"].split(".")[0].rstrip("Z") + "Z"
    plan = record["plan"]
    return seal({"kind": KIND + "/host", "playbook": record["playbook"], "host": record["host"],
                 "status": plan["status"], "blocking": plan["blocking"], "created": created,
                 "expires": expires(created, max_age_seconds), "salt": salt, "identity": ident,
                 "summary": record.get("summary"), "plan": plan})


def write_plan_file(path, host, plan):
    """Put ``host``'s plan into the plan file at ``path`` (0600), keeping other hosts' plans: the
    hosts of a fleet's plan run write one file, one at a time (an exclusive lock beside it)."""
    import fcntl  # posix: the runbooks run this module on the controller

    path = os.path.abspath(os.path.expanduser(path))
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    with open(path + ".lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path, encoding="utf-8") as handle:
                existing = json.load(handle)
        except (OSError, ValueError):
            existing = None
        doc = merge_host(existing, host, plan)
        tmp = "%s.tmp-%d" % (path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(doc, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.rename(tmp, path)
    return path
