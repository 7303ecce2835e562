"""changeplan/report.py: what a plan says of its pools, its gates, a component change, a
policy-only change and a rotation (plans say "would")."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import report as plan_report
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan.report import describe_changes
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render

from ..gpupool.test_restore import template  # helpers shared with that file


def _step(name, status="ok", msg=""):
    return {"name": name, "status": status, "msg": msg}


def test_pools_roll_one_after_another_and_say_who_asked():
    results = [{"task_pool": "a", "pool": "a", "gpupool": "tf-a", "waited_for": ["hypervisor"],
                "changed_components": ["hypervisor"],
                "schedule": {"nodes": 4, "batch_percentage": 50, "batch_interval": "1s", "batch_count": 2,
                             "batch_sizes": [2, 2], "batch_seconds": 10.0, "seconds": 23.0,
                             "batches": [{"index": 1, "nodes": 2, "start": 0.0, "end": 10.0, "progress": 50},
                                         {"index": 2, "nodes": 2, "start": 13.0, "end": 23.0, "progress": 100}]}},
               {"task_pool": "b", "pool": "b", "gpupool": "tf-b", "waited_for": ["hypervisor"],
                "changed_components": ["hypervisor"],
                "schedule": {"nodes": 1, "batch_percentage": 100, "batch_interval": "1s", "batch_count": 1,
                             "batch_sizes": [1], "batch_seconds": 5.0, "seconds": 5.0,
                             "batches": [{"index": 1, "nodes": 1, "start": 0.0, "end": 5.0, "progress": 100}]}}]
    pools = plan_report.pools_plan(results, [{"pool": "a", "origin": {"hypervisor": ["chart", "user"]}}])
    lead_tail = plan_report.POOL_LEAD_SECONDS + plan_report.POOL_TAIL_SECONDS
    assert [p["starts_at"] for p in pools] == [0.0, 23.0 + lead_tail]
    assert pools[1]["batches"][0]["start"] == 23.0 + lead_tail + plan_report.POOL_LEAD_SECONDS
    assert pools[0]["origin"] == {"hypervisor": ["chart", "user"]} and pools[1]["origin"] == {"hypervisor": ["user"]}
    est = plan_report.estimate(pools, {"deadline": "2026-12-02T10:01:00Z"}, "2026-12-02T10:00:00Z")
    assert est["rollout_seconds"] == 28.0 + 2 * lead_tail and est["fits"] is False


def test_a_failed_step_or_an_estimate_past_the_deadline_blocks_the_plan():
    precheck = {"findings": [{"severity": "blocking", "code": "POOL_NOT_RUNNING", "message": "pool a is Pending"},
                             {"severity": "warning", "code": "W", "message": "w"}]}
    blocks = plan_report.blocking([_step("precheck", "failed", "precheck failed")], None, precheck)
    assert [b["code"] for b in blocks] == [None, "POOL_NOT_RUNNING"]
    record = {"steps": [_step("lock")], "error": None, "window": None, "ended": "2026-12-02T10:00:00Z",
              "versions": {"before": {}}}
    plan = plan_report.build_plan(record, {"window": {"deadline": "2026-12-02T10:00:10Z"}})
    assert plan["status"] == "blocked" and plan["blocking"][0]["code"] == "ESTIMATE_EXCEEDS_WINDOW"
    assert plan_report.build_plan(record, {"window": {"deadline": "2026-12-02T11:00:00Z"}})["status"] == "planned"


def test_a_plan_says_what_the_gates_add():
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import report as plan_report
    schedule = {"nodes": 10, "batch_percentage": 20, "batch_interval": "1s", "batch_count": 5,
                "batch_sizes": [2] * 5, "batch_seconds": 1.0, "batches": [], "seconds": 200.0,
                "gate_bake_seconds": 30, "gate_seconds": 170.0}
    pool, = plan_report.pools_plan([{"pool": "shared", "waited_for": ["hypervisor"],
                                     "changed_components": ["hypervisor"], "schedule": schedule}], [])
    assert pool["gate_bake_seconds"] == 30 and pool["gate_seconds"] == 170.0
    assert "health gates: 30s of bake per batch, 170.0s of it" in plan_report._gates_text(pool)


def test_a_component_change_names_pod_templates_and_never_shows_them():
    before = rollout.pool_view(template(image="hv:2", license_value="NEW-LICENSE", auto=False))
    after = rollout.pool_view(template(image="hv:1", license_value="OLD-LICENSE"))
    changes = rollout.field_changes(before, after)
    assert {"field": "hypervisor.image", "from": "hv:2", "to": "hv:1"} in changes
    assert {"field": "worker.podTemplate", "hidden": True} in changes
    assert {"field": "autoUpdateHypervisor", "from": False, "to": True} in changes
    text = describe_changes(changes)
    assert "hypervisor.image hv:2 -> hv:1" in text and "worker.podTemplate changed" in text
    assert "autoUpdateHypervisor false -> true" in text
    assert "OLD-" not in str(changes) and "NEW-" not in str(changes)


def test_a_policy_only_change_is_planned_too():
    pool = {"task_pool": "shared", "pool": "shared", "gpupool": "tensor-fusion-shared", "changed": True,
            "waited_for": [], "changed_components": [],
            "spec_changes": [{"field": "batchPercentage", "from": 100, "to": 20}]}
    plan = plan_report.build_plan({"steps": [], "error": None, "window": None, "ended": "2026-12-02T10:00:00Z",
                                   "versions": {"before": {}}}, {"pools": [pool]})
    rows = [text for _step, text in report_render.plan_rows(plan)]
    assert "shared would be set, no rollout: batchPercentage 100 -> 20" in rows


def test_a_check_mode_rotation_that_would_change_says_what_it_would_do():
    in_place = {"changed": True, "strategy": "in_place", "secret": {"name": "lic", "keys": ["token"]},
                "previous": ["lic-v-abc"], "restarts": ["Deployment tf/app"], "steps": [], "deleted": [],
                "consumers": [{"kind": "Deployment", "namespace": "tf", "name": "app"}]}
    plan = plan_report.rotation_plan(in_place)
    assert [s["step"] for s in plan["steps"]] == ["backup", "update", "restart", "verify"]
    text = report_render._planned_rotation(plan)  # pylint: disable=protected-access
    assert text.startswith("would rotate Secret lic") and "restart Deployment tf/app" in text
    assert "already rotated" not in text
    versioned = {"changed": True, "strategy": "versioned", "secret": {"name": "lic-v-new", "keys": ["token"]},
                 "previous": ["lic-v-old"], "steps": [], "deleted": ["lic-v-older"],
                 "consumers": [{"kind": "Deployment", "namespace": "tf", "name": "app", "repointed": True}]}
    plan = plan_report.rotation_plan(versioned)
    assert [s["step"] for s in plan["steps"]] == ["create", "repoint", "verify"]
    assert "would delete lic-v-older" in report_render._planned_rotation(plan)  # pylint: disable=protected-access
    done = dict(in_place, changed=False, restarts=[], previous=[])
    assert "already rotated" in report_render._planned_rotation(plan_report.rotation_plan(done))  # pylint: disable=protected-access
