"""gpupool/rollout_task.py's plan_change without a cluster: what each state (present, paused, resumed)
writes into a pool's specTemplate, which campaigns that starts, and the pause marker (the
components this collection paused, resumed by a later present run unless the task sets their flag
itself); a change to a component that does not roll is refused unless record_only names it. The
marker's text form on the TensorFusionCluster (gpupool/cluster.py) is tested at the end."""
import copy

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.rollout_task import plan_change


def template(hv=True, worker=True, client=False, hv_image="hv:1"):
    """A pool's specTemplate; an auto flag given as None is left out (the operator reads false)."""
    policy = {"batchPercentage": 50, "batchInterval": "10s"}
    for field, value in (("autoUpdateHypervisor", hv), ("autoUpdateWorker", worker),
                         ("autoUpdateClient", client)):
        if value is not None:
            policy[field] = value
    return {"componentConfig": {"hypervisor": {"image": hv_image, "portNumber": 8000},
                                "worker": {"image": "w:1"}, "client": {"image": "c:1"}},
            "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": policy}}


def params(state="present", components=None, rolling_update=None, record_only=None):
    """The task's params as run_rollout passes them (sub-options left out are pruned)."""
    return {"state": state, "components": components or {}, "rolling_update": rolling_update or {},
            "record_only": record_only or []}


def flags(spec):
    policy = rollout.policy_of(spec)
    return dict((comp, policy.get(field)) for comp, field in rollout.AUTO_FLAG.items())


# ---- present ----------------------------------------------------------------------------------

def test_present_applies_the_settings_and_names_the_campaigns():
    tpl = template()
    new, changed, marker = plan_change(params(components={"hypervisor": {"image": "hv:2"}}), tpl, [])
    assert new["componentConfig"]["hypervisor"]["image"] == "hv:2"
    assert changed == ["hypervisor"]
    assert marker == []
    assert flags(new) == flags(tpl)
    assert tpl["componentConfig"]["hypervisor"]["image"] == "hv:1", "the input is not modified"


def test_present_without_settings_changes_nothing():
    tpl = template()
    new, changed, marker = plan_change(params(), tpl, [])
    assert (new, changed, marker) == (tpl, [], [])


def test_present_policy_only_change_starts_no_campaign():
    new, changed, _marker = plan_change(params(rolling_update={"batch_percentage": 20}), template(), [])
    assert rollout.policy_of(new)["batchPercentage"] == 20
    assert changed == []


def test_present_resumes_what_this_collection_paused():
    paused = template(hv=False)  # paused by an earlier run (on_deadline: pause)
    new, changed, marker = plan_change(params(), paused, ["hypervisor"])
    assert flags(new)["hypervisor"] is True
    assert changed == [], "the flag is not hashed: resuming starts no new campaign"
    assert marker == []


def test_present_resumes_and_rolls_a_paused_component_it_changes():
    paused = template(hv=False)
    new, changed, marker = plan_change(params(components={"hypervisor": {"image": "hv:2"}}), paused,
                                       ["hypervisor"])
    assert flags(new)["hypervisor"] is True
    assert changed == ["hypervisor"]
    assert marker == []


def test_present_resumes_only_the_marked_components():
    # worker was turned off by someone else: not ours to turn on
    tpl = template(hv=False, worker=False, client=False)
    new, _changed, marker = plan_change(params(), tpl, ["hypervisor"])
    assert flags(new) == {"hypervisor": True, "worker": False, "client": False}
    assert marker == []


def test_present_with_the_tasks_own_flag_false_keeps_it_paused_and_ends_the_marker():
    paused = template(hv=False)
    new, changed, marker = plan_change(params(rolling_update={"auto_update_hypervisor": False}), paused,
                                       ["hypervisor"])
    assert flags(new)["hypervisor"] is False
    assert changed == []
    assert marker == [], "the task owns the flag now: no pause of ours remains"


def test_present_with_the_tasks_own_flag_true():
    new, _changed, marker = plan_change(params(rolling_update={"auto_update_worker": True}),
                                        template(worker=False), ["worker"])
    assert flags(new)["worker"] is True
    assert marker == []


def test_present_change_callback_replaces_the_component_settings_and_still_resumes():
    def change(tpl):
        new = copy.deepcopy(tpl)
        new["componentConfig"]["worker"]["image"] = "w:2"
        return new

    task = params(components={"hypervisor": {"image": "hv:9"}})  # ignored: change is given
    new, changed, marker = plan_change(task, template(hv=False), ["hypervisor"], change)
    assert new["componentConfig"]["worker"]["image"] == "w:2"
    assert new["componentConfig"]["hypervisor"]["image"] == "hv:1"
    assert changed == ["worker"]
    assert flags(new)["hypervisor"] is True
    assert marker == []


# ---- present: refuse_frozen and record_only ------------------------------------------------------

def test_present_refuses_a_change_to_a_component_that_does_not_roll():
    frozen = template(client=False)
    with pytest.raises(InvalidInput) as caught:
        plan_change(params(components={"client": {"image": "c:2"}}), frozen, [])
    assert caught.value.msg.startswith("client would change but autoUpdateClient is false")
    assert "rolling_update.auto_update_client: true" in caught.value.msg


def test_present_refuses_when_the_flag_is_absent():
    with pytest.raises(InvalidInput, match="hypervisor would change but autoUpdateHypervisor is false"):
        plan_change(params(components={"hypervisor": {"image": "hv:2"}}), template(hv=None), [])


def test_present_refuses_a_change_the_task_itself_freezes():
    with pytest.raises(InvalidInput, match="hypervisor would change"):
        plan_change(params(components={"hypervisor": {"image": "hv:2"}},
                           rolling_update={"auto_update_hypervisor": False}), template(), [])


def test_present_refuses_a_component_paused_by_someone_else():
    """Only the marker's components are resumed: a pause not of this collection stays."""
    with pytest.raises(InvalidInput, match="hypervisor would change"):
        plan_change(params(components={"hypervisor": {"image": "hv:2"}}), template(hv=False), [])


def test_record_only_writes_the_change_without_rolling_it():
    frozen = template(client=False)
    new, changed, marker = plan_change(params(components={"client": {"image": "c:2"}},
                                              record_only=["client"]), frozen, [])
    assert new["componentConfig"]["client"]["image"] == "c:2"
    assert changed == ["client"]
    assert flags(new)["client"] is False
    assert marker == []


def test_record_only_of_another_component_does_not_help():
    with pytest.raises(InvalidInput, match="^client would change"):
        plan_change(params(components={"client": {"image": "c:2"}}, record_only=["worker"]),
                    template(client=False), [])


def test_refusal_names_every_frozen_component():
    with pytest.raises(InvalidInput) as caught:
        plan_change(params(components={"hypervisor": {"port_number": 8001}}),  # moves hypervisor and worker
                    template(hv=False, worker=False), [])
    assert caught.value.msg.startswith("hypervisor, worker would change but autoUpdateHypervisor ")
    assert "autoUpdateHypervisor and autoUpdateWorker are false" in caught.value.msg
    assert "Set rolling_update.auto_update_hypervisor: true, rolling_update.auto_update_worker: true " \
        "in this task" in caught.value.msg


def test_refusal_of_two_frozen_components_reads_well():
    with pytest.raises(InvalidInput) as caught:
        plan_change(params(components={"hypervisor": {"port_number": 8001}}),
                    template(hv=False, worker=False), [])
    assert "autoUpdateHypervisor and autoUpdateWorker are false" in caught.value.msg


def test_record_only_for_one_of_two_frozen_components_still_refuses_the_other():
    with pytest.raises(InvalidInput, match="^worker would change but autoUpdateWorker is false"):
        plan_change(params(components={"hypervisor": {"port_number": 8001}}, record_only=["hypervisor"]),
                    template(hv=False, worker=False), [])


def test_a_resumed_component_is_not_frozen():
    """The marker's resume comes before the refusal: a change to a component of ours that was
    paused at a deadline goes through."""
    _new, changed, _marker = plan_change(params(components={"client": {"image": "c:2"}}),
                                         template(client=False), ["client"])
    assert changed == ["client"]


# ---- paused -----------------------------------------------------------------------------------

def test_paused_turns_every_flag_off_and_marks_only_what_was_rolling():
    tpl = template(hv=True, worker=True, client=False)
    new, changed, marker = plan_change(params("paused"), tpl, [])
    assert flags(new) == {"hypervisor": False, "worker": False, "client": False}
    assert changed == []
    assert marker == ["hypervisor", "worker"], "client was not auto-updating: not ours to resume"


def test_paused_named_components_only():
    tpl = template(hv=True, worker=True, client=True)
    new, _changed, marker = plan_change(params("paused", components={"worker": {}}), tpl, [])
    assert flags(new) == {"hypervisor": True, "worker": False, "client": True}
    assert marker == ["worker"]


def test_paused_keeps_the_earlier_marker():
    tpl = template(hv=True, worker=False, client=False)  # worker paused by an earlier run
    _new, _changed, marker = plan_change(params("paused", components={"hypervisor": {}}), tpl, ["worker"])
    assert marker == ["hypervisor", "worker"]


def test_paused_again_changes_nothing():
    tpl = template(hv=True, worker=True, client=False)
    first, _c, marker = plan_change(params("paused"), tpl, [])
    second, changed, marker2 = plan_change(params("paused"), first, marker)
    assert second == first and changed == [] and marker2 == marker == ["hypervisor", "worker"]


def test_paused_with_an_absent_flag_marks_nothing():
    new, _changed, marker = plan_change(params("paused", components={"hypervisor": {}}), template(hv=None), [])
    assert flags(new)["hypervisor"] is False
    assert marker == []


def test_paused_does_not_apply_component_settings():
    new, changed, _marker = plan_change(params("paused", components={"hypervisor": {"image": "hv:2"}}),
                                        template(), [])
    assert new["componentConfig"]["hypervisor"]["image"] == "hv:1"
    assert changed == []


# ---- resumed ----------------------------------------------------------------------------------

def test_resumed_turns_every_flag_on_and_clears_the_marker():
    new, changed, marker = plan_change(params("resumed"), template(False, False, False), ["hypervisor", "worker"])
    assert flags(new) == {"hypervisor": True, "worker": True, "client": True}
    assert changed == []
    assert marker == []


def test_resumed_named_components_leave_the_rest_marked():
    new, _changed, marker = plan_change(params("resumed", components={"worker": {}}),
                                        template(False, False, False), ["hypervisor", "worker"])
    assert flags(new) == {"hypervisor": False, "worker": True, "client": False}
    assert marker == ["hypervisor"]


def test_resumed_does_not_apply_component_settings():
    new, _changed, _marker = plan_change(params("resumed", components={"hypervisor": {"image": "hv:2"}}),
                                         template(hv=False), ["hypervisor"])
    assert new["componentConfig"]["hypervisor"]["image"] == "hv:1"


def test_pause_then_present_round_trip():
    """A window's pause, then the same task run again: back to rolling, marker gone."""
    tpl = template(hv=True, worker=True, client=False)
    paused, _c, marker = plan_change(params("paused"), tpl, [])
    task = params(components={"hypervisor": {"image": "hv:2"}})
    new, changed, after = plan_change(task, paused, marker)
    assert flags(new) == flags(tpl)
    assert changed == ["hypervisor"]
    assert after == []
