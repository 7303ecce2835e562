"""A lock that fences, with real ansible-playbook processes on the lab: two runs at once by one
user on one host are two holders (the second is refused); a module whose run lost its lock stops
before its next write; a module whose ansible-playbook was killed (kill -9) stops waiting and
renews nothing; a killed run's lock is taken over at once by the next run on its host."""
import os
import signal
import time
import uuid

import pytest
from kubernetes import client

from lab import tensorfusion as tf

from .ansible_runner import run_playbook, start_playbook
from .helpers import pool_progress_at_least, tfc, wait_for, wait_pool
from .settle import settle
from .test_gpupool_rollout import HV
from .test_maintenance_lock import read_lease


@pytest.fixture
def fenced_vars(lab, lock_ns):
    from conftest import COLLECTIONS_ROOT
    return {"lab_kubeconfig": lab["kubeconfig"], "fenced_lock_namespace": lock_ns,
            "fenced_lock_name": "lock-" + uuid.uuid4().hex[:6],
            "fenced_tasks_dir": str(COLLECTIONS_ROOT / "ansible_collections" / "tensorfusion" / "ops"
                                    / "playbooks" / "tasks")}


def holder_of(api_client, ns, name):
    lease = read_lease(api_client, ns, name)
    return lease.spec.holder_identity if lease else None


def force_release(lab, ns, name):
    run = run_playbook("maintenance_lock.yml", {"lock_kubeconfig": lab["kubeconfig"], "lock_namespace": ns,
                                                "lock_name": name, "lock_state": "released", "lock_force": True})
    assert run.rc == 0, run.stdout[-2000:]


def descendants(pid):
    """Every process below ``pid`` (from /proc), to find the worker and module of a run."""
    children = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/stat" % entry) as handle:
                    text = handle.read()
            except OSError:
                continue
            children.setdefault(int(text[text.rindex(")") + 2:].split()[1]), []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


def test_two_runs_at_once_by_one_user_are_two_holders_and_the_second_is_refused(lab, api_client, fenced_vars):
    ns, name = fenced_vars["fenced_lock_namespace"], fenced_vars["fenced_lock_name"]
    first = start_playbook("fenced.yml", dict(fenced_vars, fenced_hold=30))
    try:
        lease = wait_for(client.CoordinationV1Api(api_client).list_namespaced_lease,
                         lambda le: le.metadata.name == name and le.spec.holder_identity, timeout=60, namespace=ns)
        holder = lease.spec.holder_identity
        assert " pid=%d " % first.proc.pid in holder and " run=" in holder, holder
        rv = lease.metadata.resource_version
        second = run_playbook("fenced.yml", dict(fenced_vars, fenced_hold=1))
        assert second.rc != 0
        msg = second.task_results("Take (or renew) the maintenance lock")["msg"]
        assert "is held by %s" % holder in msg, msg
        assert read_lease(api_client, ns, name).metadata.resource_version == rv, "the second run wrote nothing"
    finally:
        run = first.finish(timeout=120)
    assert run.rc == 0, run.stdout[-2000:]
    force_release(lab, ns, name)


@pytest.fixture
def slow_rollout(api_client):
    """Hypervisor re-creation slowed down: a rollout of 10 % batches that lasts minutes."""
    tf.set_knobs(api_client, slowNodes="*=20", batchGapFloorSeconds=1)
    yield
    tf.set_knobs(api_client, slowNodes=None, batchGapFloorSeconds=None)
    settle(api_client)


def test_a_module_whose_run_lost_the_lock_stops_before_its_next_write(lab, api_client, fenced_vars, slow_rollout):
    ns, name = fenced_vars["fenced_lock_namespace"], fenced_vars["fenced_lock_name"]
    job = start_playbook("fenced.yml", dict(fenced_vars, fenced_ttl=15, fenced_image="%s:4.1.0" % HV))
    try:
        wait_pool(api_client, pool_progress_at_least(10), timeout=120)
        generation = tfc(api_client)["metadata"]["generation"]
        force_release(lab, ns, name)  # as a person clearing what they take for a dead run's lock
    finally:
        run = job.finish(timeout=120)  # renewal every 5 s (a third of the TTL) finds the loss
    assert run.rc != 0
    res = run.task_results("Rollout")
    assert "is no longer this run's" in res["msg"] and "released" in res["msg"], res["msg"]
    assert res["changed"] is True, "it wrote the pool's change before it lost the lock"
    assert tfc(api_client)["metadata"]["generation"] == generation, "nothing written after the loss"
    assert holder_of(api_client, ns, name) is None, "the lost lock was not renewed"


def test_a_module_whose_ansible_playbook_was_killed_stops_and_renews_nothing(
        lab, api_client, fenced_vars, slow_rollout):
    ns, name = fenced_vars["fenced_lock_namespace"], fenced_vars["fenced_lock_name"]
    # Without the lock's warden, which would release the Lease of the killed run (tested below).
    job = start_playbook("fenced.yml", dict(fenced_vars, fenced_ttl=30, fenced_image="%s:4.2.0" % HV,
                                            fenced_heartbeat=False))
    below = []
    try:
        wait_pool(api_client, pool_progress_at_least(10), timeout=120)
        below = descendants(job.proc.pid)
        # The worker is a fork of ansible-playbook (same command line) and runs the module in
        # itself (plugin_utils/in_process.py); as a module process it would be below the worker.
        module = below
        assert module, "the run's worker"
        os.kill(job.proc.pid, signal.SIGKILL)
        job.proc.wait(timeout=30)
        killed = time.monotonic()
        renewed = read_lease(api_client, ns, name).spec.renew_time
        # The orphan (the worker running the module, reparented) notices within the controller check
        # period (15 s) and stop; without the fence the module would wait for the whole rollout.
        while any(alive(p) for p in module) and time.monotonic() - killed < 60:
            time.sleep(1)
        assert not [p for p in module if alive(p)], \
            "the orphaned module still runs %.0f s after the kill" % (time.monotonic() - killed)
        assert read_lease(api_client, ns, name).spec.renew_time == renewed, "the orphan renewed nothing"
    finally:
        reap(job, below)
    force_release(lab, ns, name)


def test_a_killed_runs_lock_is_taken_over_at_once_by_the_next_run(lab, api_client, fenced_vars):
    """kill -9 of ansible-playbook while it holds the lock (TTL 3600 s) and no warden releases it
    (heartbeat off, or the warden killed too): the holder names its process on this host, which
    no longer runs, so a run started right after takes the lock over at once, with a warning,
    instead of being refused for an hour."""
    ns, name = fenced_vars["fenced_lock_namespace"], fenced_vars["fenced_lock_name"]
    first = start_playbook("fenced.yml", dict(fenced_vars, fenced_ttl=3600, fenced_hold=300, fenced_heartbeat=False))
    below = []
    try:
        lease = wait_for(client.CoordinationV1Api(api_client).list_namespaced_lease,
                         lambda le: le.metadata.name == name and le.spec.holder_identity, timeout=60, namespace=ns)
        holder = lease.spec.holder_identity
        process = (lease.metadata.annotations or {}).get("tensorfusion.ops/process") or ""
        assert process.startswith("pid=%d started=" % first.proc.pid), process
        below = descendants(first.proc.pid)
        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(timeout=30)
        again = run_playbook("fenced.yml", dict(fenced_vars, fenced_ttl=3600, fenced_hold=1, fenced_heartbeat=False))
        assert again.rc == 0, again.stdout[-2000:]
        taken = again.task_results("Take (or renew) the maintenance lock")
        assert taken["action"] == "take_over", taken
        assert [w for w in taken.get("warnings") or [] if "at once" in w and holder in w
                and "no longer running" in w], taken.get("warnings")
        assert holder_of(api_client, ns, name) == taken["holder"] != holder
    finally:
        reap(first, below)
    force_release(lab, ns, name)


def reap(job, below):
    """After a kill -9 test: end what is left of the run (the orphans, by their pids) and its
    pipes and results file (finish() would wait for the orphans that hold the pipes)."""
    for pid in [job.proc.pid] + below:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
    for stream in (job.proc.stdout, job.proc.stderr):
        stream.close()
    os.unlink(job.results_file)


def held_lease(api_client, ns, name, timeout=60):
    return wait_for(client.CoordinationV1Api(api_client).list_namespaced_lease,
                    lambda le: le.metadata.name == name and le.spec.holder_identity, timeout=timeout, namespace=ns)


def warden_of(run):
    return run.task_results("Take (or renew) the maintenance lock")["warden"]["pid"]


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "kill -9"])
def test_an_interrupted_runs_lock_is_released_by_its_warden_and_taken_from_anywhere(lab, api_client, fenced_vars, how):
    """#45: Ctrl-C, SIGTERM (an AWX job cancelled) or kill -9 of ansible-playbook while it holds the
    lock (TTL 3600 s): its warden, in a session of its own, releases the Lease within seconds and
    says why, and ends; a run of another holder, as from another host, takes the lock at once."""
    ns, name = fenced_vars["fenced_lock_namespace"], fenced_vars["fenced_lock_name"]
    first = start_playbook("fenced.yml", dict(fenced_vars, fenced_ttl=3600, fenced_hold=300))
    below = []
    try:
        lease = held_lease(api_client, ns, name)
        below = descendants(first.proc.pid)
        warden = warden_pid(ns, name)
        first.interrupt(how)
        first.proc.wait(timeout=30)
        stopped = time.monotonic()
        lease = wait_for(client.CoordinationV1Api(api_client).list_namespaced_lease,
                         lambda le: le.metadata.name == name and not le.spec.holder_identity, timeout=30, namespace=ns)
        annotations = lease.metadata.annotations or {}
        why = annotations.get("tensorfusion.ops/released-why", "")
        assert "pid %d" % first.proc.pid in why and "ended without releasing" in why, annotations
        while alive(warden) and time.monotonic() - stopped < 15:
            time.sleep(0.2)
        assert not alive(warden), "the warden still runs after releasing the lock"
        other = run_playbook("fenced.yml", dict(fenced_vars, fenced_ttl=3600, fenced_hold=1, fenced_heartbeat=False,
                                                fenced_holder="another-host-run"))
        assert other.rc == 0, other.stdout[-2000:]
        taken = other.task_results("Take (or renew) the maintenance lock")
        assert taken["action"] == "take", taken
        # It says that the run before it did not finish, and why (#45 item 2).
        warned, = taken["warnings"]
        assert "did not finish" in warned and "pid %d" % first.proc.pid in warned, warned
    finally:
        reap(first, below)
    force_release(lab, ns, name)


def test_the_warden_renews_a_short_lock_while_the_run_works_and_ends_with_it(lab, api_client, fenced_vars):
    """A run that holds a 6 s lock for 20 s between tasks keeps it (its warden renews it every
    2 s), another holder is refused meanwhile; the run's end (no release of its own in this
    playbook) is noticed and the lock released; the warden ends."""
    ns, name = fenced_vars["fenced_lock_namespace"], fenced_vars["fenced_lock_name"]
    job = start_playbook("fenced.yml", dict(fenced_vars, fenced_ttl=6, fenced_hold=20))
    lease = held_lease(api_client, ns, name)
    warden = warden_pid(ns, name)
    time.sleep(12)  # twice the TTL
    renewed = read_lease(api_client, ns, name)
    assert renewed.spec.holder_identity == lease.spec.holder_identity
    assert renewed.spec.renew_time > lease.spec.renew_time, "renewed while the run works"
    refused = run_playbook("fenced.yml", dict(fenced_vars, fenced_ttl=6, fenced_hold=1, fenced_heartbeat=False,
                                              fenced_holder="another-host-run"))
    assert refused.rc != 0 and "is held by" in refused.task_results("Take (or renew) the maintenance lock")["msg"]
    run = job.finish(timeout=120)
    assert run.rc == 0, run.stdout[-2000:]
    assert warden_of(run) == warden
    deadline = time.monotonic() + 15
    while (alive(warden) or holder_of(api_client, ns, name)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert holder_of(api_client, ns, name) is None and not alive(warden)


def warden_pid(ns, name):
    """The pid of the warden of the Lease ns/name, found by its command line (which names it)."""
    wanted, found = ("lease=%s/%s" % (ns, name)).encode(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/cmdline" % entry, "rb") as handle:
                    argv = handle.read().split(b"\0")
            except OSError:
                continue
            if b"tensorfusion.ops-lock-warden" in argv and wanted in argv:
                found.append(int(entry))
    assert len(found) == 1, "wardens of %s/%s: %s" % (ns, name, found)
    return found[0]


def test_a_warden_releases_the_lock_after_its_jobs_private_folder_is_gone(lab, api_client, fenced_vars, tmp_path):
    """As AWX's runner gives a job its credentials (K8S_AUTH_HOST, _API_KEY, _SSL_CA_CERT in the
    job's private folder, which goes when the job ends): the folder removed while the run holds
    the lock, then the run cancelled (SIGTERM); its warden still reaches the API server and
    releases the lock (it read the CA when it started), and leaves no file behind."""
    import shutil
    ns, name = fenced_vars["fenced_lock_namespace"], fenced_vars["fenced_lock_name"]
    private = tmp_path / "job-private"
    private.mkdir()
    shutil.copy(lab["state_dir"] + "/pki/ca.crt", private / "ca.crt")
    env = {"K8S_AUTH_HOST": lab["server"], "K8S_AUTH_API_KEY": lab["token"],
           "K8S_AUTH_SSL_CA_CERT": str(private / "ca.crt"), "TMPDIR": str(private)}
    first = start_playbook("fenced.yml", dict(fenced_vars, lab_kubeconfig=None, fenced_ttl=3600, fenced_hold=300),
                           env=env, clean_auth_env=True)
    below = []
    try:
        held_lease(api_client, ns, name)
        below = descendants(first.proc.pid)
        warden = warden_pid(ns, name)
        time.sleep(2)  # past the lock task: the run holds the lock
        shutil.rmtree(private)
        os.kill(first.proc.pid, signal.SIGTERM)
        first.proc.wait(timeout=30)
        lease = wait_for(client.CoordinationV1Api(api_client).list_namespaced_lease,
                         lambda le: le.metadata.name == name and not le.spec.holder_identity, timeout=30, namespace=ns)
        assert "ended without releasing" in (lease.metadata.annotations or {}).get("tensorfusion.ops/released-why", "")
        deadline = time.monotonic() + 15
        while alive(warden) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not alive(warden)
        assert not private.exists()
    finally:
        reap(first, below)
    force_release(lab, ns, name)
