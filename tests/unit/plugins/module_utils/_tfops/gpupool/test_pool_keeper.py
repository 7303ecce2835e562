"""gpupool/pool_keeper.py without a cluster: the live clusters the chart step reads keep the
record of the chart's rendering; the ProviderConfigs a rendering changes and the pools whose
hypervisors that would roll; manifests compared without the pools the post-renderer carried."""
import copy

import yaml

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools as cp
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import pool_keeper as pk

from .test_chart_pools import manifest, tfc  # helpers shared with that file


def test_the_live_clusters_the_chart_step_reads_keep_the_record_of_the_charts_rendering():
    """The second chart step through the post-renderer compares the chart with what the chart
    rendered at the first (the record), not with the live pools the first step's manifest
    carried: a values change that renders the same pools reports no pool change."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import pool_keeper

    first = cp.carry_live(tfc(image="hv:chart"), tfc(image="hv:live"))   # stored, and live

    class Listing:
        def to_dict(self):
            return {"items": [dict(first, metadata=dict(first["metadata"], uid="u", resourceVersion="9"))]}

    class Kube:
        def resource(self, *_args, **_kwargs):
            return type("Api", (), {"get": None})()

        def call(self, *_args, **_kwargs):
            return Listing()

    live = pool_keeper.live_clusters(Kube())["tensor-fusion"]
    assert live["metadata"] == {"name": "tensor-fusion", "annotations": {
        cp.CHART_POOLS: first["metadata"]["annotations"][cp.CHART_POOLS]}}
    assert live["spec"]["gpuPools"] == first["spec"]["gpuPools"]
    again = cp.rendered_pools(tfc(image="hv:chart"))
    assert cp.chart_changes(cp.previous_rendering(live, first), again) == {}
    # Without the record, the carried live pools would pass for the chart's last rendering.
    bare = dict(live, metadata={"name": "tensor-fusion"})
    assert cp.chart_changes(cp.previous_rendering(bare, first), again) == {
        "shared": {"hypervisor": {"image": "hv:chart"}}}


def provider(name, vendor="NVIDIA", image="hv:1", api_version="tensor-fusion.ai/v1", kind="ProviderConfig"):
    return {"apiVersion": api_version, "kind": kind, "metadata": {"name": name},
            "spec": {"vendor": vendor, "hypervisorImage": image}}


def test_provider_config_changes_are_the_live_ones_whose_spec_the_rendering_changes():
    live = {"nvidia": {"metadata": {"annotations": {}}, "spec": provider("nvidia")["spec"]},
            "amd": {"metadata": {"annotations": {}}, "spec": provider("amd", vendor="AMD")["spec"]}}
    desired = manifest(provider("nvidia", image="hv:2"), provider("amd", vendor="AMD"),
                       provider("new-one", image="hv:9"), tfc())
    assert pk.provider_config_changes(desired, live) == {"nvidia": "NVIDIA"}
    assert pk.provider_config_changes(manifest(provider("amd", vendor="AMD", image="hv:2")), live) == {"amd": "AMD"}
    # Only TensorFusion's ProviderConfig kind counts; an empty or unreadable manifest changes nothing.
    assert pk.provider_config_changes(manifest(provider("nvidia", image="hv:2", api_version="other.io/v1")), live) == {}
    assert pk.provider_config_changes(manifest(provider("nvidia", image="hv:2", kind="ConfigMap")), live) == {}
    assert pk.provider_config_changes("", live) == {}
    assert pk.provider_config_changes("a: [unclosed", live) == {}


def test_a_changed_provider_without_a_vendor_is_named_with_an_empty_vendor():
    changed = provider("nvidia", image="hv:2")
    del changed["spec"]["vendor"]
    live = {"nvidia": {"spec": provider("nvidia")["spec"]}}
    assert pk.provider_config_changes(manifest(changed), live) == {"nvidia": ""}


def test_provider_hashes_read_the_operators_annotation():
    providers = {"a": {"metadata": {"annotations": {pk.A_PROVIDER_HASH: "h1"}}},
                 "b": {"metadata": {"annotations": {}}}, "c": {}}
    assert pk.provider_hashes(providers) == {"a": "h1", "b": None, "c": None}


def test_the_vendor_of_a_pool_defaults_to_nvidia():
    assert pk.vendor_of(None) == "NVIDIA"
    assert pk.vendor_of({}) == "NVIDIA"
    assert pk.vendor_of({"nodeManagerConfig": {"defaultVendor": "AMD"}}) == "AMD"


def test_the_entries_to_hold_are_the_vendors_pools_whose_hypervisors_roll_by_themselves():
    one = tfc(pools=("shared", "amd-pool", "manual"))
    entries = one["spec"]["gpuPools"]
    entries[1]["specTemplate"]["nodeManagerConfig"]["defaultVendor"] = "AMD"
    entries[2]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["autoUpdateHypervisor"] = False
    two = tfc(pools=("a-pool",))
    live = {"zeta": one, "alpha": two}
    assert pk.entries_to_hold(live, ["NVIDIA"]) == [("alpha", "a-pool"), ("zeta", "shared")]
    assert pk.entries_to_hold(live, [" amd "]) == [("zeta", "amd-pool")]
    assert pk.entries_to_hold(live, ["nvidia", "AMD"]) == [("alpha", "a-pool"), ("zeta", "shared"), ("zeta", "amd-pool")]
    assert pk.entries_to_hold(live, []) == []
    del entries[0]["specTemplate"]["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
    assert pk.entries_to_hold({"zeta": one}, ["NVIDIA"]) == [], "an absent policy means autoUpdate false"


def test_a_carried_cluster_is_compared_by_the_charts_record_not_by_its_live_pools():
    carried = cp.carry_live(tfc(image="hv:chart"), tfc(image="hv:live"))
    before = copy.deepcopy(carried)
    seen = pk.comparable(carried)
    assert "gpuPools" not in seen["spec"]
    assert seen["metadata"]["annotations"][cp.CHART_POOLS] == carried["metadata"]["annotations"][cp.CHART_POOLS]
    assert carried == before, "the manifest's own document is left alone"
    # Another carried cluster with other live pools but the same chart rendering compares equal.
    assert pk.comparable(cp.carry_live(tfc(image="hv:chart"), tfc(image="hv:other"))) == seen
    plain = tfc()
    assert pk.comparable(plain) is plain, "a cluster the post-renderer did not carry is compared whole"
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert pk.comparable(other) is other


def test_without_pools_drops_the_pools_and_their_record_only():
    carried = cp.carry_live(tfc(image="hv:chart"), tfc(image="hv:live"))
    before = copy.deepcopy(carried)
    bare = pk.without_pools(carried)
    assert "gpuPools" not in bare["spec"]
    assert bare["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert carried == before
    assert pk.without_pools(tfc(image="hv:1", pct=20)) == pk.without_pools(tfc(image="hv:2", pct=50))
    other = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    assert pk.without_pools(other) is other


def test_documents_are_the_mappings_of_a_manifest():
    text = manifest(tfc(), provider("nvidia")) + "---\n- a list\n---\n"
    docs = pk.documents(text)
    assert [d["kind"] for d in docs] == ["TensorFusionCluster", "ProviderConfig"]
    assert docs[1] == yaml.safe_load(yaml.safe_dump(provider("nvidia")))
    assert pk.documents("") == [] and pk.documents(None) == []
    assert pk.documents("a: [unclosed") == []


def test_what_a_chart_applied_without_the_live_pools_sets_back():
    """#45 item 5: keep_pools off, a hand-set batchPercentage 50 -> the chart's 20 was reported nowhere."""
    import yaml as _yaml
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.values import describe_changes

    def cluster(batch, interval, image, env="a"):
        return {"apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionCluster", "metadata": {"name": "tf"},
                "spec": {"gpuPools": [{"name": "shared", "specTemplate": {
                    "componentConfig": {"hypervisor": {"image": image, "podTemplate": {"template": {"spec": {
                        "containers": [{"name": "h", "env": [{"name": "TOKEN", "value": env}]}]}}}}},
                    "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"batchPercentage": batch, "batchInterval": interval}}}}]}}
    live = cluster(50, "3s", "hv:1", env="s3cr3t")
    manifest = _yaml.safe_dump(cluster(20, "1s", "hv:1"))
    reset, = pk.chart_resets({"tf": live}, manifest)
    assert (reset["cluster"], reset["pool"]) == ("tf", "shared")
    text = describe_changes(reset["changes"])
    assert "batchPercentage 50 -> 20" in text and "batchInterval 3s -> 1s" in text
    assert "hypervisor.podTemplate changed" in text and "s3cr3t" not in repr(reset)
    assert pk.chart_resets({"tf": cluster(20, "1s", "hv:1")}, manifest) == []
    assert pk.chart_resets({"tf": None}, manifest) == []
    # Helm patches with the difference of the two renderings: the same pools rendered set nothing back
    assert pk.chart_resets({"tf": live}, manifest, previous=manifest) == []
    assert pk.chart_resets({"tf": live}, manifest, previous=_yaml.safe_dump(cluster(20, "1s", "hv:0")))
