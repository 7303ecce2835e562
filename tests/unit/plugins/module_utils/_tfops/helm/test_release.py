"""helm/release.py without a cluster: the upgrade's arguments and the command shown, input
validation, the flags a rollback takes from its snapshot, idempotence (changes) and diffs that
never show values; check mode and diff say a change's true extent and direction, image changes
named object by object."""
import json
import re

import pytest
import yaml

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import report as plan_report
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import release
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

from ..core.test_redact import DEPLOY_DOC, SECRET_DOC  # helpers shared with that file
from .test_cli import H4  # helpers shared with that file


KEPT_DOC = """apiVersion: v1
kind: Secret
metadata:
  name: tf-cloud-vendor-credentials
  annotations: {helm.sh/resource-policy: keep}
stringData: {ak: dummy}
"""


def params(**over):
    base = dict(name="tensor-fusion-sys", namespace="tensor-fusion-sys", state="present",
                chart_ref="tensor-fusion", chart_repo_url="https://repo", chart_version="1.8.7",
                values_files=["https://repo/values-cn.yaml"], create_namespace=True,
                set_values=[{"value": "agent.agentId=", "value_type": "string"},
                            {"value": "agent.enrollToken=tok", "value_type": "raw"}],
                reset_values=True, reuse_values=False, reset_then_reuse_values=False,
                atomic=True, wait=True, skip_crds=False, revision=None, snapshot=None)
    base.update(over)
    return base


def test_upgrade_arguments_and_the_command_shown():
    args = release.upgrade_args(params(), (4, 1, 4), "/tmp/x/values.json")
    assert args[:6] == ["upgrade", "--install", "tensor-fusion-sys", "tensor-fusion", "--namespace",
                        "tensor-fusion-sys"]
    assert args[args.index("--repo") + 1] == "https://repo"
    assert ["-f", "https://repo/values-cn.yaml", "-f", "/tmp/x/values.json"] == \
        args[args.index("-f"):args.index("-f") + 4]
    assert "--set-string" in args and "agent.agentId=" in args and "--reset-values" in args
    full = args + release.write_args(params(), (4, 1, 4), 600)
    assert "--rollback-on-failure" in full and "--wait" in full and "600s" in full
    assert "--atomic" in release.write_args(params(), (3, 17, 2), 600)
    shown = helmcli.masked_command(["helm"] + full + ["--kubeconfig", "/tmp/x/kubeconfig"], "/tmp/x")
    assert "agent.enrollToken=tok" not in shown
    assert "agent.enrollToken=********" in shown and "<tmp>/kubeconfig" in shown
    assert "/tmp/x" not in shown and "agent.agentId=" in shown
    assert "--reuse-values" in release.upgrade_args(params(reuse_values=True), (3, 17, 2))
    with pytest.raises(InvalidInput):
        release.upgrade_args(params(reuse_values=False, reset_then_reuse_values=True), (3, 13, 0))
    # The task's helm flags, mapped to the major.
    flagged = params(disable_openapi_validation=True, no_hooks=True, extra_args=["--history-max=5"])
    assert release.upgrade_args(flagged, (3, 17, 2))[-3:] == [
        "--disable-openapi-validation", "--no-hooks", "--history-max=5"]
    assert release.upgrade_args(flagged, (4, 1, 4))[-4:] == [
        "--disable-openapi-validation", "--no-hooks", "--server-side=false", "--history-max=5"]
    assert "--skip-crds" in release.upgrade_args(params(skip_crds=True), (3, 17, 2))


def test_validate_refuses_bad_input():
    with pytest.raises(InvalidInput):
        release.validate(params(state="rolled_back"))
    with pytest.raises(InvalidInput):
        release.validate(params(state="rolled_back", revision=2, snapshot="/x"))
    with pytest.raises(InvalidInput):
        release.validate(params(set_values=[{"value": "novalue"}]))
    with pytest.raises(InvalidInput):
        release.validate(params(reuse_values=True, reset_then_reuse_values=True))
    release.validate(params(state="rolled_back", revision=2))
    checked = params(extra_args=["--history-max", "7"])
    release.validate(checked)
    assert checked["extra_args"] == ["--history-max=7"]
    with pytest.raises(InvalidInput) as err:
        release.validate(params(extra_args=["--kube-context=prod"]))
    assert "extra_args: '--kube-context=prod'" in err.value.msg


@pytest.mark.parametrize("over, message", [
    # #36: what was written (a revision) or ignored before.
    (dict(reuse_values=True), "reset_values and reuse_values are mutually exclusive"),
    (dict(reset_then_reuse_values=True), "reset_values and reset_then_reuse_values are mutually exclusive"),
    (dict(snapshot="secret://tensor-fusion-sys/x"), "snapshot goes with state: rolled_back; state: present would ignore it"),
    (dict(revision=3), "revision goes with state: rolled_back"),
    (dict(state="rolled_back", revision=2, signing_key="k" * 20), "signing_key goes with snapshot"),
    (dict(allow_unsigned=True), "allow_unsigned goes with snapshot"),
    (dict(chart_repo_url="not a url"), "chart_repo_url: 'not a url' is not an http:// or https:// URL"),
    (dict(chart_repo_url="ftp://repo.example"), "is not an http:// or https:// URL"),
    (dict(chart_repo_url="https://"), "is not an http:// or https:// URL"),
])
def test_validate_refuses_what_it_would_ignore_or_misread(over, message):
    with pytest.raises(InvalidInput, match=re.escape(message)):
        release.validate(params(**over))


def test_reset_values_unset_resets_unless_values_are_reused():
    assert "--reset-values" in release.upgrade_args(params(reset_values=None), (3, 17, 2))
    reused = params(reset_values=None, reuse_values=True)
    release.validate(reused)
    args = release.upgrade_args(reused, (3, 17, 2))
    assert "--reuse-values" in args and "--reset-values" not in args
    assert "--reset-values" not in release.upgrade_args(params(reset_values=False), (3, 17, 2))


def test_a_rollback_to_a_snapshot_uses_the_flags_the_upgrade_recorded():
    recorded = {"disable_openapi_validation": True, "skip_crds": False, "no_hooks": True,
                "extra_args": ["--history-max=20"]}
    unset = dict.fromkeys(helmcli.FLAG_OPTIONS)
    flags, sources = release.effective_flags(unset, recorded)
    assert flags == recorded and set(sources.values()) == {"snapshot"}
    # What the task sets wins, false and [] included; what neither sets is off.
    flags, sources = release.effective_flags(dict(unset, no_hooks=False, extra_args=[]), recorded)
    assert flags == dict(recorded, no_hooks=False, extra_args=[])
    assert sources == {"disable_openapi_validation": "snapshot", "skip_crds": "snapshot",
                       "no_hooks": "task", "extra_args": "task"}
    flags, sources = release.effective_flags(unset, None)  # an older bundle records none
    assert flags == {"disable_openapi_validation": False, "skip_crds": False, "no_hooks": False,
                     "extra_args": []} and set(sources.values()) == {"default"}
    # What a snapshot records: complete and normalised; a bad flag is refused at capture.
    assert release.recorded_flags({"disable_openapi_validation": True, "extra_args": ["--history-max", "5"]}) == \
        {"disable_openapi_validation": True, "skip_crds": False, "no_hooks": False, "extra_args": ["--history-max=5"]}
    assert release.recorded_flags(None) is None
    with pytest.raises(InvalidInput) as err:
        release.recorded_flags({"extra_args": ["--namespace=x"]})
    assert "helm_flags.extra_args" in err.value.msg
    # And the rollback's commands carry them.
    assert helmcli.flag_args(release.effective_flags(unset, recorded)[0], helmcli.ROLLBACK, H4) == \
        ["--no-hooks", "--server-side=false", "--history-max=20"]


def rev(manifest, values=None, chart_version="1.8.7", status="deployed"):
    return {"chart": "tensor-fusion", "chart_version": chart_version, "status": status,
            "values": values or {}, "manifest": manifest}


def test_changes_compare_chart_values_and_objects():
    base = rev(DEPLOY_DOC + "---\n" + SECRET_DOC)
    reordered = rev(SECRET_DOC + "---\n" + DEPLOY_DOC)
    assert release.changes(base, reordered) == []
    assert release.changes(None, base) == ["the release does not exist"]
    assert "values differ" in release.changes(base, rev(base["manifest"], {"a": 1}))
    assert release.changes(base, rev(base["manifest"], chart_version="1.8.6"))[0].startswith("chart ")
    assert "its last revision is failed" in release.changes(rev(base["manifest"], status="failed"), base)
    assert "rendered manifest differs" in release.changes(base, rev(DEPLOY_DOC.replace("wss://x", "wss://y")))


def test_a_kept_object_rendered_on_one_side_counts_only_when_absent_from_the_cluster():
    with_kept, without = rev(DEPLOY_DOC + "---\n" + KEPT_DOC), rev(DEPLOY_DOC)
    assert release.changes(with_kept, without, exists=lambda key: True) == []
    assert release.changes(with_kept, without, exists=lambda key: False) == ["rendered manifest differs"]
    blockers = release.rollback_blockers(DEPLOY_DOC, DEPLOY_DOC + "---\n" + KEPT_DOC, lambda k: True)
    assert [(k[1], k[3]) for k in blockers] == [("Secret", "tf-cloud-vendor-credentials")]
    assert release.rollback_blockers(DEPLOY_DOC, DEPLOY_DOC + "---\n" + KEPT_DOC, lambda k: False) == []


def test_diff_and_secrets_of_a_revision_never_show_values():
    before = rev(SECRET_DOC, {"agent": {"enrollToken": "tok-SECRET"}})
    after = rev(SECRET_DOC.replace("SK-SECRET", "SK2-SECRET"), {"agent": {"enrollToken": "tok2-SECRET"}})
    text = json.dumps(release.diff_of(before, after, "x"))
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
