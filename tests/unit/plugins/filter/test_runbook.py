"""The runbooks' flat variables into role input: pools, images, policy, survey text lists."""
import pytest
from ansible.errors import AnsibleFilterError

import datetime

from ansible_collections.tensorfusion.ops.plugins.filter.runbook import mark_step, pool_updates, survey_list


@pytest.mark.parametrize("value,expected", [
    (None, []), ([], []), (["a", "", None, "b"], ["a", "b"]), ("a, b\nc,", ["a", "b", "c"]), ("", [])])
def test_survey_list(value, expected):
    assert survey_list(value) == expected


def test_mark_step_appends_the_step_begun_now_in_utc_and_leaves_the_marks_as_they_were():
    before = datetime.datetime.now(datetime.timezone.utc)
    marks = [{"step": "lock", "at": "2026-12-03T02:00:00.000000Z"}]
    out = mark_step(marks, "window")
    assert marks == [{"step": "lock", "at": "2026-12-03T02:00:00.000000Z"}] and out[:1] == marks
    assert out[1]["step"] == "window"
    at = datetime.datetime.strptime(out[1]["at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
    assert before <= at <= datetime.datetime.now(datetime.timezone.utc)
    assert mark_step(None, "preflight")[0]["step"] == "preflight"


def _without_origin(items):
    return [dict((k, v) for k, v in i.items() if k != "origin") for i in items]


def test_each_component_says_who_asked_for_it():
    out = pool_updates([{"name": "tensor-fusion-shared", "components": {"worker": {"image": "wk:user"}}}],
                       hypervisor_image="hv:user", chart_changes=CHART)
    assert out[0]["origin"] == {"hypervisor": ["chart", "user"], "worker": ["chart", "user"]}
    assert pool_updates(["a"], hypervisor_image="hv:2")[0]["origin"] == {"hypervisor": ["user"]}
    assert pool_updates([], all_pools=["tensor-fusion-shared"], chart_changes=CHART)[0]["origin"] == {
        "hypervisor": ["chart"], "worker": ["chart"]}


def test_flat_images_apply_to_every_pool_and_turn_auto_update_on():
    out = pool_updates([], all_pools=["tf-a", "tf-b"], hypervisor_image="hv:2", batch_percentage="20")
    assert _without_origin(out) == [
        {"pool": p, "components": {"hypervisor": {"image": "hv:2"}},
         "rolling_update": {"batch_percentage": 20, "auto_update_hypervisor": True}}
        for p in ("tf-a", "tf-b")]


def test_a_pool_of_its_own_wins_over_the_flat_defaults():
    out = pool_updates([{"name": "shared", "cluster": "tf", "components": {"worker": {"image": "w:2"}},
                         "rolling_update": {"auto_update_hypervisor": False, "batch_interval": "5s"}}],
                       hypervisor_image="hv:2", batch_interval="1s")
    assert _without_origin(out) == [
        {"pool": "shared", "cluster": "tf",
         "components": {"hypervisor": {"image": "hv:2"}, "worker": {"image": "w:2"}},
         "rolling_update": {"batch_interval": "5s", "auto_update_hypervisor": False,
                            "auto_update_worker": True}}]


def test_nothing_to_do_without_pools_or_images():
    assert pool_updates([], all_pools=["tf-a"]) == []
    assert _without_origin(pool_updates("shared")) == [{"pool": "shared", "components": {}, "rolling_update": {}}]


@pytest.mark.parametrize("pools,kwargs", [
    ([{"cluster": "x"}], {}), ([{"name": "a", "images": {}}], {}),
    ([{"name": "a", "components": {"gpu": {}}}], {}), (["a"], {"batch_percentage": "many"})])
def test_bad_input_is_refused(pools, kwargs):
    with pytest.raises(AnsibleFilterError):
        pool_updates(pools, **kwargs)


CHART = {"tensor-fusion": {"shared": {"hypervisor": {"image": "hv:chart"}, "worker": {
    "image": "wk:chart", "pod_template_changed": True}}, "big": {"worker": {"pod_template_changed": True}}}}


def test_chart_changes_become_pool_updates_under_the_users_settings():
    # Nothing asked by the user: the chart's pools alone, their components' flags on.
    assert _without_origin(pool_updates([], all_pools=["tensor-fusion-shared"], chart_changes=CHART)) == [{
        "pool": "tensor-fusion-shared", "cluster": "tensor-fusion",
        "components": {"hypervisor": {"image": "hv:chart"}, "worker": {"image": "wk:chart"}},
        "rolling_update": {"auto_update_hypervisor": True, "auto_update_worker": True}}]
    # The user's image wins for the same field; the chart's other changes still roll.
    out = pool_updates([], all_pools=["tensor-fusion-shared"], hypervisor_image="hv:user",
                       batch_percentage=50, chart_changes=CHART)
    assert _without_origin(out) == [{"pool": "tensor-fusion-shared", "components": {
        "hypervisor": {"image": "hv:user"}, "worker": {"image": "wk:chart"}},
        "rolling_update": {"batch_percentage": 50, "auto_update_hypervisor": True, "auto_update_worker": True}}]
    # A pool named by its entry name matches the chart's entry.
    out = pool_updates([{"name": "shared", "rolling_update": {"auto_update_worker": False}}], chart_changes=CHART)
    assert _without_origin(out) == [
        {"pool": "shared", "components": {"hypervisor": {"image": "hv:chart"}, "worker": {"image": "wk:chart"}},
         "rolling_update": {"auto_update_hypervisor": True, "auto_update_worker": False}}]
    assert pool_updates([], chart_changes={"tensor-fusion": {"big": {"worker": {"pod_template_changed": True}}}}) == []


def test_chart_changes_of_components_the_pool_does_not_roll_are_recorded_only():
    chart = {"tensor-fusion": {"shared": {"hypervisor": {"image": "hv:chart", "auto_update": True},
                                          "worker": {"image": "wk:chart", "auto_update": False}}}}
    [item] = pool_updates([], chart_changes=chart)
    assert item["components"] == {"hypervisor": {"image": "hv:chart"}, "worker": {"image": "wk:chart"}}
    assert item["record_only"] == ["worker"]
    assert item["rolling_update"] == {"auto_update_hypervisor": True}, "the worker's flag stays as it is"
    # What the user sets for that component rolls as usual.
    [item] = pool_updates([], all_pools=["tensor-fusion-shared"], worker_image="wk:user", chart_changes=chart)
    assert "record_only" not in item and item["rolling_update"]["auto_update_worker"] is True


def test_the_filters_load_without_the_kubernetes_client():
    # ansible-playbook loads a filter plugin afresh in every task's worker process: a filter that
    # imported the kubernetes client would cost each task that uses it about half a CPU-second.
    import os
    import subprocess
    import sys
    probe = ("import sys; import ansible_collections.tensorfusion.ops.plugins.filter.runbook; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('kubernetes', 'urllib3', 'yaml')))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                         env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)))
    assert out.stdout.strip() == "[]"
