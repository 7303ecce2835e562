"""maintenance_lock end to end on the lab's API server: acquire, renew, a second acquirer fails
with who and since when, release rules, check and diff mode, stale takeover, two concurrent
ansible-playbook runs of which exactly one wins, and the optimistic-concurrency write itself."""
import threading
import time
import uuid

import pytest
from kubernetes import client

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import LockHeld
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import resolve_auth
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import Kube

from .ansible_runner import run_playbook
from .callback_plugins.tfops_test_hooks import CLOCK_SKEW, PAUSE_BEFORE_WRITE
from .helpers import service_account_token

TASK = "Change the lock"


@pytest.fixture
def lease_name():
    return "lock-" + uuid.uuid4().hex[:6]


def read_lease(api_client, ns, name):
    try:
        return client.CoordinationV1Api(api_client).read_namespaced_lease(name, ns)
    except client.rest.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def lock(lab, ns, name, job=None, args=(), pause=None, skew=None, **extra):
    env = {"JOB_ID": job} if job else {}
    env.update({"AWX_JOB_ID": "", "TOWER_JOB_ID": ""})
    if pause or skew:  # injected by the tests' callback plugin (the lock reads no environment)
        env["ANSIBLE_CALLBACKS_ENABLED"] = "tfops_results,tfops_test_hooks"
    if pause:
        env[PAUSE_BEFORE_WRITE] = str(pause)
    if skew:
        env[CLOCK_SKEW] = str(skew)
    extra_vars = {"lock_kubeconfig": lab["kubeconfig"], "lock_namespace": ns, "lock_name": name}
    extra_vars.update(("lock_" + k, v) for k, v in extra.items())
    run = run_playbook("maintenance_lock.yml", extra_vars, env=env, args=args)
    result = run.task_results(TASK)
    run.status = [r["status"] for r in run.results if r["task"] == TASK][-1]
    return run, result


def test_acquire_renew_conflict_and_release(lab, api_client, lock_ns, lease_name):
    run, first = lock(lab, lock_ns, lease_name, job="101", purpose="upgrade", ttl=600)
    assert run.rc == 0, run.stdout[-3000:]
    assert (first["changed"], first["action"]) == (True, "create")
    assert first["holder"].endswith(" job=101 purpose=upgrade")
    assert first["api_server"] == lab["server"]
    lease = read_lease(api_client, lock_ns, lease_name)
    assert lease.spec.holder_identity == first["holder"]
    assert lease.spec.lease_duration_seconds == 600
    assert lease.metadata.annotations["tensorfusion.ops/job-id"] == "101"
    assert lease.metadata.annotations["tensorfusion.ops/purpose"] == "upgrade"

    # The same holder again: a renewal that moves renewTime and keeps acquireTime.
    run, renew = lock(lab, lock_ns, lease_name, job="101", purpose="upgrade", ttl=600)
    assert run.rc == 0 and (renew["changed"], renew["action"]) == (True, "renew")
    assert renew["lease"]["acquire_time"] == first["lease"]["acquire_time"]
    assert renew["lease"]["renew_time"] > first["lease"]["renew_time"]

    # Another AWX job: fails at once, naming the holder and since when.
    started = time.monotonic()
    run, other = lock(lab, lock_ns, lease_name, job="202", purpose="upgrade")
    assert run.rc != 0 and run.status == "failed"
    assert other["error"] == "LockHeld"
    assert other["msg"] == "the maintenance lock %s/%s is held by %s since %s (last renewed %s, expires %s)" % (
        lock_ns, lease_name, first["holder"], first["lease"]["acquire_time"],
        renew["lease"]["renew_time"], renew["lease"]["expires"])
    assert other["holder"] == first["holder"]
    assert time.monotonic() - started < 30  # no waiting for the lock
    # A different purpose by the same job is another holder too.
    run, _res = lock(lab, lock_ns, lease_name, job="101", purpose="rotate")
    assert run.rc != 0

    # Releasing someone else's lock is refused and changes nothing.
    run, refused = lock(lab, lock_ns, lease_name, job="202", purpose="upgrade", state="released")
    assert run.rc != 0 and refused["error"] == "NotLockHolder"
    assert "refusing to release" in refused["msg"] and first["holder"] in refused["msg"]
    assert read_lease(api_client, lock_ns, lease_name).spec.holder_identity == first["holder"]

    # The holder releases: the Lease stays, with nobody holding it; a second release is a no-op.
    run, released = lock(lab, lock_ns, lease_name, job="101", purpose="upgrade", state="released")
    assert run.rc == 0 and (released["changed"], released["action"]) == (True, "release")
    lease = read_lease(api_client, lock_ns, lease_name)
    assert lease.spec.holder_identity is None
    assert lease.metadata.annotations["tensorfusion.ops/released-by"] == first["holder"]
    run, again = lock(lab, lock_ns, lease_name, job="101", purpose="upgrade", state="released")
    assert run.rc == 0 and (again["changed"], again["action"]) == (False, "none")

    # Now the other job gets it; the holder changed once.
    run, taken = lock(lab, lock_ns, lease_name, job="202", purpose="upgrade")
    assert run.rc == 0 and taken["action"] == "take"
    assert taken["lease"]["transitions"] == 1


def test_check_mode_writes_nothing_and_diff_shows_the_lease(lab, api_client, lock_ns, lease_name):
    run, res = lock(lab, lock_ns, lease_name, job="303", args=["--check", "--diff"])
    assert run.rc == 0, run.stdout[-3000:]
    assert (res["changed"], res["action"]) == (True, "create")
    assert read_lease(api_client, lock_ns, lease_name) is None
    assert "holderIdentity" in run.stdout and "job=303" in run.stdout  # the diff, as a user sees it
    run, res = lock(lab, lock_ns, lease_name, job="303")
    assert run.rc == 0 and res["action"] == "create"
    before = read_lease(api_client, lock_ns, lease_name).metadata.resource_version
    run, res = lock(lab, lock_ns, lease_name, job="303", state="released", args=["--check"])
    assert run.rc == 0 and (res["changed"], res["action"]) == (True, "release")
    assert read_lease(api_client, lock_ns, lease_name).metadata.resource_version == before
    # Check mode still fails where the real run would.
    run, res = lock(lab, lock_ns, lease_name, job="404", args=["--check"])
    assert run.rc != 0 and res["error"] == "LockHeld"


def test_stale_lock_is_taken_over_with_a_warning(lab, api_client, lock_ns, lease_name):
    run, first = lock(lab, lock_ns, lease_name, job="501", ttl=1)
    assert run.rc == 0
    time.sleep(1.5)
    run, res = lock(lab, lock_ns, lease_name, job="502", ttl=60)
    assert run.rc == 0, run.stdout[-3000:]
    assert (res["changed"], res["action"]) == (True, "take_over")
    assert res["previous"]["holder"] == first["holder"] and res["previous"]["stale"] is True
    warning = " ".join(res["warnings"])
    assert "took over the maintenance lock" in warning and first["holder"] in warning
    assert "[WARNING]" in run.stdout + run.stderr
    lease = read_lease(api_client, lock_ns, lease_name)
    assert lease.spec.holder_identity == res["holder"] and lease.spec.lease_transitions == 1


def test_lock_times_follow_the_api_servers_clock_not_the_hosts(lab, api_client, lock_ns, lease_name):
    """A host whose clock runs an hour ahead writes server times and cannot take over a live lock
    early; one that is right reports no offset."""
    run, first = lock(lab, lock_ns, lease_name, job="551", ttl=1800)
    assert run.rc == 0 and first["clock_offset_seconds"] == 0.0
    run, ahead = lock(lab, lock_ns, lease_name, job="552", skew=3600, ttl=1800)
    # With its own clock it would see the lock expired (renewed an hour ago, TTL 30 minutes).
    assert run.rc != 0 and ahead["error"] == "LockHeld", ahead
    assert ahead["clock_offset_seconds"] == pytest.approx(-3600, abs=2)
    run, renewed = lock(lab, lock_ns, lease_name, job="551", skew=-5000, ttl=1800)
    assert run.rc == 0 and renewed["action"] == "renew"
    assert "this host's clock is 5000 s behind the API server's" in " ".join(renewed["warnings"])
    written = read_lease(api_client, lock_ns, lease_name).spec.renew_time
    assert abs((written - locks.utcnow()).total_seconds()) < 10  # the server's time, not the host's


def test_force_release_of_another_holders_lock(lab, api_client, lock_ns, lease_name):
    run, _first = lock(lab, lock_ns, lease_name, job="601")
    run, res = lock(lab, lock_ns, lease_name, job="602", state="released", force=True)
    assert run.rc == 0 and res["action"] == "force_release"
    assert "job=601" in " ".join(res["warnings"])
    assert read_lease(api_client, lock_ns, lease_name).spec.holder_identity is None


def test_missing_namespace_is_a_clear_error(lab):
    run, res = lock(lab, "no-such-namespace-x", "l", job="701")
    assert run.rc != 0
    assert res["msg"].startswith("create leases/l in no-such-namespace-x failed")
    assert 'namespaces "no-such-namespace-x" not found' in res["msg"]


def race(lab, ns, name, jobs, pause=None):
    """Run one playbook per job at the same moment; {job: (run, result)}."""
    start_at = time.time() + 8  # every playbook is loaded and waiting by then
    outcomes = {}

    def contender(job):
        outcomes[job] = lock(lab, ns, name, job=job, start_at=start_at, pause=pause)

    threads = [threading.Thread(target=contender, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return outcomes


def one_winner(api_client, ns, name, outcomes):
    winners = [job for job, (run, _res) in outcomes.items() if run.rc == 0]
    losers = [job for job, (run, _res) in outcomes.items() if run.rc != 0]
    assert len(winners) == 1, {j: r.stdout[-1500:] for j, (r, _x) in outcomes.items()}
    win = outcomes[winners[0]][1]
    for job in losers:
        lose = outcomes[job][1]
        assert lose["error"] == "LockHeld" and lose["holder"] == win["holder"], lose
    assert read_lease(api_client, ns, name).spec.holder_identity == win["holder"]
    return win, [outcomes[job][1] for job in losers]


def test_two_concurrent_playbooks_exactly_one_wins(lab, api_client, lock_ns):
    for round_no in range(2):
        name = "race-%d-%s" % (round_no, uuid.uuid4().hex[:4])
        one_winner(api_client, lock_ns, name, race(lab, lock_ns, name, ("801", "802")))


def test_concurrent_playbooks_that_read_the_same_lease_cannot_both_win(lab, api_client, lock_ns):
    """Both runs read before either writes (a test-only pause between read and write makes sure
    of it): one write fails on the server, and that run reads again and fails with the winner."""
    # Both see no Lease: both create, the API server refuses the second (AlreadyExists).
    name = "race-new-" + uuid.uuid4().hex[:4]
    win, (lose,) = one_winner(api_client, lock_ns, name, race(lab, lock_ns, name, ("811", "812"), pause=2))
    assert (win["conflicts"], lose["conflicts"]) == (0, 1)
    # Both see the same stale Lease: both take it over, the second replace carries a stale
    # resourceVersion and is refused (Conflict).
    name = "race-stale-" + uuid.uuid4().hex[:4]
    run, _res = lock(lab, lock_ns, name, job="810", ttl=1)
    assert run.rc == 0
    time.sleep(1.5)
    win, (lose,) = one_winner(api_client, lock_ns, name, race(lab, lock_ns, name, ("813", "814"), pause=2))
    assert win["action"] == "take_over" and (win["conflicts"], lose["conflicts"]) == (0, 1)
    assert read_lease(api_client, lock_ns, name).spec.lease_transitions == 1


def test_optimistic_concurrency_on_the_real_api(lab, lock_ns, lease_name):
    """Both read the same Lease, both decide to write: the API server accepts only the first
    write; the second conflicts, reads again and finds the lock held."""
    kube_a = Kube(resolve_auth({"kubeconfig": lab["kubeconfig"]}, environ={}))
    kube_b = Kube(resolve_auth({"kubeconfig": lab["kubeconfig"]}, environ={}))
    me_a = locks.make_identity("upgrade", job="901")
    me_b = locks.make_identity("upgrade", job="902")
    lock_a = locks.LeaseLock(kube_a, lock_ns, lease_name)
    lock_b = locks.LeaseLock(kube_b, lock_ns, lease_name)
    try:
        # Both see no Lease: both would create; one create wins, the other gets AlreadyExists.
        now = locks.utcnow()
        assert lock_a.read() is None and lock_b.read() is None
        lock_a.write(None, locks.lease_after(None, "create", me_a, lock_ns, lease_name, now, 1))
        with pytest.raises(locks.Conflict):
            lock_b.write(None, locks.lease_after(None, "create", me_b, lock_ns, lease_name, now, 1))
        # Both see the same stale Lease: both would take it over; only one replace succeeds.
        time.sleep(1.2)
        seen_a, seen_b = lock_a.read(), lock_b.read()
        assert seen_a["metadata"]["resourceVersion"] == seen_b["metadata"]["resourceVersion"]
        now = locks.utcnow()
        assert locks.decide_acquire(locks.lease_view(seen_b, now), me_b["holder"], now)[0] == "take_over"
        assert locks.decide_acquire(locks.lease_view(seen_a, now), me_a["holder"], now)[0] == "renew"
        lock_b.write(seen_b, locks.lease_after(seen_b, "take_over", me_b, lock_ns, lease_name, now, 60))
        with pytest.raises(locks.Conflict):
            lock_a.write(seen_a, locks.lease_after(seen_a, "renew", me_a, lock_ns, lease_name, now, 60))
        # The loser's acquire() re-reads and fails with the winner's name.
        with pytest.raises(LockHeld, match="held by " + me_b["holder"]):
            lock_a.acquire(me_a, 60)
    finally:
        kube_a.close()
        kube_b.close()


def test_a_role_limited_to_get_and_update_on_the_one_lease_is_enough(lab, api_client, lock_ns, lease_name):
    """As documented: once the Lease exists (release keeps it), get and update on that one name
    suffice; without the Lease the create is denied with a message naming verb and resource."""
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    sa_name = "locker-" + lease_name
    core.create_namespaced_service_account(lock_ns, {"metadata": {"name": sa_name}})
    rbac.create_namespaced_role(lock_ns, {"metadata": {"name": sa_name}, "rules": [{
        "apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
        "resourceNames": [lease_name], "verbs": ["get", "update"]}]})
    rbac.create_namespaced_role_binding(lock_ns, {
        "metadata": {"name": sa_name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": sa_name},
        "subjects": [{"kind": "ServiceAccount", "name": sa_name, "namespace": lock_ns}]})
    token = service_account_token(api_client, lock_ns, sa_name, create=False)
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "sa",
        "clusters": [{"name": "lab", "cluster": {"server": lab["server"],
                                                 "certificate-authority": "%s/pki/ca.crt" % lab["state_dir"]}}],
        "users": [{"name": "sa", "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "lab", "user": "sa"}}]}
    sa_lab = dict(lab, kubeconfig=kubeconfig)
    run, res = lock(sa_lab, lock_ns, lease_name, job="1001")
    assert run.rc != 0 and res["error"] == "Forbidden"
    assert res["msg"].startswith("forbidden: create leases/%s in %s" % (lease_name, lock_ns))
    assert token not in run.stdout + run.stderr
    # An administrator creates the Lease once (take and give back); from then on the Role is enough.
    assert lock(lab, lock_ns, lease_name, job="1000")[0].rc == 0
    assert lock(lab, lock_ns, lease_name, job="1000", state="released")[0].rc == 0
    run, res = lock(sa_lab, lock_ns, lease_name, job="1001")
    assert run.rc == 0 and res["action"] == "take", run.stdout[-2000:]
    run, res = lock(sa_lab, lock_ns, lease_name, job="1001", state="released")
    assert run.rc == 0 and res["action"] == "release"


def test_window_and_lock_with_module_defaults_for_the_action_group(lab, api_client, lock_ns, lease_name):
    run = run_playbook("maintenance_group.yml", {"group_kubeconfig": lab["kubeconfig"],
                                                 "group_namespace": lock_ns, "group_lease": lease_name})
    assert run.rc == 0, run.stdout[-3000:]
    assert run.task_results("Check the window")["inside"] is True
    taken = run.task_results("Take the lock")
    assert taken["action"] == "create" and taken["api_server"] == lab["server"]
    assert run.task_results("Give the lock back")["action"] == "release"
    assert read_lease(api_client, lock_ns, lease_name).spec.holder_identity is None


def test_retry_timeout_rides_out_an_outage_and_without_it_the_task_fails_at_once(lab, api_client, lock_ns, lease_name):
    """kube-apiserver stopped for 15 s: the release with retry_timeout (as the runbooks give it)
    waits for the API server, releases and warns; without it, the task fails at once and says the
    API server cannot be reached, nothing retried."""
    from lab import cluster
    run, res = lock(lab, lock_ns, lease_name, state="acquired")
    assert run.rc == 0, res.get("msg")
    outage = threading.Thread(target=cluster.outage, args=(lab["state_dir"], 15))
    outage.start()
    try:
        time.sleep(1)  # the API server is down now
        started = time.monotonic()
        run, res = lock(lab, lock_ns, lease_name, state="released")
        failed_after = time.monotonic() - started
        assert run.rc != 0 and "cannot reach the API server" in res["msg"], res
        assert "could not be used for" not in run.stdout + run.stderr, "no retry without retry_timeout"
        assert failed_after < 14, "it did not wait for the API server"
        run, res = lock(lab, lock_ns, lease_name, state="released", retry_timeout=60)
    finally:
        outage.join()
    assert run.rc == 0, res.get("msg")
    assert "the API server could not be used for" in run.stdout + run.stderr
    assert read_lease(api_client, lock_ns, lease_name).spec.holder_identity is None
