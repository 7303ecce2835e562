"""changeplan/plan.py: batches and their schedule, digests, sealed plans and drift."""
import datetime

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import PlanRefused
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import plan as plans


NOW = datetime.datetime(2026, 12, 2, 10, 0, tzinfo=datetime.timezone.utc)


@pytest.mark.parametrize("total,pct,sizes", [
    (4, 100, [4]), (4, 50, [2, 2]), (4, 34, [2, 2, 0]), (10, 20, [2, 2, 2, 2, 2]),
    (2, 30, [1, 1, 0, 0]),  # the operator's docs: 2 nodes at 30 % give four completions
    (5, 30, [2, 2, 1, 0]), (0, 50, [0, 0])])
def test_batches_follow_the_operator_rule(total, pct, sizes):
    assert plans.batch_sizes(total, pct) == sizes
    assert sum(sizes) == total


def test_the_schedule_has_the_operator_gap_between_batches():
    # The operator does not wait for a batch's nodes to be Ready: the next batch starts one gap later.
    batches, seconds = plans.pool_schedule(4, 50, 1.0, 9.5)
    assert [(b["start"], b["end"], b["progress"]) for b in batches] == [(0.0, 9.5, 50), (3.0, 12.5, 100)]
    assert seconds == 12.5 + plans.OPERATOR_REACTION
    _batches, longer = plans.pool_schedule(4, 50, 30.0, 9.5)
    assert longer == 30.0 + 9.5 + plans.OPERATOR_REACTION  # batchInterval above the 3 s floor
    _batches, baked = plans.pool_schedule(4, 50, 1.0, 9.5, bake_seconds=20.0)
    assert baked == 20.0 + 9.5 + plans.OPERATOR_REACTION
    empty, seconds = plans.pool_schedule(4, 20, 1.0, 0.5)  # 4 nodes at 20 %: the fifth batch has none
    assert [b["nodes"] for b in empty] == [1, 1, 1, 1, 0] and seconds == 4 * 3.0 + plans.OPERATOR_REACTION
    assert plans.pool_schedule(0, 20, 1.0, 5.0) == ([], 0.0)


def test_node_seconds_takes_the_slowest_pod_and_has_a_default():
    assert plans.node_seconds([2.0, 7.5, None, 3.0]) == 7.5
    assert plans.node_seconds([None]) == plans.DEFAULT_NODE_SECONDS


def test_digests_are_salted_and_stable():
    salt = plans.new_salt()
    value = {"b": 1, "a": {"password": "hunter2"}}
    assert plans.digest(value, salt) == plans.digest({"a": {"password": "hunter2"}, "b": 1}, salt)
    assert plans.digest(value, salt) != plans.digest(value, plans.new_salt())
    assert "hunter2" not in plans.digest(value, salt)


def _sealed(**over):
    plan = dict({"kind": plans.KIND + "/host", "playbook": "upgrade", "host": "lab", "status": "planned",
                 "blocking": [], "created": "2026-12-02T09:00:00Z", "salt": "00" * 16,
                 "identity": {"cluster": {"uid": "u1"}}, "plan": {}}, **over)
    return plans.seal(plan)


def test_a_sealed_plan_passes_and_any_edit_is_refused():
    plan = _sealed()
    plans.check_sealed(plan, 7200, NOW, "upgrade", "lab")
    edited = dict(plan, identity={"cluster": {"uid": "u2"}})
    with pytest.raises(PlanRefused, match="altered"):
        plans.check_sealed(edited, 7200, NOW, "upgrade", "lab")


@pytest.mark.parametrize("over,args,match", [
    ({}, (1800, NOW, "upgrade", "lab"), "expired"),
    ({}, (7200, NOW, "rollback", "lab"), "for the upgrade runbook"),
    ({}, (7200, NOW, "upgrade", "other"), "for host lab"),
    ({"status": "blocked", "blocking": [{"message": "lock held"}]}, (7200, NOW, "upgrade", "lab"), "lock held"),
])
def test_a_plan_that_may_not_be_applied_is_refused(over, args, match):
    with pytest.raises(PlanRefused, match=match):
        plans.check_sealed(_sealed(**over), *args)


def test_drift_names_what_changed():
    recorded = {"cluster": {"uid": "u1"}, "objects": {"GPUPool/p": {"generation": 3, "settings": "pbkdf2-sha256:aa"},
                                                      "GPUPool/gone": {"generation": 1}}}
    live = {"cluster": {"uid": "u1"}, "objects": {"GPUPool/p": {"generation": 4, "settings": "pbkdf2-sha256:bb"},
                                                  "GPUPool/new": {"generation": 1}}}
    assert plans.drift(recorded, live) == [
        "objects.GPUPool/gone.generation: 1 -> absent", "objects.GPUPool/new.generation: absent -> 1",
        "objects.GPUPool/p.generation: 3 -> 4", "objects.GPUPool/p.settings: changed"]
    assert plans.drift(recorded, recorded) == []


def test_the_plan_file_keeps_one_plan_per_host(tmp_path):
    path = str(tmp_path / "sub" / "plan.json")
    plans.write_plan_file(path, "a", _sealed(host="a"))
    plans.write_plan_file(path, "b", _sealed(host="b"))
    plans.write_plan_file(path, "a", _sealed(host="a", created="2026-12-02T09:30:00Z"))
    import json
    import os
    doc = json.load(open(path))
    assert sorted(doc["hosts"]) == ["a", "b"] and doc["hosts"]["a"]["created"] == "2026-12-02T09:30:00Z"
    assert plans.plan_of(doc, "b")["host"] == "b"
    assert os.stat(path).st_mode & 0o777 == 0o600
    with pytest.raises(PlanRefused, match="no plan for host c"):
        plans.plan_of(doc, "c")
    with pytest.raises(PlanRefused, match="not a tensorfusion.ops plan"):
        plans.plan_of({"hosts": {}}, "a")
