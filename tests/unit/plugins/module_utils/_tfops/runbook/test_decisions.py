"""runbook/decisions.py: what the runbooks and their roles decide between two module calls."""
import datetime

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import decisions

NOW = datetime.datetime(2026, 12, 6, 2, 0, 0, tzinfo=datetime.timezone.utc).timestamp()


def test_the_window_s_deadline_is_the_run_s():
    assert decisions.run_deadline("2026-12-06T03:55:00Z", NOW, 3600) == "2026-12-06T03:55:00Z"


@pytest.mark.parametrize("window", [None, "", False])
def test_without_a_window_the_run_ends_timeout_seconds_from_now_in_whole_seconds(window):
    assert decisions.run_deadline(window, NOW + 0.9, 3600) == "2026-12-06T03:00:00Z"
    assert decisions.run_deadline(window, str(NOW), "120") == "2026-12-06T02:02:00Z"
    assert decisions.run_deadline(window, 0, "90.0") == "1970-01-01T00:01:30Z"


@pytest.mark.parametrize("expires,due", [
    (None, True), ("", True),
    ("2026-12-06T02:30:01.000000Z", False),  # more than half of an hour left
    ("2026-12-06T02:30:00.000000Z", False),  # exactly half: not less
    ("2026-12-06T02:29:59.999000Z", True),
    ("2026-12-06T01:59:00.000000Z", True),  # already expired
])
def test_the_lock_is_renewed_when_less_than_half_its_ttl_is_left(expires, due):
    assert decisions.lock_renewal_due(expires, 3600, NOW) is due


def test_a_lease_end_that_is_no_time_is_refused():
    with pytest.raises(InvalidInput):
        decisions.lock_renewal_due("soon", 3600, NOW)


@pytest.mark.parametrize("results,expected", [
    (None, False), ([], False),
    ([{"changed": True}], False),
    ([{"failed": True, "msg": "stalled"}], False),
    ([{"failed": True, "gate_paused": ["hypervisor"]}], False),  # a failed gate rolls back
    ([{"changed": True}, {"failed": True, "paused": ["hypervisor"]}], True),
    ([{"failed": True, "paused": []}], True),  # a result that says paused, as the runbook read it
    ([{"failed": False, "paused": ["hypervisor"]}], False),
    (["not a result", {"skipped": True}], False),
])
def test_a_failed_run_is_resumable_when_a_pool_call_failed_where_it_paused_its_pool(results, expected):
    assert decisions.resumable(results) is expected


@pytest.mark.parametrize("error,info,acceptance,expected", [
    ({"step": "verify"}, {"failed": True, "unreachable": True}, None, True),
    ({"step": "verify"}, None, {"failed": True, "unreachable": True}, True),
    ({"step": "verify"}, {"skipped": True}, {"skipped": True}, False),
    ({"step": "verify"}, {"failed": True, "msg": "blocking"}, None, False),
    ({"step": "pools"}, {"unreachable": True}, None, False),
    ({}, None, None, False),
    (None, None, None, False),
])
def test_a_verify_that_could_not_reach_the_api_server_leaves_the_change_unverified(error, info, acceptance, expected):
    assert decisions.unverified(error, info, acceptance) is expected


@pytest.mark.parametrize("playbook,rollback,expected", [
    ("upgrade", True, ["upgrade", "rollback"]), ("upgrade", False, ["upgrade"]),
    ("rotate_secret", True, ["rotate"]), ("rollback", True, ["rollback"]), ("precheck", False, ["precheck"]),
])
def test_the_preflight_checks_the_rbac_of_what_the_runbook_may_do(playbook, rollback, expected):
    assert decisions.rbac_runbooks(playbook, rollback) == expected


@pytest.mark.parametrize("given,planned,handed,expected", [
    ("secret://ns/a", "secret://ns/b", {"snapshot": "secret://ns/c"}, "secret://ns/a"),
    ("", "secret://ns/b", {"snapshot": "secret://ns/c"}, "secret://ns/b"),
    ("", "", {"snapshot": "secret://ns/c"}, "secret://ns/c"),
    ("", None, {"snapshot": None}, ""),
    ("", "", {}, ""),
    ("", "", None, ""),
    ("", "", "not a run", ""),
])
def test_the_rollback_restores_the_bundle_given_planned_or_handed_on(given, planned, handed, expected):
    assert decisions.rollback_bundle(given, planned, handed) == expected


@pytest.mark.parametrize("given,handed,expected", [
    ("", {"snapshot": None, "status": "failed"}, True),
    ("", {}, True),
    ("", {"snapshot": "secret://ns/c"}, False),
    ("/tmp/bundle", {"snapshot": None}, False),
    ("", None, False),  # no workflow: the newest usable bundle
])
def test_a_workflow_s_upgrade_that_stopped_before_its_restore_point_leaves_nothing_to_roll_back(given, handed, expected):
    assert decisions.nothing_to_roll_back(given, handed) is expected


def _batch(**components):
    return {"components": dict((c, {"progress": p, "synced": s}) for c, (p, s) in components.items())}


def test_a_batch_reached_shows_its_line_and_sets_the_next_target():
    step = decisions.rollout_step(_batch(hypervisor=(20, False), worker=(30, False)), ["hypervisor", "worker"], 1, 0, False)
    assert step == {"progress": 20, "synced": False, "show": True, "shown": 20, "done": False, "target": 21}


def test_a_call_that_did_not_move_the_rollout_shows_nothing_and_waits_for_the_next_percentage():
    step = decisions.rollout_step(_batch(hypervisor=(20, False)), ["hypervisor"], 21, 20, False)
    assert (step["show"], step["shown"], step["done"], step["target"]) == (False, 20, False, 21)


def test_the_rollout_is_done_at_100_percent_synced_and_not_before_it_is_synced():
    assert decisions.rollout_step(_batch(hypervisor=(100, True)), ["hypervisor"], 81, 80, False)["done"] is True
    step = decisions.rollout_step(_batch(hypervisor=(100, False)), ["hypervisor"], 81, 80, False)
    assert (step["done"], step["target"], step["show"]) == (False, 100, True)


def test_a_call_that_waited_for_100_percent_ends_the_rollout():
    assert decisions.rollout_step(_batch(hypervisor=(100, False)), ["hypervisor"], 100, 100, False)["done"] is True


def test_nothing_to_roll_or_check_mode_is_done_at_once():
    step = decisions.rollout_step({"components": {}}, [], 1, 0, False)
    assert step == {"progress": 100, "synced": True, "show": False, "shown": 100, "done": True, "target": 100}
    assert decisions.rollout_step(_batch(hypervisor=(0, False)), ["hypervisor"], 1, 0, True)["done"] is True


def test_the_components_watched_are_those_of_the_whole_rollout_and_must_be_in_the_result():
    step = decisions.rollout_step(_batch(hypervisor=(50, True), client=(10, True)), ["hypervisor"], 41, 40, False)
    assert step["progress"] == 50  # the client is not rolled by this pool
    with pytest.raises(KeyError):
        decisions.rollout_step(_batch(hypervisor=(50, True)), ["hypervisor", "worker"], 41, 40, False)


def test_at_most_one_call_per_percentage_follows_the_first():
    """Each call that reaches its target raises the next one by at least one: from any target, the
    calls left reach 100 within 101 - target calls (the gpupool_update role's loop)."""
    for first in (1, 37, 100):
        target, calls = first, 0
        while True:
            calls += 1
            step = decisions.rollout_step(_batch(hypervisor=(target, False)), ["hypervisor"], target, target - 1, False)
            if step["done"]:
                break
            target = step["target"]
        assert calls == 101 - first


FINDINGS = [{"severity": "warning", "code": "ROLLOUT_PAUSED", "message": "a"},
            {"severity": "blocking", "code": "WORKLOAD_NO_PDB", "message": "b"},
            {"severity": "info", "code": "X", "message": "c"},
            {"severity": "blocking", "code": "POOL_NOT_READY", "message": "d"},
            {"severity": "warning", "code": "Y", "message": "e"}]


def test_blocking_findings_block_unless_downgraded_to_warnings():
    split = decisions.split_findings(FINDINGS, ["WORKLOAD_NO_PDB"])
    assert [f["message"] for f in split["blocking"]] == ["d"]
    assert [f["message"] for f in split["warnings"]] == ["a", "e", "b"], "the warnings, then the downgraded"
    assert [f["message"] for f in decisions.split_findings(FINDINGS, [])["blocking"]] == ["b", "d"]
    assert decisions.split_findings(None, None) == {"blocking": [], "warnings": [], "findings": [], "adopted": []}


def in_progress(pool="tfc-shared", comp="hypervisor", image="hv:2"):
    return {"severity": "blocking", "code": "ROLLOUT_IN_PROGRESS", "object": "gpupool/" + pool,
            "message": "GPUPool %s: a %s rollout (campaign h) is in progress at 50%%" % (pool, comp),
            "pool": pool, "component": comp, "image": image}


def test_a_rollout_in_progress_of_exactly_what_the_run_asks_is_taken_over():
    """A run killed mid-pools left the campaign; its rerun (same ask) takes it over (#45 item 2)."""
    asked = [{"pool": "shared", "components": {"hypervisor": {"image": "hv:2"}}}]
    split = decisions.split_findings([in_progress()] + FINDINGS, [], asked)
    adopted, = split["adopted"]
    assert adopted["severity"] == "warning" and "what this run asks for" in adopted["message"]
    assert "hv:2" in adopted["message"] and adopted in split["warnings"] and adopted not in split["blocking"]
    assert split["findings"][0] == adopted and split["findings"][1:] == FINDINGS
    # by its GPUPool name too
    assert decisions.split_findings([in_progress()], [], [dict(asked[0], pool="tfc-shared")])["adopted"]
    # anything else still blocks: another image, another component, another pool, nothing asked
    for found, ask in ((in_progress(image="hv:1"), asked),
                       (in_progress(comp="worker"), asked),
                       (in_progress(pool="tfc-other"), asked),
                       (in_progress(), []),
                       (in_progress(image=None), [{"pool": "shared", "components": {"hypervisor": {"image": None}}}])):
        split = decisions.split_findings([found], [], ask)
        assert split["blocking"] == [found] and not split["adopted"], (found, ask)


def test_what_a_campaign_taken_over_shows_is_part_of_it_and_the_rest_still_blocks():
    asked = [{"pool": "shared", "components": {"hypervisor": {"image": "hv:2"}}}]
    follows = [{"severity": "blocking", "code": "CLUSTER_NOT_RUNNING", "message": "c", "pools": ["tfc-shared", "tfc-b"]},
               {"severity": "blocking", "code": "POOL_NOT_RUNNING", "message": "p", "pool": "tfc-shared"},
               {"severity": "blocking", "code": "GPUNODE_NOT_RUNNING", "message": "n", "pool": "tfc-shared"},
               {"severity": "blocking", "code": "HYPERVISOR_NOT_READY", "message": "h", "pool": "tfc-shared"}]
    others = [{"severity": "blocking", "code": "GPUNODE_NOT_RUNNING", "message": "o", "pool": "tfc-b"},
              {"severity": "blocking", "code": "HYPERVISOR_NOT_READY", "message": "x", "pool": None},
              {"severity": "blocking", "code": "RELEASE_FAILED", "message": "r", "pool": "tfc-shared"}]
    split = decisions.split_findings([in_progress()] + follows + others, [], asked)
    assert split["blocking"] == others
    assert len(split["adopted"]) == 5 and all("tfc-shared" in f["message"] for f in split["adopted"][1:])
    # without the campaign taken over, they all block
    assert len(decisions.split_findings([in_progress()] + follows, [], [])["blocking"]) == 5
