"""The runbooks' flat variables into role input: pools, images, policy, survey text lists."""
import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.tensorfusion.ops.plugins.filter.runbook import pool_updates, survey_list


@pytest.mark.parametrize("value,expected", [
    (None, []), ([], []), (["a", "", None, "b"], ["a", "b"]), ("a, b\nc,", ["a", "b", "c"]), ("", [])])
def test_survey_list(value, expected):
    assert survey_list(value) == expected


def test_flat_images_apply_to_every_pool_and_turn_auto_update_on():
    out = pool_updates([], all_pools=["tf-a", "tf-b"], hypervisor_image="hv:2", batch_percentage="20")
    assert out == [{"pool": p, "components": {"hypervisor": {"image": "hv:2"}},
                    "rolling_update": {"batch_percentage": 20, "auto_update_hypervisor": True}}
                   for p in ("tf-a", "tf-b")]


def test_a_pool_of_its_own_wins_over_the_flat_defaults():
    out = pool_updates([{"name": "shared", "cluster": "tf", "components": {"worker": {"image": "w:2"}},
                         "rolling_update": {"auto_update_hypervisor": False, "batch_interval": "5s"}}],
                       hypervisor_image="hv:2", batch_interval="1s")
    assert out == [{"pool": "shared", "cluster": "tf",
                    "components": {"hypervisor": {"image": "hv:2"}, "worker": {"image": "w:2"}},
                    "rolling_update": {"batch_interval": "5s", "auto_update_hypervisor": False,
                                       "auto_update_worker": True}}]


def test_nothing_to_do_without_pools_or_images():
    assert pool_updates([], all_pools=["tf-a"]) == []
    assert pool_updates("shared") == [{"pool": "shared", "components": {}, "rolling_update": {}}]


@pytest.mark.parametrize("pools,kwargs", [
    ([{"cluster": "x"}], {}), ([{"name": "a", "images": {}}], {}),
    ([{"name": "a", "components": {"gpu": {}}}], {}), (["a"], {"batch_percentage": "many"})])
def test_bad_input_is_refused(pools, kwargs):
    with pytest.raises(AnsibleFilterError):
        pool_updates(pools, **kwargs)
