"""The lab's add-on wiring without a cluster: start order and records, stop in reverse, a failing
add-on named in the error, health, API server restarts, and that the cluster core does not import
lab.tensorfusion (it registers itself as the add-on ``tensorfusion``)."""
import subprocess
import sys
from pathlib import Path

import pytest

from lab import addons
from lab.errors import AddonError, LabError


class Fake(addons.Addon):
    def __init__(self, name, calls, fail=None):
        self.name, self.calls, self.fail = name, calls, fail or set()

    def _do(self, what):
        self.calls.append(f"{what}:{self.name}")
        if what in self.fail:
            raise RuntimeError(f"{what} broke")

    def start(self, state):
        self._do("start")

    def stop(self, state):
        self._do("stop")

    def health(self, state):
        self.calls.append(f"health:{self.name}")
        if "health" in self.fail:
            raise LabError("its webhook exited")

    def api_server_restarted(self, state):
        self._do("restarted")


def test_add_ons_start_in_the_given_order_and_are_recorded_before_each_start():
    calls, saved = [], []
    state = {"processes": []}
    addons.start_all(state, [Fake("a", calls), Fake("b", calls)],
                     saved=lambda s: saved.append(list(s["addons"])))
    assert calls == ["start:a", "start:b"]
    assert state["addons"] == ["a", "b"]
    assert saved == [["a"], ["a"], ["a", "b"], ["a", "b"]]


def test_a_failing_start_names_its_add_on_and_starts_no_later_one():
    calls = []
    state = {"processes": []}
    with pytest.raises(AddonError, match=r"^add-on b failed to start: start broke") as err:
        addons.start_all(state, [Fake("a", calls), Fake("b", calls, {"start"}), Fake("c", calls)])
    assert err.value.addon == "b" and isinstance(err.value, LabError)
    assert isinstance(err.value.__cause__, RuntimeError)
    assert calls == ["start:a", "start:b"]
    assert state["addons"] == ["a", "b"], "the partly started one is recorded, so down stops it"


def test_an_add_on_given_twice_is_refused_before_anything_starts():
    calls = []
    with pytest.raises(AddonError, match="a: given more than once"):
        addons.start_all({"processes": []}, [Fake("a", calls), Fake("a", calls)])
    assert calls == []


def test_stop_goes_in_reverse_order_and_asks_every_add_on_even_after_a_failure():
    calls = []
    state = {"addons": ["a", "b", "c"]}
    with pytest.raises(AddonError) as err:
        addons.stop_all(state, [Fake("a", calls, {"stop"}), Fake("b", calls), Fake("c", calls, {"stop"})])
    assert calls == ["stop:c", "stop:b", "stop:a"]
    assert err.value.addon == "c"
    assert str(err.value) == "add-on c failed to stop: stop broke; add-on a failed to stop: stop broke"


def test_health_says_which_add_on_is_unwell():
    calls = []
    report = addons.health({}, [Fake("a", calls), Fake("b", calls, {"health"})])
    assert report == {"a": "ok", "b": "its webhook exited"}


def test_api_server_restart_reaches_add_ons_in_start_order_and_names_a_failing_one():
    calls = []
    addons.api_server_restarted({}, [Fake("a", calls), Fake("b", calls)])
    assert calls == ["restarted:a", "restarted:b"]
    with pytest.raises(AddonError, match="^add-on a failed to follow the API server restart"):
        addons.api_server_restarted({}, [Fake("a", [], {"restarted"}), Fake("b", [])])


def test_the_registry_builds_add_ons_by_name_and_an_unknown_name_is_an_error_naming_it(monkeypatch):
    monkeypatch.setattr(addons, "_REGISTRY", {})
    calls = []
    addons.register("x", lambda **opts: Fake("x", calls))
    assert [a.name for a in addons.resolve(["x", Fake("y", calls)])] == ["x", "y"]
    with pytest.raises(AddonError, match="add-on nope: not registered") as err:
        addons.create("nope")
    assert err.value.addon == "nope"
    # from a state record: registered ones are stopped, an unknown one is reported by status
    state = {"addons": ["x", "gone"]}
    assert [a.name for a in addons.for_state(state)] == ["x"]
    addons.stop_all(state)
    assert calls == ["stop:x"]
    assert addons.health(state) == {"gone": "unknown: not registered in this process", "x": "ok"}
    with pytest.raises(AddonError, match="add-on gone: not registered"):
        addons.api_server_restarted(state)


def test_tensorfusion_registers_itself_with_its_options():
    from lab import tensorfusion as tf
    addon = addons.create("tensorfusion", chart_version=tf.V2, namespace="gpu-operators")
    assert isinstance(addon, tf.TensorFusion) and addon.name == tf.ADDON == "tensorfusion"
    assert (addon.chart_version, addon.namespace) == (tf.V2, "gpu-operators")
    default = tf.addon()
    assert (default.chart_version, default.namespace) == (tf.V1, tf.NAMESPACE)


def test_tensorfusion_stops_only_its_own_processes_newest_first(monkeypatch):
    from lab import tensorfusion as tf
    stopped = []
    monkeypatch.setattr(tf.procs, "stop", lambda rec: stopped.append(rec["name"]))
    state = {"processes": [{"name": n} for n in ("etcd", "kube-apiserver", "tf-chart-repo",
                                                  "tf-webhook", "tf-operator")]}
    tf.addon().stop(state)
    assert stopped == ["tf-operator", "tf-webhook", "tf-chart-repo"]


def test_the_cluster_core_does_not_import_tensorfusion():
    repo = Path(__file__).resolve().parents[3]
    code = ("import sys, lab.cluster, lab.addons, lab.state, lab.errors, lab.install; "
            "print('lab.tensorfusion' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=repo, capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
