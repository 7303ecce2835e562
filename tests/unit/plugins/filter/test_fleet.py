"""The fleet_outcome filter (filter/fleet.py): what one cluster of a fleet workflow's wave hands on
(#39)."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.tensorfusion.ops.plugins.filter.fleet import fleet_outcome


def test_the_filter_hands_on_nothing_outside_a_fleet_workflow():
    assert fleet_outcome("succeeded", None, "h") == {} and fleet_outcome("failed", "", "h") == {}
    assert fleet_outcome("succeeded", "2", "h") == {"tfops_fleet_passed": {"wave": 2}}
    with pytest.raises(AnsibleFilterError, match="tfops_fleet_wave: 'x' is not a whole number"):
        fleet_outcome("succeeded", "x", "h")
