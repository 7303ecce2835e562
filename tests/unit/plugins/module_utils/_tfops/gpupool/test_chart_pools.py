"""The post-renderer that keeps the live pools in the chart's TensorFusionCluster, and what the
chart itself changed for the pools step: pure, without a cluster."""
import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools as cp
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools


LICENSE = "s3cr3t-licence"


def tfc(image="hv:1", pct=20, pools=("shared",), worker_env=LICENSE, extra=None):
    entries = []
    for name in pools:
        entries.append({"name": name, "isDefault": name == "shared", "specTemplate": {
            "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {
                "autoUpdateHypervisor": True, "batchPercentage": pct, "batchInterval": "1s"}},
            "componentConfig": {
                "hypervisor": {"image": image, "vectorImage": "vector:1"},
                "worker": {"image": "wk:1", "podTemplate": {"template": {"spec": {"containers": [
                    {"name": "w", "env": [{"name": "TF_LICENSE", "value": worker_env}]}]}}}},
                "client": {"image": "cl:1", "remoteModeImage": "cl:1"}}}})
    body = {"apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionCluster",
            "metadata": {"name": "tensor-fusion", "annotations": {"helm.sh/resource-policy": "keep"}},
            "spec": {"gpuPools": entries}}
    body["spec"].update(extra or {})
    return body


def manifest(*docs):
    import yaml
    return "".join("---\n# Source: tensor-fusion/templates/x.yaml\n" + yaml.safe_dump(d) for d in docs)


def test_carry_live_keeps_live_entries_records_the_chart_and_adds_new_pools():
    rendered = tfc(image="hv:2", pct=20, pools=("shared", "new"))
    live = tfc(image="hv:live", pct=50, pools=("shared", "hand-made"))
    out = cp.carry_live(rendered, live)
    names = [e["name"] for e in out["spec"]["gpuPools"]]
    assert names == ["shared", "new", "hand-made"]
    shared = out["spec"]["gpuPools"][0]["specTemplate"]
    assert shared["componentConfig"]["hypervisor"]["image"] == "hv:live"
    assert shared["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"] == 50
    assert out["spec"]["gpuPools"][1]["specTemplate"]["componentConfig"]["hypervisor"]["image"] == "hv:2"
    recorded = cp.recorded_chart_pools(out)
    assert recorded["shared"]["hypervisor"]["image"] == "hv:2"
    assert out["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert rendered["spec"]["gpuPools"][0]["specTemplate"]["componentConfig"]["hypervisor"]["image"] == "hv:2"


def test_the_record_never_holds_a_pod_templates_content():
    out = cp.carry_live(tfc(), tfc())
    annotation = out["metadata"]["annotations"][cp.CHART_POOLS]
    assert LICENSE not in annotation
    assert json.loads(annotation)["shared"]["worker"]["podTemplate"].startswith("sha256:")


def test_post_render_touches_only_the_live_clusters_and_keeps_other_documents_verbatim():
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
             "data": {"when": "2026-01-01", "flag": "on"}}
    text = manifest(other, tfc(image="hv:2"))
    out, chart = cp.post_render(text, {"tensor-fusion": tfc(image="hv:live")})
    assert "# Source: tensor-fusion/templates/x.yaml\napiVersion: v1\ndata:\n  flag: 'on'\n" in out
    import yaml
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert docs[0] == other
    assert docs[1]["spec"]["gpuPools"][0]["specTemplate"]["componentConfig"]["hypervisor"]["image"] == "hv:live"
    assert chart == {"tensor-fusion": {"shared": cp.component_view(tfc(image="hv:2")["spec"]["gpuPools"][0]["specTemplate"])}}
    # Not live yet (a first install): the chart's rendering goes through untouched.
    out2, chart2 = cp.post_render(text, {})
    assert out2 == text and chart2["tensor-fusion"]["shared"]["hypervisor"]["image"] == "hv:2"


def test_chart_changes_lists_what_the_chart_renders_differently_in_the_pools_steps_terms():
    before = cp.rendered_pools(tfc(image="hv:1"))
    after = cp.rendered_pools(tfc(image="hv:2", pct=50, worker_env="new-licence"))
    assert cp.chart_changes(before, after) == {"shared": {
        "hypervisor": {"image": "hv:2"}, "worker": {"pod_template_changed": True}}}
    assert cp.chart_changes(after, after) == {}
    # The rolling policy is the run's business, not the chart's: never a change here.
    assert cp.chart_changes(before, cp.rendered_pools(tfc(pct=100))) == {}
    assert cp.chart_changes({}, after) == {}


def test_previous_rendering_prefers_the_record_over_the_manifest():
    recorded = cp.carry_live(tfc(image="hv:chart"), tfc(image="hv:live"))
    assert cp.previous_rendering(recorded, tfc(image="hv:live"))["shared"]["hypervisor"]["image"] == "hv:chart"
    assert cp.previous_rendering(tfc(image="hv:live"), tfc(image="hv:old-chart"))["shared"][
        "hypervisor"]["image"] == "hv:old-chart"


def test_the_program_runs_standalone(tmp_path):
    import subprocess
    import sys
    live = tmp_path / "live.json"
    live.write_text(json.dumps({"tensor-fusion": tfc(image="hv:live")}))
    program = tmp_path / "post.py"
    program.write_text(cp.program_source())
    out = tmp_path / "chart.json"
    proc = subprocess.run([sys.executable, "-I", str(program), str(live), str(out)],
                          input=manifest(tfc(image="hv:2")), capture_output=True, text=True, check=True)
    assert "hv:live" in proc.stdout and "hv:2" not in proc.stdout.split(cp.CHART_POOLS)[0]
    assert json.loads(out.read_text())["tensor-fusion"]["shared"]["hypervisor"]["image"] == "hv:2"


def test_pod_templates_the_chart_changed_are_named_for_a_warning():
    changes = {"tensor-fusion": {"shared": {"hypervisor": {"pod_template_changed": True},
                                            "worker": {"image": "w:2"}}}}
    assert chart_pools.pod_templates_changed(changes) == {"tensor-fusion/shared": ["hypervisor"]}
    assert chart_pools.pod_templates_changed({}) == {}
