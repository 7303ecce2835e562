"""gpupool/release_changes.py: idempotence (changes) and diffs that never show values; check mode
and diff say a change's true extent and direction, the live pools on both sides; kept objects only
one side renders; image changes named object by object."""
import json

import yaml

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import report as plan_report
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import release_changes
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import release
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render

from ..core.test_redact import DEPLOY_DOC, SECRET_DOC  # helpers shared with that file


KEPT_DOC = """apiVersion: v1
kind: Secret
metadata:
  name: tf-cloud-vendor-credentials
  annotations: {helm.sh/resource-policy: keep}
stringData: {ak: dummy}
"""


def rev(manifest, values=None, chart_version="1.8.7", status="deployed"):
    return {"chart": "tensor-fusion", "chart_version": chart_version, "status": status,
            "values": values or {}, "manifest": manifest}


def test_changes_compare_chart_values_and_objects():
    base = rev(DEPLOY_DOC + "---\n" + SECRET_DOC)
    reordered = rev(SECRET_DOC + "---\n" + DEPLOY_DOC)
    assert release_changes.changes(base, reordered) == []
    assert release_changes.changes(None, base) == ["the release does not exist"]
    assert "values differ" in release_changes.changes(base, rev(base["manifest"], {"a": 1}))
    assert release_changes.changes(base, rev(base["manifest"], chart_version="1.8.6"))[0].startswith("chart ")
    assert "its last revision is failed" in release_changes.changes(rev(base["manifest"], status="failed"), base)
    assert "rendered manifest differs" in release_changes.changes(base, rev(DEPLOY_DOC.replace("wss://x", "wss://y")))


def test_a_kept_object_rendered_on_one_side_counts_only_when_absent_from_the_cluster():
    with_kept, without = rev(DEPLOY_DOC + "---\n" + KEPT_DOC), rev(DEPLOY_DOC)
    assert release_changes.changes(with_kept, without, exists=lambda key: True) == []
    assert release_changes.changes(with_kept, without, exists=lambda key: False) == ["rendered manifest differs"]
    blockers = release_changes.rollback_blockers(DEPLOY_DOC, DEPLOY_DOC + "---\n" + KEPT_DOC, lambda k: True)
    assert [(k[1], k[3]) for k in blockers] == [("Secret", "tf-cloud-vendor-credentials")]
    assert release_changes.rollback_blockers(DEPLOY_DOC, DEPLOY_DOC + "---\n" + KEPT_DOC, lambda k: False) == []


def test_diff_and_secrets_of_a_revision_never_show_values():
    before = rev(SECRET_DOC, {"agent": {"enrollToken": "tok-SECRET"}})
    after = rev(SECRET_DOC.replace("SK-SECRET", "SK2-SECRET"), {"agent": {"enrollToken": "tok2-SECRET"}})
    text = json.dumps(release_changes.diff_of(before, after, "x"))
    assert "SECRET" not in text.replace("SECRET_", "")
    assert set(release.secrets_in(after)) == {"tok2-SECRET", "AKIA-SECRET", "SK2-SECRET"}
    assert release.params_secrets({"values": {"auth": {"password": "pw-1"}},
                                   "set_values": [{"value": "a.token=tok-1"}, {"value": "a.b=plain"}]}) \
        == ["pw-1", "tok-1"]


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
    diff = release_changes.diff_of({"manifest": stored, "values": {}}, {"manifest": desired, "values": {}}, "release r", live)
    before, after = diff[1]["before"], diff[1]["after"]
    assert "2.18.0" not in before and before.count(HV + "2.17.0") == after.count(HV + "2.17.0") == 1
    assert "a: '1'" in before and "a: '2'" in after, "the chart's own changes stay in the diff"
    plain = release_changes.diff_of({"manifest": stored, "values": {}}, {"manifest": desired, "values": {}}, "release r")
    assert "2.18.0" in plain[1]["before"], "without live pools the stored ones show"


def test_the_diff_masks_secrets_of_the_live_pools_too():
    live = {"tensor-fusion": {"spec": {"gpuPools": tfc_doc("2.17.0", env_value="LICENSE-VALUE")["spec"]["gpuPools"]}}}
    view = release_changes.release_view({"manifest": manifest(tfc_doc("2.18.0")), "values": {}}, live)
    assert "LICENSE-VALUE" not in view["manifest"] and "2.17.0" in view["manifest"]


def test_check_mode_changed_and_manifest_changes_agree():
    # A first chart step through the post-renderer over a revision helm rendered alone: the cluster
    # gets the chart's pool record; the change is real, and listed.
    stored = manifest(tfc_doc("2.16.0"), CONFIGMAP)
    desired = manifest(tfc_doc("2.17.0", record={"shared": {}}), CONFIGMAP)
    changes = release_changes.manifest_changes(stored, desired)
    assert changes["changed"] == {"TensorFusionCluster": ["tensor-fusion"]}
    assert not release_changes.same_manifest(stored, desired)
    # The live pools moved since the last chart step, the chart's rendering did not: no change at all.
    again = manifest(tfc_doc("2.18.0", record={"shared": {}}), CONFIGMAP)
    assert release_changes.same_manifest(desired, again) and not any(release_changes.manifest_changes(desired, again).values())
    deployed = {"status": "deployed", "chart": "tf", "chart_version": "1", "values": {}, "manifest": desired}
    assert release_changes.changes(deployed, dict(deployed, manifest=again)) == []


def test_a_kept_object_only_one_side_renders_is_no_change_in_either_view():
    kept = dict(CONFIGMAP, metadata={"name": "k", "namespace": "tf", "annotations": {"helm.sh/resource-policy": "keep"}})
    before, after = manifest(CONFIGMAP, kept), manifest(CONFIGMAP)
    assert release_changes.same_manifest(before, after, exists=lambda key: True)
    assert not any(release_changes.manifest_changes(before, after, exists=lambda key: True).values())
    assert release_changes.manifest_changes(before, after, exists=lambda key: False)["removed"] == {"ConfigMap": ["tf/k"]}


def test_the_chart_steps_images_from_and_to_are_named_object_by_object():
    def deploy(image, sidecar=None):
        containers = [{"name": "controller", "image": image}] + ([{"name": "side", "image": sidecar}] if sidecar else [])
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "ctl", "namespace": "tf"},
                "spec": {"template": {"spec": {"containers": containers}}}}
    before = manifest(deploy("op:1"), tfc_doc("2.16.0"))
    after = manifest(deploy("op:2", sidecar="side:1"), tfc_doc("2.17.0"))
    assert release_changes.image_changes(before, after) == [
        {"object": "Deployment tf/ctl", "container": "controller", "from": "op:1", "to": "op:2"},
        {"object": "Deployment tf/ctl", "container": "side", "from": None, "to": "side:1"}]
    assert release_changes.image_changes(before, before) == []
    plan = plan_report.chart_plan({"name": "r", "chart_version": "1.8.7", "reasons": ["chart"],
                                   "image_changes": release_changes.image_changes(before, after)}, {"chart_version": "1.8.6"})
    rows = [text for _step, text in report_render.plan_rows(dict(plan_report.build_plan(
        {"steps": [], "error": None, "window": None, "ended": "2026-12-02T10:00:00Z", "versions": {"before": {}}}, {}),
        chart=plan))]
    assert "would set Deployment tf/ctl container controller image op:1 -> op:2" in rows
    assert "would set Deployment tf/ctl container side image none (new) -> side:1" in rows
