"""bench part 8's fleet (bench/awx_fleet.py) as AWX slices it (tests/integration/awx_job.py)."""
import ast
import json
import re

from bench import awx_fleet
from tests.integration.awx_job import inventory_script, sliced


def _inventory(script):
    return json.loads(ast.literal_eval(re.search(r"print\((.*)\)", script).group(1)))


def test_the_canary_then_waves_of_four_two_on_each_node():
    names, groups = awx_fleet._layout(4)
    assert names == ["c0", "c1", "c2", "c3", "c4"]
    assert groups == {"tfops_fleet_wave_0": ["c0"], "tfops_fleet_wave_1": ["c1", "c2", "c3", "c4"]}
    slices = [sliced(names, k, 2) for k in (1, 2)]
    assert slices == [["c0", "c2", "c4"], ["c1", "c3"]]
    assert [len(set(s) & set(groups["tfops_fleet_wave_1"])) for s in slices] == [2, 2]
    assert awx_fleet._layout(8)[1]["tfops_fleet_wave_2"] == ["c5", "c6", "c7", "c8"]


def test_the_workflow_is_the_shipped_one_with_a_node_per_wave():
    wf = awx_fleet._workflow(2)
    nodes = wf["workflow_nodes"]
    assert [n["identifier"] for n in nodes] == ["canary", "wave-1", "wave-2"]
    assert [n.get("job_slice_count") for n in nodes] == [1, 2, 2]
    assert [n["extra_data"]["tfops_fleet_wave"] for n in nodes] == [0, 1, 2]
    assert nodes[0]["related"] == {"success_nodes": [{"identifier": "wave-1"}]} and nodes[2]["related"] == {}
    assert [n["identifier"] for n in awx_fleet._workflow(1)["workflow_nodes"]] == ["canary", "wave-1"]


def test_a_slice_s_inventory_keeps_its_hosts_and_lists_every_group():
    hosts = dict(("c%d" % i, {"x": i}) for i in range(5))
    groups = {"tfops_fleet_wave_0": ["c0"], "tfops_fleet_wave_1": ["c1", "c2"], "tfops_fleet_wave_2": ["c3", "c4"]}
    second = _inventory(inventory_script(hosts, groups, 2, 2))
    assert second["all"] == {"hosts": [], "children": sorted(groups)}
    assert second["tfops_fleet_wave_1"] == {"hosts": ["c1"]} and second["tfops_fleet_wave_2"] == {"hosts": ["c3"]}
    assert "tfops_fleet_wave_0" not in second and sorted(second["_meta"]["hostvars"]) == ["c1", "c3"]
    whole = _inventory(inventory_script(hosts))
    assert whole["all"] == {"hosts": sorted(hosts)} and len(whole["_meta"]["hostvars"]) == 5
