"""The run report's record of a plan says "would" and what it would set, from and to; it says how a
plain helm rollback to a revision that recorded a pause must be followed (pure parts)."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import record
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render

from .test_report import info, marks, upgrade_params
from .module_utils._tfops.gpupool.test_release_changes import HV  # helpers shared with that file


def test_a_plan_names_images_and_policy_from_and_to_and_says_would():
    before = rollout.pool_view({"componentConfig": {"hypervisor": {"image": HV + "2.16.0"}},
                                "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": 100}}})
    after = rollout.pool_view({"componentConfig": {"hypervisor": {"image": HV + "2.17.0"}},
                               "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": 20,
                                                                                     "autoUpdateHypervisor": True}}})
    spec_changes = rollout.field_changes(before, after)
    pool = {"task_pool": "shared", "pool": "shared", "gpupool": "tensor-fusion-shared", "changed": True,
            "waited_for": ["hypervisor"], "changed_components": ["hypervisor"], "spec_changes": spec_changes,
            "schedule": {"nodes": 10, "batch_percentage": 20, "batch_interval": "1s", "batch_count": 5,
                         "batch_sizes": [2, 2, 2, 2, 2], "batch_seconds": 5.0, "seconds": 40.0, "batches": []}}
    params = upgrade_params(check_run=True)
    params["results"] = dict(params["results"], pools=[pool], upgrade=dict(
        params["results"]["upgrade"], reasons=["chart tensor-fusion-1.8.6 -> tensor-fusion-1.8.7"], revision_before=1,
        manifest_changes={"added": {}, "changed": {"Deployment": ["tf/controller"]}, "removed": {}}))
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    plan = rec["plan"]
    assert plan["pools"][0]["spec_changes"] == [
        {"field": "hypervisor.image", "from": HV + "2.16.0", "to": HV + "2.17.0"},
        {"field": "autoUpdateHypervisor", "from": None, "to": True},
        {"field": "batchPercentage", "from": 100, "to": 20}]
    line = record.summary_line(rec)
    assert "would upgrade chart 1.8.6 -> 1.8.7" in line
    assert "pool shared would roll hypervisor (hypervisor.image %s -> %s" % (HV + "2.16.0", HV + "2.17.0") in line
    assert "batchPercentage 100 -> 20" in line
    rows = dict((text, step) for step, text in report_render.plan_rows(plan))
    assert any(t.startswith("would upgrade chart 1.8.6 -> 1.8.7") for t in rows)
    assert "would change Deployment: tf/controller" in rows
    assert any("shared would roll hypervisor" in t and "hypervisor.image" in t for t in rows)
    # The steps of a plan wrote nothing: those that would write say so.
    upgrade_step = next(s for s in rec["steps"] if s["name"] == "upgrade")
    assert upgrade_step["status"] == "would change" and upgrade_step["changed"] is False and upgrade_step["would_change"]
    html = report_render.render_html(rec)
    assert "would change" in html and "<th>would change</th>" in html


def test_the_report_says_how_a_plain_helm_rollback_to_a_revision_with_a_pause_must_be_followed():
    params = upgrade_params()
    precheck = dict(info({"hypervisor": "hv:1"}), data=dict(info({"hypervisor": "hv:1"})["data"], clusters=[
        {"name": "tensor-fusion", "paused": {"shared": ["hypervisor"]}}]))
    params["results"] = dict(params["results"], precheck=precheck, upgrade=dict(
        params["results"]["upgrade"], name="tensor-fusion-sys", revision_before=1, revision_after=2))
    rec = record.build_record(params, "2026-11-29T02:01:30Z")
    notes = [w["msg"] for w in rec["warnings"] if w["step"] == "upgrade"]
    assert len(notes) == 1 and "helm revision 2 of release tensor-fusion-sys records tensor-fusion/shared" in notes[0]
    assert "`helm rollback tensor-fusion-sys 2`" in notes[0] and "autoUpdateHypervisor back to true" in notes[0]
    held = upgrade_params()
    held["results"] = dict(held["results"], upgrade=dict(held["results"]["upgrade"], name="r", revision_before=1,
                                                         revision_after=2, held_for_provider_configs=["tensor-fusion/shared"]))
    assert [w for w in record.build_record(held, "2026-11-29T02:01:30Z")["warnings"] if w["step"] == "upgrade"]
    nothing = record.build_record(upgrade_params(), "2026-11-29T02:01:30Z")
    assert not [w for w in nothing["warnings"] if w["step"] == "upgrade"], "no pause, nothing to say"
    unchanged = upgrade_params(steps=marks("lock", "precheck", "upgrade"))
    unchanged["results"] = dict(params["results"], upgrade=dict(params["results"]["upgrade"], changed=False,
                                                                revision_after=1))
    assert not [w for w in record.build_record(unchanged, "2026-11-29T02:01:30Z")["warnings"] if w["step"] == "upgrade"]
