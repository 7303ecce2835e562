"""The kubelet stand-in's pure parts (lab/kubelet.py: what it registers; lab/kwok_process.py: how
kwok is run), and the loop that keeps kwok running, with a kwok double."""
import threading
from datetime import datetime, timezone
from pathlib import Path

from lab import kubelet, kwok_process
from lab import kwok_stages as ks


def test_nodes_gpu_first_each_with_its_own_loopback_address():
    assert kubelet.node_names(2, 1) == ["tfops-gpu-0", "tfops-gpu-1", "tfops-cpu-0"]
    assert [kubelet.node_ip(i) for i in (0, 249, 250, 251)] == [
        "127.1.0.1", "127.1.0.250", "127.1.1.1", "127.1.1.2"]


def test_a_gpu_node_is_registered_with_gpu_labels_and_the_servers_version():
    node = kubelet.node_body("tfops-gpu-3", 3, "v1.35.4")
    labels = node["metadata"]["labels"]
    assert labels[ks.STAND_IN_LABEL] == "true" and labels["nvidia.com/gpu.present"] == "true"
    assert ks.DEAD_LABEL not in labels
    assert node["status"]["addresses"][0] == {"type": "InternalIP", "address": "127.1.0.4"}
    assert node["status"]["nodeInfo"]["kubeletVersion"] == "v1.35.4"
    assert "conditions" not in node["status"], "the Ready condition is kwok's to post"
    cpu = kubelet.node_body("tfops-cpu-0", 4, "v1.35.4")["metadata"]["labels"]
    assert "nvidia.com/gpu.present" not in cpu and cpu[ks.STAND_IN_LABEL] == "true"


def test_a_lease_is_held_in_the_nodes_name_and_owned_by_it():
    lease = kubelet.lease_body("tfops-gpu-0", "uid-1", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    assert lease["spec"] == {"holderIdentity": "tfops-gpu-0", "leaseDurationSeconds": 40,
                             "renewTime": "2026-01-02T03:04:05.000000Z"}
    assert lease["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
    assert lease["metadata"]["labels"] == {ks.STAND_IN_LABEL: "true"}


def test_the_dead_label_is_set_and_removed():
    assert kubelet.dead_label_patch(True) == {"metadata": {"labels": {ks.DEAD_LABEL: "true"}}}
    assert kubelet.dead_label_patch(False) == {"metadata": {"labels": {ks.DEAD_LABEL: None}}}


def test_kwok_runs_under_setpriv_when_there_is_one(monkeypatch):
    monkeypatch.setattr(kwok_process.shutil, "which", lambda name: "/usr/bin/setpriv")
    cmd = kwok_process.kwok_command(Path("/c/kwok"), Path("/s/kubeconfig"), Path("/s/stages"))
    assert cmd[:4] == ["/usr/bin/setpriv", "--pdeathsig", "TERM", "--"]
    assert f"--manage-nodes-with-label-selector={ks.MANAGED_NODES}" in cmd
    assert "--node-lease-duration-seconds=0" in cmd and f"--cidr={ks.POD_CIDR}" in cmd
    monkeypatch.setattr(kwok_process.shutil, "which", lambda name: None)
    assert kwok_process.kwok_command(Path("/c/kwok"), Path("/k"), Path("/s"))[0] == "/c/kwok"


class FakeKwok:
    """Starts and stops as the test says; ``exit_after`` polls of exited() it exits with 1."""

    def __init__(self):
        self.proc = None
        self.stages, self.started = "", 0.0
        self.starts, self.stops = [], 0
        self.rc = None
        self.log_file = Path("/nowhere/kwok.log")

    def start(self, stages):
        import time
        self.proc, self.stages, self.started, self.rc = object(), stages, time.monotonic(), None
        self.starts.append(stages)

    def stop(self):
        self.stops += 1

    def exited(self):
        return None if self.proc is None else self.rc

    def log_tail(self):
        return "kwok: the end"


def run_in_thread(sup):
    stop = threading.Event()
    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("rc", sup.run(stop)))
    thread.start()
    return stop, thread, result


def wait(predicate, timeout=5.0):
    import time
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "the supervisor did not get there"
        time.sleep(0.005)


def supervisor(kwok, **kw):
    opts = {"poll": 0.01, "startup_grace": 0.2, "backoff_first": 0.05, "backoff_max": 0.1}
    opts.update(kw)
    return kwok_process.Supervisor(kwok, **opts)


def test_kwok_is_restarted_only_when_the_stages_change_and_the_newest_counts():
    kwok = FakeKwok()
    sup = supervisor(kwok)
    sup.wanted.put("a")
    stop, thread, result = run_in_thread(sup)
    wait(lambda: kwok.starts == ["a"])
    sup.wanted.put("a")  # the same Stages: nothing to do
    for stages in ("b", "c"):  # two quick changes: one restart, with the newest
        sup.wanted.put(stages)
    wait(lambda: kwok.starts[-1] == "c")
    stop.set()
    thread.join(5)
    assert kwok.starts in (["a", "c"], ["a", "b", "c"]) and result["rc"] == 0
    assert kwok.stops >= len(kwok.starts), "stopped before each start and at the end"


def test_the_api_server_coming_back_restarts_kwok_with_the_same_stages():
    kwok = FakeKwok()
    sup = supervisor(kwok)
    sup.wanted.put("a")
    stop, thread, _ = run_in_thread(sup)
    wait(lambda: kwok.starts == ["a"])
    sup.api_back.set()
    wait(lambda: kwok.starts == ["a", "a"])
    assert not sup.api_back.is_set()
    stop.set()
    thread.join(5)


def test_kwok_failing_at_its_first_start_ends_the_stand_in():
    kwok = FakeKwok()
    sup = supervisor(kwok, startup_grace=30)
    sup.wanted.put("a")
    stop, thread, result = run_in_thread(sup)
    wait(lambda: kwok.starts)
    kwok.rc = 1
    thread.join(5)
    assert result["rc"] == 1 and kwok.starts == ["a"]


def test_kwok_dying_later_is_started_again_after_a_back_off():
    kwok = FakeKwok()
    sup = supervisor(kwok)
    sup.wanted.put("a")
    stop, thread, _ = run_in_thread(sup)
    wait(lambda: kwok.starts)
    import time
    time.sleep(0.3)  # past the start-up grace
    kwok.rc = 2
    wait(lambda: len(kwok.starts) == 2)
    kwok.rc = 2  # and again: later, with a longer back-off
    wait(lambda: len(kwok.starts) == 3)
    assert kwok.starts == ["a", "a", "a"]
    stop.set()
    thread.join(5)
    assert not thread.is_alive()
