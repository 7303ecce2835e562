"""gpupool/pool_keeper.py without a cluster: the live clusters the chart step reads keep the
record of the chart's rendering."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools as cp
from .test_chart_pools import tfc  # helpers shared with that file


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
