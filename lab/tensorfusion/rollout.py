"""The per-component rolling-update state machine of the GPUPool controller
(docs/operator-behaviour.md 3.3), as pure functions: no API calls, no clock. The operator feeds
them what its cache holds and carries out the returned ``Decision``.

Reproduced on purpose, rough edges included: the first observation records the hash without
progress; progress moves in steps of ``batchPercentage``; a node in Pending means "recheck in 3 s"
with no status write, forever; an empty pool never syncs; ``maintenanceWindow`` and
``maxDuration`` are not read at all; a ``batchPercentage`` of 0 stalls the pool (upstream divides
by zero and the recovered panic stalls it the same way).
"""
import math
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Dict, List, Optional

COMPONENTS = ("hypervisor", "worker", "client")
PENDING_RECHECK_SECONDS = 3.0   # PendingRequeueDuration upstream
# Upstream requeues a pool at least this long after a completed batch (PendingRequeueDuration
# again), yet the next batch is due as soon as batchInterval has passed since the batch's
# whole-second stamp: any event of the pool wakes it earlier, its own status write included.
BATCH_REQUEUE_SECONDS = 3.0
# The lab's floor under every gap (knob batchGapFloorSeconds): 0 is upstream's timing; the
# double's default of 3 s keeps a campaign slow enough for tests to catch it between batches
# (docs/operator-behaviour.md, differences between the double and upstream).
DEFAULT_GAP_FLOOR_SECONDS = 3.0
DEFAULT_INTERVAL_SECONDS = 1.0
# An unparsable batch time fails the reconcile upstream (retried with back-off): the campaign
# stalls. The double retries it this often.
BAD_TIME_RETRY_SECONDS = 5.0


@dataclass(frozen=True)
class ComponentState:
    """What the pool carries for one component: status.componentStatus and two annotations."""
    hash: str = ""          # status.componentStatus.<c>
    progress: int = 0       # status.componentStatus.<c>UpdateProgress
    synced: bool = False    # status.componentStatus.<c>ConfigSynced
    in_progress: str = ""   # annotation tensor-fusion.ai/<c>-update-in-progress
    last_time: str = ""     # annotation tensor-fusion.ai/<c>-batch-update-last-time (RFC3339)


@dataclass(frozen=True)
class Policy:
    auto: bool = False           # autoUpdate<C>; absent means false
    percentage: int = 100        # batchPercentage
    interval: float = DEFAULT_INTERVAL_SECONDS  # batchInterval, parsed


@dataclass(frozen=True)
class Resources:
    """GetResourcesInfo: the pool's objects of this component."""
    total: int
    updated: int
    recheck: bool = False                               # e.g. any GPUNode Pending
    stale: List[str] = field(default_factory=list)      # out-of-date objects, oldest first


@dataclass(frozen=True)
class Decision:
    status: Optional[ComponentState] = None    # write these status fields (None: no status write)
    annotations: Optional[Dict[str, str]] = None  # write these annotations (None: none)
    update: List[str] = field(default_factory=list)  # objects to put into the batch now
    requeue_after: Optional[float] = None
    note: str = ""                              # what happened, for the operator's log
    # Written before everything else: a campaign's start (step 2's in-progress annotation), which
    # upstream writes with an update of its own even when the same reconcile then finishes it.
    started: Optional[Dict[str, str]] = None


def annotation_keys(component: str):
    return (f"tensor-fusion.ai/{component}-update-in-progress",
            f"tensor-fusion.ai/{component}-batch-update-last-time")


def rfc3339(now: float) -> str:
    """1 s precision, as metav1.Time marshals."""
    return datetime.fromtimestamp(int(now), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


_RFC3339 = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)")


def parse_rfc3339(text: str) -> Optional[float]:
    """Epoch seconds of an RFC 3339 time (``Z`` or an offset, fractions allowed, as Go's
    time.Parse takes it), or None."""
    match = _RFC3339.fullmatch(text) if isinstance(text, str) else None
    if not match:
        return None
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    try:
        base = datetime.fromisoformat(match.group(1) + zone).timestamp()
    except ValueError:
        return None
    return base + (float("0" + match.group(2)) if match.group(2) else 0.0)


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text, fallback: float = DEFAULT_INTERVAL_SECONDS) -> float:
    """Go's time.ParseDuration for the forms people write; invalid values fall back to 1 s,
    as ``getBatchUpdatePolicy`` does upstream."""
    if not isinstance(text, str) or not text:
        return fallback
    body = text[1:] if text[0] in "+-" else text
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    for match in _DURATION.finditer(body):
        if match.start() != pos:
            return fallback
        total += float(match.group(1)) * _UNIT[match.group(2)]
        pos = match.end()
    if pos != len(body) or pos == 0:
        return fallback
    return -total if text[0] == "-" else total


def policy_from_pool(pool_spec: dict, component: str) -> Policy:
    """Read the rolling policy like ``getBatchUpdatePolicy``/``isAutoUpdateEnable``: a missing
    policy object means auto off, 100 %, 1 s (the CRD defaults apply only when it is present)."""
    pol = ((pool_spec or {}).get("nodeManagerConfig") or {}).get("nodePoolRollingUpdatePolicy")
    if not isinstance(pol, dict):
        return Policy()
    flag = f"autoUpdate{component.capitalize()}"
    pct = pol.get("batchPercentage")
    return Policy(auto=bool(pol.get(flag)),
                  percentage=100 if pct is None else int(pct),
                  interval=parse_duration(pol.get("batchInterval")))


def desired_updated_delta(total: int, updated: int, pct: int, progress: int):
    """``calculateDesiredUpdatedDelta``: returns (delta, progress, batch index). Raises
    ZeroDivisionError for pct 0 exactly where upstream panics."""
    batch = math.ceil(pct * total / 100)
    idx = progress // pct
    desired = min((idx + 1) * batch, total)
    delta = desired - updated
    while delta < 0:  # objects already current (recreated, new nodes): fast-forward
        progress = min(progress + pct, 100)
        idx = progress // pct
        desired = min((idx + 1) * batch, total)
        delta = desired - updated
    return delta, progress, idx


def manage_update(cur: ComponentState, new_hash: str, policy: Policy, res: Resources,
                  now: float, gap_floor: float = DEFAULT_GAP_FLOOR_SECONDS,
                  recheck_after: float = PENDING_RECHECK_SECONDS) -> Decision:
    """One reconcile of one component (``ManageUpdate``). ``res`` is only looked at from step 5 on,
    exactly where upstream lists the objects. ``gap_floor``: the lab's floor under the gap
    between batches (0: upstream's, where only batchInterval counts)."""
    gap = max(policy.interval, gap_floor)
    changed = cur.hash != new_hash
    annotations = None
    # 1. First observation, or auto off: record the new hash, reset progress, stop there.
    if changed and (cur.hash == "" or not policy.auto):
        return Decision(status=ComponentState(new_hash, 0, False, cur.in_progress, cur.last_time),
                        note="component configuration changed")
    if changed:
        # 2. A new campaign (also mid-rollout: restarts at batch 0 with the newest hash). The
        # status hash is only written later, at step 7 or 8: a recheck or an empty pool leaves
        # the old hash showing while the in-progress annotation has the new one.
        annotations = {"in_progress": new_hash, "last_time": ""}
        state = ComponentState(new_hash, 0, False, new_hash, "")
    elif not policy.auto:
        return Decision(note="auto update off")                              # 3. frozen
    elif cur.in_progress != new_hash and cur.synced:
        return Decision(note="steady")                                       # 4. synced
    elif cur.in_progress != new_hash:
        annotations = {"in_progress": new_hash, "last_time": ""}             # 4. resume
        state = replace(cur, in_progress=new_hash, last_time="")
    else:
        state = cur
        last = parse_rfc3339(cur.last_time) if cur.last_time else None
        if cur.last_time and last is None:                                   # 4. bad stamp
            return Decision(requeue_after=BAD_TIME_RETRY_SECONDS,
                            note="batch-update-last-time is no RFC 3339 time: stalled")
        if last is not None and now < last + gap:                           # 4. batch gap
            return Decision(requeue_after=last + gap - now, note="waiting for batch interval")
    # 5. Objects of the component.
    if res.recheck:
        return Decision(annotations=annotations, requeue_after=recheck_after,
                        note="pending objects: recheck")
    if res.total <= 0:
        return Decision(annotations=annotations, note="no objects: nothing to update")
    # 6.
    try:
        delta, progress, idx = desired_updated_delta(res.total, res.updated, policy.percentage,
                                                     state.progress)
    except ZeroDivisionError:
        return Decision(annotations=annotations, note="batchPercentage 0: division by zero, stalled")
    state = replace(state, progress=progress)
    if delta == 0:                                                           # 7. batch done
        progress = min((idx + 1) * policy.percentage, 100)
        if progress != 100:
            state = replace(state, progress=progress, last_time=rfc3339(now))
            return Decision(status=state,
                            annotations={"in_progress": state.in_progress,
                                         "last_time": state.last_time},
                            requeue_after=max(gap, BATCH_REQUEUE_SECONDS),
                            started=annotations, note=f"batch done, progress {progress}")
        state = replace(state, progress=100, synced=True, in_progress="", last_time="")
        return Decision(status=state, annotations={"in_progress": "", "last_time": ""},
                        started=annotations, note="all batch update has completed")
    # 8. Put the first ``delta`` out-of-date objects (oldest first) into the batch.
    return Decision(status=state, annotations=annotations, update=list(res.stale[:delta]),
                    note=f"update in progress: {delta} objects")


def component_status_patch(component: str, state: ComponentState) -> Dict:
    """status.componentStatus fields for a JSON merge patch: omitempty means a 0 or false field is
    removed (null), never written as 0/false."""
    return {component: state.hash or None,
            f"{component}ConfigSynced": True if state.synced else None,
            f"{component}UpdateProgress": state.progress or None}


def state_from_pool(pool: dict, component: str) -> ComponentState:
    cs = ((pool.get("status") or {}).get("componentStatus") or {})
    ann = (pool.get("metadata") or {}).get("annotations") or {}
    k_prog, k_last = annotation_keys(component)
    return ComponentState(hash=cs.get(component) or "",
                          progress=int(cs.get(f"{component}UpdateProgress") or 0),
                          synced=bool(cs.get(f"{component}ConfigSynced")),
                          in_progress=ann.get(k_prog) or "", last_time=ann.get(k_last) or "")
