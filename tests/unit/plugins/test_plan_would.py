"""Plans say "would" and what they would set, from and to; helm_release's check mode and diff say
a change's true extent and direction; the report carries the chart step's warnings and says how a
plain helm rollback to a revision that recorded a pause must be followed (pure parts)."""
import json

import yaml

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import report as plan_report
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import plan as rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import release
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import record as report
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render

from .test_report import info, marks, upgrade_params

HV = "tensorfusion/tensor-fusion-hypervisor:"


def tfc_doc(image, pct=20, record=None, env_value=None):
    template = {"componentConfig": {"hypervisor": {"image": HV + image}},
                "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": pct}}}
    if env_value:
        template["componentConfig"]["worker"] = {"podTemplate": {"template": {"spec": {"containers": [
            {"name": "w", "env": [{"name": "TF_LICENSE", "value": env_value}]}]}}}}
    doc = {"apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionCluster",
           "metadata": {"name": "tensor-fusion", "annotations": {}},
           "spec": {"gpuPools": [{"name": "shared", "specTemplate": template}]}}
    if record is not None:
        doc["metadata"]["annotations"][chart_pools.CHART_POOLS] = json.dumps(record)
    return doc


def manifest(*docs):
    return "".join("---\n" + yaml.safe_dump(d) for d in docs)


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "tf"}, "data": {"a": "1"}}


def test_the_diff_shows_the_live_pools_on_both_sides_so_the_chart_step_moves_no_image_backwards():
    stored = manifest(tfc_doc("2.18.0", record={}), CONFIGMAP)   # the revision's own chart step carried 2.18.0
    live = {"tensor-fusion": {"spec": {"gpuPools": tfc_doc("2.17.0")["spec"]["gpuPools"]}}}  # rolled back since
    desired = manifest(tfc_doc("2.17.0", record={}), dict(CONFIGMAP, data={"a": "2"}))
    diff = release.diff_of({"manifest": stored, "values": {}}, {"manifest": desired, "values": {}}, "release r", live)
    before, after = diff[1]["before"], diff[1]["after"]
    assert "2.18.0" not in before and before.count(HV + "2.17.0") == after.count(HV + "2.17.0") == 1
    assert "a: '1'" in before and "a: '2'" in after, "the chart's own changes stay in the diff"
    plain = release.diff_of({"manifest": stored, "values": {}}, {"manifest": desired, "values": {}}, "release r")
    assert "2.18.0" in plain[1]["before"], "without live pools the stored ones show"


def test_the_diff_masks_secrets_of_the_live_pools_too():
    live = {"tensor-fusion": {"spec": {"gpuPools": tfc_doc("2.17.0", env_value="LICENSE-VALUE")["spec"]["gpuPools"]}}}
    view = release.release_view({"manifest": manifest(tfc_doc("2.18.0")), "values": {}}, live)
    assert "LICENSE-VALUE" not in view["manifest"] and "2.17.0" in view["manifest"]


def test_check_mode_changed_and_manifest_changes_agree():
    # A first chart step through the post-renderer over a revision helm rendered alone: the cluster
    # gets the chart's pool record; the change is real, and listed.
    stored = manifest(tfc_doc("2.16.0"), CONFIGMAP)
    desired = manifest(tfc_doc("2.17.0", record={"shared": {}}), CONFIGMAP)
    changes = release.manifest_changes(stored, desired)
    assert changes["changed"] == {"TensorFusionCluster": ["tensor-fusion"]}
    assert not release.same_manifest(stored, desired)
    # The live pools moved since the last chart step, the chart's rendering did not: no change at all.
    again = manifest(tfc_doc("2.18.0", record={"shared": {}}), CONFIGMAP)
    assert release.same_manifest(desired, again) and not any(release.manifest_changes(desired, again).values())
    deployed = {"status": "deployed", "chart": "tf", "chart_version": "1", "values": {}, "manifest": desired}
    assert release.changes(deployed, dict(deployed, manifest=again)) == []


def test_a_kept_object_only_one_side_renders_is_no_change_in_either_view():
    kept = dict(CONFIGMAP, metadata={"name": "k", "namespace": "tf", "annotations": {"helm.sh/resource-policy": "keep"}})
    before, after = manifest(CONFIGMAP, kept), manifest(CONFIGMAP)
    assert release.same_manifest(before, after, exists=lambda key: True)
    assert not any(release.manifest_changes(before, after, exists=lambda key: True).values())
    assert release.manifest_changes(before, after, exists=lambda key: False)["removed"] == {"ConfigMap": ["tf/k"]}


def test_pod_templates_the_chart_changed_are_named_for_a_warning():
    changes = {"tensor-fusion": {"shared": {"hypervisor": {"pod_template_changed": True},
                                            "worker": {"image": "w:2"}}}}
    assert chart_pools.pod_templates_changed(changes) == {"tensor-fusion/shared": ["hypervisor"]}
    assert chart_pools.pod_templates_changed({}) == {}


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
    rec = report.build_record(params, "2026-11-29T02:01:30Z")
    plan = rec["plan"]
    assert plan["pools"][0]["spec_changes"] == [
        {"field": "hypervisor.image", "from": HV + "2.16.0", "to": HV + "2.17.0"},
        {"field": "autoUpdateHypervisor", "from": None, "to": True},
        {"field": "batchPercentage", "from": 100, "to": 20}]
    line = report.summary_line(rec)
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


def test_the_report_says_how_a_plain_helm_rollback_to_a_revision_with_a_pause_must_be_followed():
    params = upgrade_params()
    precheck = dict(info({"hypervisor": "hv:1"}), data=dict(info({"hypervisor": "hv:1"})["data"], clusters=[
        {"name": "tensor-fusion", "paused": {"shared": ["hypervisor"]}}]))
    params["results"] = dict(params["results"], precheck=precheck, upgrade=dict(
        params["results"]["upgrade"], name="tensor-fusion-sys", revision_before=1, revision_after=2))
    rec = report.build_record(params, "2026-11-29T02:01:30Z")
    notes = [w["msg"] for w in rec["warnings"] if w["step"] == "upgrade"]
    assert len(notes) == 1 and "helm revision 2 of release tensor-fusion-sys records tensor-fusion/shared" in notes[0]
    assert "`helm rollback tensor-fusion-sys 2`" in notes[0] and "autoUpdateHypervisor back to true" in notes[0]
    held = upgrade_params()
    held["results"] = dict(held["results"], upgrade=dict(held["results"]["upgrade"], name="r", revision_before=1,
                                                         revision_after=2, held_for_provider_configs=["tensor-fusion/shared"]))
    assert [w for w in report.build_record(held, "2026-11-29T02:01:30Z")["warnings"] if w["step"] == "upgrade"]
    nothing = report.build_record(upgrade_params(), "2026-11-29T02:01:30Z")
    assert not [w for w in nothing["warnings"] if w["step"] == "upgrade"], "no pause, nothing to say"
    unchanged = upgrade_params(steps=marks("lock", "precheck", "upgrade"))
    unchanged["results"] = dict(params["results"], upgrade=dict(params["results"]["upgrade"], changed=False,
                                                                revision_after=1))
    assert not [w for w in report.build_record(unchanged, "2026-11-29T02:01:30Z")["warnings"] if w["step"] == "upgrade"]


def test_the_chart_steps_images_from_and_to_are_named_object_by_object():
    def deploy(image, sidecar=None):
        containers = [{"name": "controller", "image": image}] + ([{"name": "side", "image": sidecar}] if sidecar else [])
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ctl", "namespace": "tf"},
                "spec": {"template": {"spec": {"containers": containers}}}}
    before = manifest(deploy("op:1"), tfc_doc("2.16.0"))
    after = manifest(deploy("op:2", sidecar="side:1"), tfc_doc("2.17.0"))
    assert release.image_changes(before, after) == [
        {"object": "Deployment tf/ctl", "container": "controller", "from": "op:1", "to": "op:2"},
        {"object": "Deployment tf/ctl", "container": "side", "from": None, "to": "side:1"}]
    assert release.image_changes(before, before) == []
    plan = plan_report.chart_plan({"name": "r", "chart_version": "1.8.7", "reasons": ["chart"],
                                   "image_changes": release.image_changes(before, after)}, {"chart_version": "1.8.6"})
    rows = [text for _step, text in report_render.plan_rows(dict(plan_report.build_plan(
        {"steps": [], "error": None, "window": None, "ended": "2026-12-02T10:00:00Z", "versions": {"before": {}}}, {}),
        chart=plan))]
    assert "would set Deployment tf/ctl container controller image op:1 -> op:2" in rows
    assert "would set Deployment tf/ctl container side image none (new) -> side:1" in rows
