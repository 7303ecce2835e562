"""The double's informer cache and work queue, in the manner of controller-runtime: watches fill the
cache, reconcilers read only the cache (no per-object GETs) and requeue keys with a delay."""
import heapq
import itertools
import threading
import time
from collections import OrderedDict
from typing import Dict, Optional

TOMBSTONES = 20000  # uids of deleted objects remembered (a uid never comes back)


def _rv(obj) -> int:
    try:
        return int(obj["metadata"]["resourceVersion"])
    except (KeyError, TypeError, ValueError):
        return 0


def _uid(obj):
    return ((obj or {}).get("metadata") or {}).get("uid")


class Store:
    """kind -> key -> object (plain dicts). Writes of our own go in at once (write-through), so a
    reconcile that follows its own write does not act on what it has just changed."""

    def __init__(self):
        self.lock = threading.Lock()
        self.data: Dict[str, Dict[str, dict]] = {}
        self.deleted = OrderedDict()

    def put(self, kind: str, key: str, obj: dict) -> Optional[dict]:
        """Returns the previous object, or None when ``obj`` is not newer than the cached one.

        A write-through copy can arrive after the watch's DELETED event (the response of the
        write that dropped the last finalizer races the watch stream): deleted uids are refused,
        or the cache would hold a ghost that blocks its owner's deletion for ever."""
        meta = obj.get("metadata") or {}
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self.remove(kind, key, obj)
            return None
        with self.lock:
            if meta.get("uid") and meta["uid"] in self.deleted:
                return None
            bucket = self.data.setdefault(kind, {})
            old = bucket.get(key)
            if old is not None and _rv(old) > _rv(obj):
                return None
            bucket[key] = obj
            return old if old is not None else {}

    def remove(self, kind: str, key: str, obj: Optional[dict] = None) -> None:
        """Forget ``key``; with ``obj`` (the deleted object) only when the cache holds that very
        object, not a newer one recreated under the same name."""
        uid = _uid(obj)
        with self.lock:
            bucket = self.data.get(kind, {})
            if uid:
                self.deleted[uid] = None
                while len(self.deleted) > TOMBSTONES:
                    self.deleted.popitem(last=False)
            held = bucket.get(key)
            if held is not None and (not uid or _uid(held) in (uid, None)):
                del bucket[key]

    def get(self, kind: str, key: str) -> Optional[dict]:
        with self.lock:
            return self.data.get(kind, {}).get(key)

    def items(self, kind: str):
        with self.lock:
            return list(self.data.get(kind, {}).items())

    def values(self, kind: str):
        with self.lock:
            return list(self.data.get(kind, {}).values())


class WorkQueue:
    """Delayed, de-duplicated keys; a key is never handed to two workers at once (a key added while
    it is being processed comes back once its worker is done)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.heap = []
        self.due: Dict[tuple, float] = {}
        self.processing = set()
        self.again: Dict[tuple, float] = {}
        self.seq = itertools.count()

    def add(self, key: tuple, delay: float = 0.0) -> None:
        when = time.monotonic() + max(0.0, delay)
        with self.cond:
            if key in self.processing:
                self.again[key] = min(when, self.again.get(key, when))
                return
            if key in self.due and self.due[key] <= when:
                return
            self.due[key] = when
            heapq.heappush(self.heap, (when, next(self.seq), key))
            self.cond.notify()

    def get(self) -> tuple:
        with self.cond:
            while True:
                now = time.monotonic()
                while self.heap and self.due.get(self.heap[0][2]) != self.heap[0][0]:
                    heapq.heappop(self.heap)  # superseded by an earlier add
                if self.heap and self.heap[0][0] <= now:
                    _, _, key = heapq.heappop(self.heap)
                    del self.due[key]
                    self.processing.add(key)
                    return key
                self.cond.wait(None if not self.heap else self.heap[0][0] - now)

    def done(self, key: tuple) -> None:
        with self.cond:
            self.processing.discard(key)
            when = self.again.pop(key, None)
        if when is not None:
            self.add(key, when - time.monotonic())

    def __len__(self):
        with self.cond:
            return len(self.due)
