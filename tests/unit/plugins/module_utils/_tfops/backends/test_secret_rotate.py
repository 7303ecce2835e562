"""backends/secret_rotate.py's RotateTask without a cluster: when a step fails, what was done is undone in
reverse order and only what was done; a failed undo does not stop the others; the failure says
what was put back. The Secrets live in an in-memory store behind kube_fakes' FakeKube (the real
Kube.call types its errors); the consumers are recording fakes put in place of WorkloadConsumer.

RotateTask is built in one place, make_task(): its signature is RotateTask(ctx, params, helm)."""
import copy
import json

import pytest
from kubernetes.client.rest import ApiException

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    InvalidInput,
    RolloutFailed,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.module import Context
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import plan as secret_plan
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import refs as secretrefs
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import secret_rotate
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret.consumers import VerifyFailed
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends.secret_rotate import RotateTask, RotationFailed
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.decisions import secret_annotation

from ansible_collections.tensorfusion.ops.tests.unit.plugins.kube_fakes import FakeDynamic, FakeKube, FakeResource

NS = "apps"
BASE = "db-creds"
OLD_DATA = secretrefs.encoded_data(string_data={"password": "old-pw"})
NEW_DATA = secretrefs.encoded_data(string_data={"password": "new-pw"})
NEW = secretrefs.versioned_name(BASE, NEW_DATA, "Opaque")
BACKUP = secretrefs.versioned_name(BASE, OLD_DATA, "Opaque")


def make_task(kube, params, check_mode=False, deadline=None, helm=None):
    """The one place a RotateTask is built (adapt here when its signature changes)."""
    ctx = Context(kube=kube, check_mode=check_mode, deadline=deadline or Deadline(timeout=600))
    return RotateTask(ctx, params, helm)


# ---- the fakes ------------------------------------------------------------------------------------

class _Obj:
    """What the dynamic client returns: a ResourceInstance's to_dict()."""

    def __init__(self, body):
        self._body = copy.deepcopy(body)

    def to_dict(self):
        return copy.deepcopy(self._body)


def _api_exception(status, reason, message):
    exc = ApiException(status=status, reason=reason)
    exc.body = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": status,
                           "reason": reason, "message": message})
    return exc


class SecretStore(FakeResource):
    """The namespace's Secrets: the dynamic client's get/create/replace/delete, and their list pages.
    ``fail[(verb, name)]``: exceptions the next such calls raise, in order."""

    def __init__(self):
        super().__init__("secrets", "Secret")
        self.items = {}
        self.version = 100
        self.fail = {}
        self.writes = []

    def _check(self, verb, name):
        queue = self.fail.get((verb, name))
        if queue:
            raise queue.pop(0)

    def _stamp(self, body):
        self.version += 1
        meta = body.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.version)
        meta.setdefault("uid", "uid-%s" % meta["name"])
        meta.setdefault("creationTimestamp", "2026-12-05T09:00:%02dZ" % (self.version % 60))
        meta["namespace"] = NS
        return body

    def add(self, name, data, secret_type="Opaque", **extra):
        self.items[name] = self._stamp(dict({"apiVersion": "v1", "kind": "Secret", "type": secret_type,
                                             "metadata": {"name": name}, "data": dict(data)}, **extra))

    def get(self, name, namespace):
        self._check("get", name)
        if name not in self.items:
            raise _api_exception(404, "NotFound", 'secrets "%s" not found' % name)
        return _Obj(self.items[name])

    def create(self, body, namespace):
        name = body["metadata"]["name"]
        self._check("create", name)
        if name in self.items:
            raise _api_exception(409, "AlreadyExists", 'secrets "%s" already exists' % name)
        self.writes.append(("create", name))
        self.items[name] = self._stamp(copy.deepcopy(body))
        return _Obj(self.items[name])

    def replace(self, body, name, namespace):
        self._check("replace", name)
        self.writes.append(("replace", name))
        self.items[name] = self._stamp(copy.deepcopy(body))
        return _Obj(self.items[name])

    def delete(self, name, namespace):
        self._check("delete", name)
        self.writes.append(("delete", name))
        del self.items[name]

    def serve(self, path, query):
        """List pages: Secrets by label (metadata only, as asked), anything else empty."""
        items = []
        if path == self.path(NS):
            key, _sep, value = (query.get("labelSelector") or "").partition("=")
            items = [{"metadata": copy.deepcopy(s["metadata"])} for s in self.items.values()
                     if not key or (s["metadata"].get("labels") or {}).get(key) == value]
        return {"kind": "List", "metadata": {"resourceVersion": str(self.version)}, "items": items}


class World:
    """The consumers' side: what each fake consumer did, in order (``journal``), and the failures
    scripted for them: ``failures[(action, consumer name, nth call of that action)] = error``."""

    def __init__(self):
        self.journal = []
        self.failures = {}
        self.consumers = {}
        self.refs = {}  # consumer name -> the Secrets it references at the start (default: BASE)
        self.pods = {}  # consumer name -> its Pods (what a stuck put-back reports)
        self.wrote_then_failed = set()  # (action, consumer name, nth call): failed after its write


class FakeConsumer:
    """WorkloadConsumer's interface, recording every action in the World's journal."""

    world = None  # bound per test (see the world fixture)
    wrote = False

    @staticmethod
    def own_target(target):
        return target

    def pods(self, _target=None):
        self._do("pods")
        return self.world.pods.get(self.name, [])

    def __init__(self, kube, kind, name, namespace):
        self.kind, self.name, self.namespace = kind, name, namespace
        self.label = "%s %s/%s" % (kind, namespace, name)
        self.refs = set(self.world.refs.get(name, {BASE}))
        self.calls = {}
        self.world.consumers[name] = self

    def _do(self, action, *args, change=None):
        """Record the action; ``change`` is what it writes. A scripted failure raises before it,
        or after it for the calls in ``world.wrote_then_failed`` (a pool component's write, then
        its wait): ``wrote`` says which, as the real consumers do."""
        nth = self.calls[action] = self.calls.get(action, 0) + 1
        self.world.journal.append((action, self.name) + args)
        error = self.world.failures.get((action, self.name, nth))
        self.wrote = error is not None and (action, self.name, nth) in self.world.wrote_then_failed
        if change is not None and (error is None or self.wrote):
            change()
        if error is not None:
            raise error

    def describe(self):
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}

    def referenced(self, names):
        return [n for n in names if n in self.refs]

    def repoint(self, old, new, _deadline=None):
        had = old in self.refs

        def change():
            self.refs.discard(old)
            self.refs.add(new)
        self._do("repoint", old, new, change=change)
        return had

    def mark(self, secret_meta, _deadline=None):
        self._do("mark", secret_annotation(secret_meta)[1])
        return True

    def wait(self, _deadline, target):
        self._do("wait", target)

    def verify(self, target):
        self._do("verify", target)


@pytest.fixture
def world(monkeypatch):
    state = World()
    monkeypatch.setattr(secret_rotate, "WorkloadConsumer", type("BoundConsumer", (FakeConsumer,), {"world": state}))
    return state


@pytest.fixture
def store():
    secrets = SecretStore()
    secrets.add(BASE, OLD_DATA)
    return secrets


def kube_with(store):
    return FakeKube(FakeDynamic(serve=store.serve), resources={"Secret": store})


def params(strategy="versioned", consumers=("api", "worker", "cache"), **extra):
    out = {"name": BASE, "namespace": NS, "strategy": strategy, "string_data": {"password": "new-pw"},
           "data": None, "type": None, "consumers": [{"kind": "Deployment", "name": n} for n in consumers],
           "discover": False, "wait": True, "delete_old": False, "keep": 0, "stall_timeout": None}
    out.update(extra)
    return out


def label(name):
    return "Deployment %s/%s" % (NS, name)


def repoint(name, old, new):
    return [("repoint", name, old, new)]


def put_back(name):
    """The undo of a versioned repoint: point back at the old Secret, then wait until it runs so."""
    return [("repoint", name, NEW, BASE), ("wait", name, ("name", BASE))]


def run_failing(store):
    with pytest.raises(RotationFailed) as caught:
        make_task(kube_with(store), params()).run()
    return caught.value


# ---- versioned ------------------------------------------------------------------------------------

def test_versioned_success_undoes_nothing(world, store):
    task = make_task(kube_with(store), params())
    result = task.run()
    assert result["changed"] is True
    assert [a for a in world.journal if a[0] == "repoint"] == \
        repoint("api", BASE, NEW) + repoint("worker", BASE, NEW) + repoint("cache", BASE, NEW)
    assert not any(s["step"] == "restore" for s in result["steps"])
    assert [s["step"] for s in result["steps"]] == ["create"] + ["repoint"] * 3 + ["roll"] * 3 + ["verify"] * 3
    assert task.undo == []
    assert store.items[NEW]["data"] == NEW_DATA and store.items[BASE]["data"] == OLD_DATA


def test_a_failed_repoint_puts_back_the_earlier_ones_newest_first(world, store):
    world.failures[("repoint", "cache", 1)] = ApiError("update deployments/cache failed: conflict", status=409)
    failure = run_failing(store)
    assert world.journal == (repoint("api", BASE, NEW) + repoint("worker", BASE, NEW) + repoint("cache", BASE, NEW)
                             + put_back("worker") + put_back("api"))
    assert world.consumers["cache"].refs == {BASE}, "the failed step is not undone: it did not happen"
    assert failure.msg == (
        "secret_rotate failed at step repoint for Deployment apps/cache: update deployments/cache failed: "
        "conflict; put back: Deployment apps/worker points at db-creds again; "
        "Deployment apps/api points at db-creds again")
    details = failure.details
    assert details["failed_step"] == "repoint" and details["failed_consumer"] == label("cache")
    assert details["restored"] == ["Deployment apps/worker points at db-creds again",
                                   "Deployment apps/api points at db-creds again"]
    assert details["put_back"] == details["restored"] and details["not_put_back"] == []
    assert details["created"] == [NEW]
    assert details["modified"] == [label("api"), label("worker")]
    assert [(s["step"], s["status"], s.get("consumer")) for s in details["steps"]] == [
        ("create", "ok", None), ("repoint", "ok", label("api")), ("repoint", "ok", label("worker")),
        ("repoint", "failed", label("cache")), ("restore", "ok", None), ("restore", "ok", None)]
    assert store.items[BASE]["data"] == OLD_DATA
    assert ("delete", BASE) not in store.writes, "the old Secret is never deleted on a failure"


def test_a_failed_verify_puts_back_every_repoint_in_reverse(world, store):
    world.failures[("verify", "worker", 1)] = VerifyFailed("Deployment apps/worker: web-1 not Ready")
    failure = run_failing(store)
    forward = repoint("api", BASE, NEW) + repoint("worker", BASE, NEW) + repoint("cache", BASE, NEW)
    rolled = [("wait", n, ("name", NEW)) for n in ("api", "worker", "cache")]
    verified = [("verify", "api", ("name", NEW)), ("verify", "worker", ("name", NEW))]
    assert world.journal == forward + rolled + verified + put_back("cache") + put_back("worker") + put_back("api")
    assert all(c.refs == {BASE} for c in world.consumers.values())
    assert failure.details["failed_step"] == "verify"
    assert failure.details["restored"] == ["Deployment apps/%s points at db-creds again" % n
                                           for n in ("cache", "worker", "api")]


def test_a_roll_that_times_out_puts_back_every_repoint(world, store):
    world.failures[("wait", "api", 1)] = WaitTimeout("timed out waiting for Deployment apps/api")
    failure = run_failing(store)
    assert world.journal[3:] == [("wait", "api", ("name", NEW))] + put_back("cache") + put_back("worker") + \
        put_back("api")
    assert failure.details["failed_step"] == "roll" and failure.details["failed_consumer"] == label("api")


def test_the_first_repoint_failing_undoes_nothing(world, store):
    world.failures[("repoint", "api", 1)] = ApiError("update deployments/api failed: forbidden", status=403)
    failure = run_failing(store)
    assert world.journal == repoint("api", BASE, NEW)
    assert failure.details["restored"] == []
    # The new version was written: never "nothing had changed".
    assert failure.msg.endswith("; no consumer and no Secret in use had changed yet "
                                "(created, unreferenced, kept: %s)" % NEW)
    assert failure.details["created"] == [NEW], "the new version is kept (immutable and unreferenced)"
    assert NEW in store.items


def test_a_failed_create_touches_no_consumer(world, store):
    store.fail[("create", NEW)] = [_api_exception(403, "Forbidden", 'secrets is forbidden: User "ops" cannot create')]
    failure = run_failing(store)
    assert world.journal == []
    assert failure.details["failed_step"] == "create" and failure.details["failed_consumer"] is None
    assert failure.msg.startswith("secret_rotate failed at step create: forbidden: create secrets/%s" % NEW)
    assert failure.details["created"] == [] and NEW not in store.items


def test_a_failed_undo_does_not_stop_the_others(world, store):
    world.failures[("verify", "cache", 1)] = VerifyFailed("Deployment apps/cache: cache-0 not Ready")
    world.failures[("repoint", "worker", 2)] = ApiError("update deployments/worker failed: conflict", status=409)
    failure = run_failing(store)
    undo = world.journal[world.journal.index(("verify", "cache", ("name", NEW))) + 1:]
    # worker's put-back failed at its write: no wait for it; api is still put back after it
    assert undo == put_back("cache") + [("repoint", "worker", NEW, BASE)] + put_back("api")
    assert failure.details["restored"] == [
        "Deployment apps/cache points at db-creds again",
        "Deployment apps/worker points at db-creds again FAILED (update deployments/worker failed: conflict)",
        "Deployment apps/api points at db-creds again"]
    assert failure.details["put_back"] == ["Deployment apps/cache points at db-creds again",
                                           "Deployment apps/api points at db-creds again"]
    assert failure.details["not_put_back"] == ["Deployment apps/worker points at db-creds again"]
    restores = [s for s in failure.details["steps"] if s["step"] == "restore"]
    assert [s["status"] for s in restores] == ["ok", "failed", "ok"]
    assert restores[1]["error"] == "update deployments/worker failed: conflict"


def test_without_wait_the_undo_does_not_wait(world, store):
    world.failures[("repoint", "cache", 1)] = ApiError("update deployments/cache failed: conflict", status=409)
    with pytest.raises(RotationFailed):
        make_task(kube_with(store), params(wait=False)).run()
    assert world.journal[3:] == [("repoint", "worker", NEW, BASE), ("repoint", "api", NEW, BASE)]


def test_a_consumer_already_on_the_new_version_is_not_repointed_nor_put_back(world, store):
    world.refs["worker"] = {NEW}  # a rerun after a partial rotation
    labels, annotations = secret_plan.version_metadata(BASE, NEW_DATA, "Opaque")
    store.add(NEW, NEW_DATA, metadata={"name": NEW, "labels": labels, "annotations": annotations})
    world.failures[("verify", "cache", 1)] = VerifyFailed("Deployment apps/cache: cache-0 not Ready")
    failure = run_failing(store)
    assert [a for a in world.journal if a[0] == "repoint"] == (
        repoint("api", BASE, NEW) + repoint("cache", BASE, NEW)
        + [("repoint", "cache", NEW, BASE), ("repoint", "api", NEW, BASE)])
    assert world.consumers["worker"].refs == {NEW}
    assert failure.details["created"] == [], "the version existed already"


def test_an_unexpected_error_in_a_step_still_puts_back_what_was_done(world, store):
    world.failures[("repoint", "worker", 1)] = RuntimeError("unexpected")
    with pytest.raises(RotationFailed):
        make_task(kube_with(store), params()).run()
    assert world.journal[-2:] == put_back("api")


# ---- after the rotation: nothing is undone -----------------------------------------------------------

def test_a_failed_delete_of_the_old_version_undoes_nothing(world, store):
    store.fail[("delete", BASE)] = [_api_exception(403, "Forbidden", "cannot delete")]
    with pytest.raises(RotationFailed) as caught:
        make_task(kube_with(store), params(delete_old=True)).run()
    failure = caught.value
    assert failure.details["failed_step"] == "delete_old"
    assert failure.details["restored"] == []
    assert not any(a[0] == "repoint" and a[3] == BASE for a in world.journal), "verified: kept on the new one"
    assert all(c.refs == {NEW} for c in world.consumers.values())
    assert failure.details["modified"] == [label("api"), label("worker"), label("cache")]


def test_a_failed_delete_of_the_old_version_does_not_say_nothing_changed(world, store):
    store.fail[("delete", BASE)] = [_api_exception(403, "Forbidden", "cannot delete")]
    with pytest.raises(RotationFailed) as caught:
        make_task(kube_with(store), params(delete_old=True)).run()
    assert "nothing had changed yet" not in caught.value.msg


# ---- in place ---------------------------------------------------------------------------------------

def test_in_place_failed_restart_puts_the_old_content_back_and_restarts_on_it(world, store):
    world.failures[("mark", "worker", 1)] = ApiError("patch deployments/worker failed: conflict", status=409)
    with pytest.raises(RotationFailed) as caught:
        make_task(kube_with(store), params("in_place")).run()
    failure = caught.value
    assert store.writes == [("create", BACKUP), ("replace", BASE), ("replace", BASE)]
    assert store.items[BASE]["data"] == OLD_DATA, "the previous content is back"
    assert store.items[BACKUP]["data"] == OLD_DATA, "the backup copy is kept"
    # the store's resourceVersions: 101 the Secret as found, 102 the backup, 103 the update, 104 the restore
    new_version = "uid-%s:%s" % (BASE, 103)
    old_version = "uid-%s:%s" % (BASE, 104)
    assert store.items[BASE]["metadata"]["resourceVersion"] == "104"
    key = secret_annotation(store.items[BASE])[0]
    assert world.journal == [("mark", "api", new_version), ("mark", "worker", new_version)] + [
        item for name in ("api", "worker", "cache")
        for item in (("mark", name, old_version), ("wait", name, ("annotation", key, old_version, BASE)))]
    # The Secret and each consumer are put back one by one, each said on its own.
    assert failure.details["restored"] == ["Secret db-creds has its previous content again (copy in %s)" % BACKUP] + [
        "Deployment apps/%s restarted on the previous content" % n for n in ("api", "worker", "cache")]
    assert failure.details["created"] == [BACKUP]


def test_in_place_failed_update_undoes_nothing(world, store):
    store.fail[("replace", BASE)] = [_api_exception(422, "Invalid", "data: too long")]
    with pytest.raises(RotationFailed) as caught:
        make_task(kube_with(store), params("in_place")).run()
    assert world.journal == []
    assert store.writes == [("create", BACKUP)]
    assert store.items[BASE]["data"] == OLD_DATA
    assert caught.value.details["failed_step"] == "update" and caught.value.details["restored"] == []


def test_in_place_failed_verify_restores_content_once(world, store):
    world.failures[("verify", "cache", 1)] = VerifyFailed("Deployment apps/cache: cache-0 not Ready")
    with pytest.raises(RotationFailed) as caught:
        make_task(kube_with(store), params("in_place")).run()
    assert store.writes.count(("replace", BASE)) == 2
    assert store.items[BASE]["data"] == OLD_DATA
    assert len(caught.value.details["restored"]) == 4, "the content once, then each consumer"


# ---- a step that wrote, then failed; a put-back that cannot finish (#37 item 1) ----------------------

def _pod(name, secret, ready=True, annotations=None):
    return {"metadata": {"name": name, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "c"}], "imagePullSecrets": [{"name": secret}]},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_consumer_that_wrote_before_its_wait_failed_is_modified_and_put_back(world, store):
    """A pool component's repoint is its write and its wait in one call: when the wait fails,
    the write stands, so it is listed as modified and put back (not "nothing had changed")."""
    world.failures[("repoint", "api", 1)] = RolloutFailed(
        "rollout of GPUPool tf-shared cannot finish: its hypervisor Pods do not start: ...")
    world.wrote_then_failed.add(("repoint", "api", 1))
    failure = run_failing(store)
    assert world.journal == repoint("api", BASE, NEW) + put_back("api")
    assert world.consumers["api"].refs == {BASE}
    details = failure.details
    assert details["modified"] == [label("api")]
    assert details["restored"] == details["put_back"] == ["Deployment apps/api points at db-creds again"]
    assert details["not_put_back"] == [] and details["stuck"] == []
    assert [(s["step"], s["status"], s.get("changed")) for s in details["steps"]] == [
        ("create", "ok", None), ("repoint", "failed", True), ("restore", "ok", None)]
    assert "nothing had changed" not in failure.msg and "no consumer" not in failure.msg
    assert failure.msg.endswith("; put back: Deployment apps/api points at db-creds again")


def test_a_put_back_whose_rollout_cannot_finish_says_what_is_stuck_and_what_to_do(world, store):
    world.failures[("verify", "api", 1)] = VerifyFailed("Deployment apps/api: api-2 not Ready")
    world.failures[("wait", "api", 2)] = RolloutFailed(
        "Deployment apps/api cannot finish its rollout: its new Pods do not start: api-3 c: "
        "ImagePullBackOff (Back-off) for 30s", pods_not_ready=["api-3 c: ImagePullBackOff (Back-off) for 30s"])
    world.pods["api"] = [_pod("api-1", BASE), _pod("api-2", NEW), _pod("api-3", BASE, ready=False)]
    failure = run_failing(store)
    details = failure.details
    assert details["put_back"] == ["Deployment apps/%s points at db-creds again" % n for n in ("cache", "worker")]
    assert details["not_put_back"] == ["Deployment apps/api points at db-creds again"]
    assert details["restored"][-1].startswith(
        "Deployment apps/api points at db-creds again NOT FINISHED (written, but Deployment apps/api "
        "cannot finish its rollout")
    [stuck] = [s["stuck"] for s in details["steps"] if s.get("stuck")]
    assert stuck["pods_not_ready"] == ["api-3 c: ImagePullBackOff (Back-off) for 30s"]
    assert stuck["ready_on_rotated"] == ["api-2"], "the Ready Pod that still reads the new version"
    assert details["stuck"] == [
        "Deployment apps/api is stuck mid-rollout; to do: fix what keeps its new Pods from starting "
        "(api-3 c: ImagePullBackOff (Back-off) for 30s); its rollout finishes by itself, on the previous "
        "content, and nothing else is left to put back; until then Pods api-2 run on the rotated "
        "content (Secret %s): delete them if it must not be used" % NEW]
    assert "; STUCK: Deployment apps/api is stuck mid-rollout" in failure.msg
    assert world.consumers["api"].refs == {BASE}, "the reference is back: only the rollout is stuck"


def test_in_place_a_consumer_on_a_versioned_copy_is_refused_before_any_write(world, store):
    """#37 item 5: restarting a consumer that reads a versioned copy would never bring it the new
    content; it is refused, naming the copy, before the backup or the update."""
    labels, annotations = secret_plan.version_metadata(BASE, OLD_DATA, "Opaque")
    store.add(BACKUP, OLD_DATA, metadata={"name": BACKUP, "labels": labels, "annotations": annotations})
    world.refs["worker"] = {BACKUP}
    with pytest.raises(InvalidInput) as caught:
        make_task(kube_with(store), params("in_place")).run()
    assert caught.value.msg == (
        "consumer Deployment apps/worker does not reference Secret db-creds (it references %s, a "
        "version of it: rotate with strategy versioned, or point it at db-creds first): an in-place "
        "rotation would restart it without it ever reading the new content; nothing was written" % BACKUP)
    assert store.writes == [] and world.journal == []


def test_in_place_a_restart_on_the_previous_content_that_cannot_finish_is_stuck_not_unrestored(world, store):
    """The Secret's previous content is back (put back); the consumer whose restart on it cannot
    finish is not put back and is reported stuck - not the Secret."""
    world.failures[("wait", "worker", 1)] = WaitTimeout("timed out waiting for Deployment apps/worker")
    world.failures[("wait", "worker", 2)] = RolloutFailed(
        "Deployment apps/worker cannot finish its rollout: its new Pods do not start: worker-9 c: "
        "ImagePullBackOff (x) for 30s", pods_not_ready=["worker-9 c: ImagePullBackOff (x) for 30s"])
    world.pods["worker"] = [_pod("worker-1", BASE)]
    with pytest.raises(RotationFailed) as caught:
        make_task(kube_with(store), params("in_place")).run()
    details = caught.value.details
    assert store.items[BASE]["data"] == OLD_DATA
    assert details["put_back"] == ["Secret db-creds has its previous content again (copy in %s)" % BACKUP] + [
        "Deployment apps/%s restarted on the previous content" % n for n in ("api", "cache")]
    assert details["not_put_back"] == ["Deployment apps/worker restarted on the previous content"]
    assert len(details["stuck"]) == 1 and details["stuck"][0].startswith(
        "Deployment apps/worker is stuck mid-rollout; to do: fix what keeps its new Pods from starting "
        "(worker-9 c: ImagePullBackOff (x) for 30s)")
    assert details["modified"] == ["Secret db-creds"] + [label(n) for n in ("api", "worker", "cache")]
