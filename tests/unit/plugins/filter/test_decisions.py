"""plugins/filter/decisions.py: the decisions of runbook/decisions.py as filters."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.tensorfusion.ops.plugins.filter import decisions
from ansible_collections.tensorfusion.ops.plugins.filter.decisions import FilterModule


def test_every_filter_has_its_documentation():
    from pathlib import Path
    folder = Path(decisions.__file__).parent
    for name in FilterModule().filters():
        assert (folder / ("%s.yml" % name)).is_file(), name


def test_the_filters_give_the_decisions():
    assert decisions.run_deadline(None, 0, 60) == "1970-01-01T00:01:00Z"
    assert decisions.lock_renewal_due(None, 3600, 0) is True
    assert decisions.run_resumable([{"failed": True, "paused": ["hypervisor"]}]) is True
    assert decisions.change_unverified({"step": "verify"}, {"unreachable": True}) is True
    assert decisions.rbac_runbooks("upgrade") == ["upgrade", "rollback"]
    assert decisions.rollback_bundle("", "", {"snapshot": "s"}) == "s"
    assert decisions.nothing_to_roll_back("", {"snapshot": None}) is True
    assert decisions.rollout_step({"components": {}}, [], 1, 0)["done"] is True
    assert decisions.split_findings([{"severity": "blocking", "code": "A"}], ["A"]) == {
        "blocking": [], "warnings": [{"severity": "blocking", "code": "A"}],
        "findings": [{"severity": "blocking", "code": "A"}], "adopted": []}


def test_a_decision_s_refusal_is_a_filter_error():
    with pytest.raises(AnsibleFilterError, match="ISO 8601"):
        decisions.lock_renewal_due("soon", 3600, 0)
    with pytest.raises(AnsibleFilterError, match="rollout_step.*worker"):
        decisions.rollout_step({"components": {}}, ["worker"], 1, 0)
