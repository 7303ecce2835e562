"""runbook/fleet.py: fleet_upgrade.yml's place in an AWX fleet workflow (#39) - a canary job, then
one job per wave, sliced over execution nodes - checked before the lock or any write."""
import pytest
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import fleet, inputs


# What AWX sets in a slice job of the sliced job template "TensorFusion fleet wave" (the slice's
# workflow job is named after its template), in a job of the fleet workflow, and in a plain job.
SLICE = {"job_template_name": "TensorFusion fleet wave", "job_launch_type": "workflow",
         "workflow_job_name": "TensorFusion fleet wave", "job_id": 12, "workflow_job_id": 11}


IN_WORKFLOW = dict(SLICE, workflow_job_name="TensorFusion fleet")


PLAIN = {"job_template_name": "TensorFusion fleet upgrade", "job_launch_type": "manual", "job_id": 9}


@pytest.mark.parametrize("value, expected", [
    (5, [5]), ("5", [5]), ("100%", ["100%"]), (" 50 % ", ["50%"]), ([1, "50%"], [1, "50%"]),
    ("1, 50%", [1, "50%"]), (["100%"], ["100%"]), ([1, 2, "100%"], [1, 2, "100%"])])
def test_serial_as_the_play_takes_it(value, expected):
    assert fleet.serial(value, "tfops_fleet_serial") == expected


@pytest.mark.parametrize("value, message", [
    (0, r"tfops_fleet_serial: 0 is neither a number of clusters \(1 or more\) nor a percentage"),
    ("0%", "tfops_fleet_serial: '0%' is not a percentage of 1%-100%"),
    ([1, "150%"], r"tfops_fleet_serial\[1\]: '150%' is not a percentage"),
    ("half", "tfops_fleet_serial: 'half' is neither"),
    ([], "tfops_fleet_serial: an empty list is no batch size"),
    (True, "tfops_fleet_serial: True is neither")])
def test_a_serial_the_play_cannot_take_is_refused(value, message):
    with pytest.raises(InvalidInput, match="^" + message):
        fleet.serial(value, "tfops_fleet_serial")


def test_one_batch_is_unset_or_all_of_them():
    assert fleet.one_batch(None) and fleet.one_batch(["100%"])
    assert not fleet.one_batch([1, "50%"]) and not fleet.one_batch([10]) and not fleet.one_batch(["50%"])


def test_a_slice_is_a_job_launched_by_a_workflow_named_after_its_own_template():
    assert fleet.slice_of(SLICE) == "TensorFusion fleet wave"
    assert fleet.slice_of(IN_WORKFLOW) is None  # a node of the fleet workflow itself, unsliced
    assert fleet.slice_of(PLAIN) is None and fleet.slice_of({}) is None and fleet.slice_of(None) is None
    assert fleet.slice_of(dict(SLICE, job_launch_type="manual")) is None


def test_the_whole_fleet_in_one_job_needs_nothing_but_not_to_be_sliced():
    assert fleet.problems(None, None, None, None, PLAIN) == []
    assert fleet.problems(None, [1, "50%"], None, None, IN_WORKFLOW) == []
    sliced, = fleet.problems(None, [1, "50%"], None, None, SLICE)
    assert sliced.startswith("tfops_fleet_wave: unset, and this job is one slice of the sliced job template "
                             "'TensorFusion fleet wave': each slice would run its own canary at once"), sliced


def test_the_canary_runs_as_one_job_in_one_batch():
    assert fleet.problems(0, None, None, None, IN_WORKFLOW) == []
    assert fleet.problems(0, ["100%"], None, None, IN_WORKFLOW) == []
    canary, = fleet.problems(0, None, None, None, SLICE)
    assert canary.startswith("tfops_fleet_wave: 0 is the canary, which runs as one job") and "job slice count to 1" in canary


def test_a_wave_has_no_waves_inside():
    serial, = fleet.problems(1, [1, "50%"], {"wave": 0}, None, SLICE)
    assert serial.startswith("tfops_fleet_serial: [1, '50%'] makes waves inside this job, which is wave 1"), serial
    assert fleet.problems(0, [2], None, None, IN_WORKFLOW)[0].startswith("tfops_fleet_serial: [2]")


def test_a_wave_starts_on_the_wave_before_it_passed_and_on_nothing_else():
    assert fleet.problems(1, None, {"wave": 0}, None, SLICE) == []  # sliced waves are the design
    assert fleet.problems(2, None, {"wave": 1}, None, IN_WORKFLOW) == []
    alone, = fleet.problems(1, None, None, None, PLAIN)
    assert alone == ("tfops_fleet_passed: wave 1 starts only after wave 0 passed, and no job before this one "
                     "handed on a wave that passed; run the waves as the fleet workflow's nodes, in order, each "
                     "on the success of the one before")
    skipped, = fleet.problems(2, None, {"wave": 0}, None, SLICE)
    assert "wave 2 starts only after wave 1 passed, and the last wave handed on as passed is 0" in skipped
    failed, = fleet.problems(2, None, {"wave": 1}, {"gpu-b": {"wave": 1, "status": "rolled_back"}}, SLICE)
    assert failed == ("tfops_fleet_failed: wave 2 does not start: a cluster of an earlier wave did not pass "
                      "(gpu-b: wave 1 rolled_back)")


@pytest.mark.parametrize("status", ["succeeded", "unchanged", "planned"])
def test_a_cluster_that_passed_hands_on_its_wave(status):
    assert fleet.outcome(status, 1, "gpu-a") == {"tfops_fleet_passed": {"wave": 1}}


@pytest.mark.parametrize("status", ["rolled_back", "rollback_failed", "resumable", "failed", "blocked", None])
def test_a_cluster_that_did_not_pass_hands_on_its_failure_under_a_key_no_slice_that_passed_sets(status):
    assert fleet.outcome(status, 1, "gpu-a") == {"tfops_fleet_failed": {"gpu-a": {"wave": 1, "status": status or "failed"}}}


def test_the_fleet_variables_are_fleet_upgrade_s_alone():
    fleet_names = set(v.name for v in inputs.variables("fleet_upgrade"))
    upgrade_names = set(v.name for v in inputs.variables("upgrade"))
    assert fleet_names - upgrade_names == {"tfops_fleet_serial", "tfops_fleet_wave", "tfops_fleet_passed",
                                           "tfops_fleet_failed"}


def problems(awx=None, **given):
    return inputs.check("fleet_upgrade", given, helm_on_path="/usr/bin/helm", awx=awx)[1]


def test_the_runbook_check_refuses_before_any_write_naming_the_variable():
    assert problems(PLAIN) == [] and problems(IN_WORKFLOW, tfops_fleet_wave=0) == []
    assert problems(SLICE, tfops_fleet_wave="1", tfops_fleet_passed={"wave": 0}) == []
    assert problems(SLICE)[0].startswith("tfops_fleet_wave: unset, and this job is one slice")
    assert problems(SLICE, tfops_fleet_wave=1, tfops_fleet_serial="1, 50%",
                    tfops_fleet_passed={"wave": 0})[0].startswith("tfops_fleet_serial: [1, '50%'] makes waves")
    # A refused variable is said once, without the rules that would read it.
    assert problems(SLICE, tfops_fleet_wave="second") == ["tfops_fleet_wave: 'second' is not a whole number (0 or more)"]
    assert problems(tfops_fleet_wave=1, tfops_fleet_passed=0) == [
        "tfops_fleet_passed: a number, not a mapping (for example {wave: 0})"]
    assert problems(tfops_fleet_wave=1, tfops_fleet_passed={"wave": 0, "x": 1})[0].startswith(
        "tfops_fleet_passed: a mapping with the one key wave")
    assert problems(tfops_fleet_failed={"h": "x"}) == [
        "tfops_fleet_failed.h: a string, not a mapping (for example {wave: 1, status: rolled_back})"]
    # The rules of upgrade.yml still apply to its fleet.
    assert problems(tfops_region="cn", tfops_chart_repo="")[0].startswith("tfops_region: cn needs values-cn.yaml")
    # Blank (AWX's answer to a question left empty) is unset.
    assert problems(SLICE, tfops_fleet_wave="")[0].startswith("tfops_fleet_wave: unset")
