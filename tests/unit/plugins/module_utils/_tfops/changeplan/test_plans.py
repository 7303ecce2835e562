"""changeplan/plans.py: digests, sealed plans and drift."""
import datetime

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import PlanRefused
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import plans


NOW = datetime.datetime(2026, 12, 2, 10, 0, tzinfo=datetime.timezone.utc)


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
