"""Scripted fakes of the Kubernetes client for unit tests of the waiting logic (no cluster).

FakeKube is core/kube.py's Kube with its real ``call`` and ``heals`` (so API errors are typed and
retried as in a run) but without a connection: its dynamic client is a FakeDynamic that answers
the two calls a watcher makes, a list page (``request``) and a ``watch``, from scripts the test
gives. FakeTime is a clock the test moves, put in place of the ``time`` module of the code under
test so that backoff pauses and resyncs cost no real time."""
import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import kube as kube_mod
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import retry


class FakeTime:
    """Stands in for the ``time`` module (monotonic, sleep) and is callable as a Deadline clock."""

    def __init__(self, start=1000.0):
        self.now = float(start)
        self.slept = []

    def __call__(self):
        return self.now

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds

    def advance(self, seconds):
        self.now += seconds


def patch_time(monkeypatch, clock, *modules):
    """Every module in ``modules`` (and core/retry.py, whose pauses a wait takes) reads ``clock``."""
    for module in (retry,) + tuple(modules):
        monkeypatch.setattr(module, "time", clock)


class Advance:
    """A watch-script item: moves the clock (time passing between events)."""

    def __init__(self, clock, seconds):
        self.clock, self.seconds = clock, seconds

    def __call__(self):
        self.clock.advance(self.seconds)


class FakeResource:
    def __init__(self, name, kind=None, namespaced=True, prefix="/api/v1"):
        self.name = name
        self.kind = kind or name.capitalize().rstrip("s")
        self.namespaced = namespaced
        self.prefix = prefix

    def path(self, namespace=None):
        if namespace and self.namespaced:
            return "%s/namespaces/%s/%s" % (self.prefix, namespace, self.name)
        return "%s/%s" % (self.prefix, self.name)


class _Response:
    def __init__(self, page):
        self.data = json.dumps(page)


class FakeDynamic:
    """``lists``: one entry per list request, (resourceVersion, [objects]) or an exception to raise.
    ``watches``: one entry per watch call: an exception raised by the call itself, or a sequence
    of events (dicts), exceptions (raised there: a dropped connection) and callables (run there,
    such as Advance). ``more_watches(kwargs)``: the script of any watch beyond ``watches``
    (without it an unscripted watch fails the test). ``serve(path, query)``: answers list requests
    from the test's own state instead of ``lists`` (a page as a dict)."""

    def __init__(self, lists=(), watches=(), more_watches=None, serve=None):
        self.serve = serve
        self.lists = list(lists)
        self.watches = list(watches)
        self.more_watches = more_watches
        self.list_calls = []
        self.watch_calls = []
        self.closed = 0  # streams the watcher closed (ran to their end or was done with)

    def request(self, method, path, query_params=None, header_params=None, serialize=True):
        self.list_calls.append({"method": method, "path": path, "query": dict(query_params or [])})
        if self.serve is not None:
            return _Response(self.serve(path, dict(query_params or [])))
        assert self.lists, "unscripted list request %s %s" % (method, path)
        item = self.lists.pop(0)
        if isinstance(item, BaseException):
            raise item
        version, items = item
        return _Response({"kind": "List", "metadata": {"resourceVersion": version}, "items": items})

    MAX_WATCHES = 1000  # a waiter that loops without end fails the test instead of hanging it

    def watch(self, resource, **kwargs):
        self.watch_calls.append(dict(kwargs, resource=resource.name))
        assert len(self.watch_calls) <= self.MAX_WATCHES, "watched %d times: a loop without end" % self.MAX_WATCHES
        if self.watches:
            script = self.watches.pop(0)
        else:
            assert self.more_watches is not None, "unscripted watch from %s" % kwargs.get("resource_version")
            script = self.more_watches(kwargs)
        if isinstance(script, BaseException):
            raise script
        return self._events(script)

    def _events(self, script):
        try:
            for item in script:
                if isinstance(item, BaseException):
                    raise item
                if callable(item):
                    item()
                    continue
                yield item
        finally:
            self.closed += 1


class FakeKube(kube_mod.Kube):
    """Kube's own call/heals over a FakeDynamic; ``resource(kind)`` answers FakeResources."""

    # pylint: disable=super-init-not-called
    def __init__(self, dynamic, clock=None, server="https://api.test:6443", resources=None):
        self.api_client = None
        self.server = server
        self._dynamic = dynamic
        self.requests = 0
        self.retry_deadline = None
        self.outages = retry.Outages(clock=clock) if clock is not None else retry.Outages()
        self.written = False
        self.writes = 0
        self.fence = None
        self.resources = dict(resources or {})

    def resource(self, kind, api_version=None, group=None):
        if kind not in self.resources:
            self.resources[kind] = FakeResource(kind.lower() + "s", kind)
        return self.resources[kind]

    def close(self):
        pass


def obj(name, version, namespace=None, **fields):
    """An object as the API server returns it (a dict), with a resourceVersion."""
    meta = {"name": name, "resourceVersion": str(version)}
    if namespace:
        meta["namespace"] = namespace
    out = {"metadata": meta}
    out.update(fields)
    return out


def event(kind, raw):
    return {"type": kind, "raw_object": raw}


def error_event(code, reason="", message=""):
    return event("ERROR", {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
                           "reason": reason, "message": message})
