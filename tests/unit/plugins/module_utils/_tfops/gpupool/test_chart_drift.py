"""Ownership of the TensorFusionCluster by a Helm release and what the next chart upgrade would
revert of its live pools: the pure diff, the findings' messages, the reading of the release's
stored rendering (only its TensorFusionClusters, never a secret) and the degraded cases."""
import base64
import copy
import gzip
import json

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_drift
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import findings
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster.info import Gatherer, slim_cluster
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError, Forbidden

HYP_IMAGE = "componentConfig.hypervisor.image"
BATCH = "nodeManagerConfig.nodePoolRollingUpdatePolicy.batchPercentage"
OWNED = {"labels": {"app.kubernetes.io/managed-by": "Helm"},
         "annotations": {"meta.helm.sh/release-name": "tf", "meta.helm.sh/release-namespace": "tf-sys"}}


def rendered_tfc():
    """The chart's rendering (no server defaults): as the chart template writes it."""
    return {"apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionCluster",
            "metadata": {"name": "tensor-fusion", "annotations": {"helm.sh/resource-policy": "keep"}},
            "spec": {"gpuPools": [{"name": "shared", "isDefault": True, "specTemplate": {
                "componentConfig": {
                    "hypervisor": {"image": "hv:2.15.0", "vectorImage": "vector:1", "podTemplate": {
                        "template": {"spec": {"containers": [{"name": "hv", "env": [
                            {"name": "TF_LOG_LEVEL", "value": "info"}]}]}}}},
                    "worker": {"image": "worker:2.15.0", "podTemplate": {"template": {"spec": {"containers": [
                        {"name": "w", "env": [{"name": "TF_LICENSE", "value": "s3cr3t"}]}]}}}},
                    "client": {"image": "client:2.15.0", "operatorEndpoint": "http://op:8080",
                               "patchToPod": {"spec": {}}}},
                "nodeManagerConfig": {"defaultVendor": "NVIDIA", "nodePoolRollingUpdatePolicy": {
                    "autoUpdateHypervisor": True, "batchInterval": "1s", "batchPercentage": 20}}}}]}}


def live_tfc():
    """The same cluster as the API server stores it: CRD defaults filled in, Helm's ownership."""
    tfc = copy.deepcopy(rendered_tfc())
    tfc["metadata"].update(copy.deepcopy(OWNED))
    tfc["metadata"]["annotations"]["helm.sh/resource-policy"] = "keep"
    template = tfc["spec"]["gpuPools"][0]["specTemplate"]
    template["componentConfig"]["hypervisor"]["portNumber"] = 8000
    template["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["maxDuration"] = "10m"
    return tfc


def diff(live, rendered):
    return chart_drift.diff_pools(chart_drift.pool_settings(live), chart_drift.pool_settings(rendered))


def pool_of(tfc):
    return tfc["spec"]["gpuPools"][0]["specTemplate"]


# ---- ownership ------------------------------------------------------------------------------------
def test_helm_owner_needs_the_label_and_both_annotations():
    assert chart_drift.helm_owner(live_tfc()) == {"name": "tf", "namespace": "tf-sys"}
    assert chart_drift.helm_owner(rendered_tfc()) is None
    no_label = live_tfc()
    no_label["metadata"]["labels"] = {}
    assert chart_drift.helm_owner(no_label) is None
    no_ns = live_tfc()
    del no_ns["metadata"]["annotations"]["meta.helm.sh/release-namespace"]
    assert chart_drift.helm_owner(no_ns) is None
    slim = slim_cluster(live_tfc())
    assert slim["helm_release"] == {"name": "tf", "namespace": "tf-sys"} and slim["chart_pools"] is None


# ---- the pure diff ----------------------------------------------------------------------------------
def test_server_defaults_are_no_difference():
    """portNumber 8000, batchPercentage 100, batchInterval 1s, autoUpdate false and "" as the API
    server or the operator fills them in equal an absent field of the rendering."""
    live, rendered = live_tfc(), rendered_tfc()
    assert diff(live, rendered) == []
    del pool_of(rendered)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"]
    pool_of(live)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"].update(batchPercentage=100, autoUpdateWorker=False)
    pool_of(live)["componentConfig"]["worker"]["image"] = "worker:2.15.0"
    pool_of(live)["componentConfig"]["client"]["embeddedModeImage"] = ""
    assert diff(live, rendered) == []


def test_each_compared_field_is_reported_with_live_and_rendered_values():
    live, rendered = live_tfc(), rendered_tfc()
    pool_of(live)["componentConfig"]["hypervisor"]["image"] = "hv:2.16.0"
    policy = pool_of(live)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
    policy.update(batchPercentage=50, autoUpdateHypervisor=False, autoUpdateClient=True, batchInterval="30s")
    pool_of(live)["componentConfig"]["hypervisor"].update(portNumber=8010, enableVector=True)
    pool_of(live)["componentConfig"]["client"]["remoteModeImage"] = "client:2.16.0"
    assert diff(live, rendered) == [
        {"pool": "shared", "field": HYP_IMAGE, "live": "hv:2.16.0", "rendered": "hv:2.15.0"},
        {"pool": "shared", "field": "componentConfig.hypervisor.portNumber", "live": 8010, "rendered": 8000},
        {"pool": "shared", "field": "componentConfig.hypervisor.enableVector", "live": True, "rendered": False},
        {"pool": "shared", "field": "componentConfig.client.remoteModeImage", "live": "client:2.16.0", "rendered": None},
        {"pool": "shared", "field": "nodeManagerConfig.nodePoolRollingUpdatePolicy.autoUpdateHypervisor",
         "live": False, "rendered": True},
        {"pool": "shared", "field": "nodeManagerConfig.nodePoolRollingUpdatePolicy.autoUpdateClient",
         "live": True, "rendered": False},
        {"pool": "shared", "field": BATCH, "live": 50, "rendered": 20},
        {"pool": "shared", "field": "nodeManagerConfig.nodePoolRollingUpdatePolicy.batchInterval",
         "live": "30s", "rendered": "1s"},
    ]


def test_fields_outside_the_hashes_and_the_policy_are_not_compared():
    live = live_tfc()
    pool_of(live)["nodeManagerConfig"]["defaultVendor"] = "AMD"
    pool_of(live)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["maxDuration"] = "1h"
    pool_of(live)["componentConfig"]["nodeDiscovery"] = {"image": "nd:9"}
    assert diff(live, rendered_tfc()) == []


def test_embedded_objects_differ_without_their_content():
    live = live_tfc()
    pool_of(live)["componentConfig"]["worker"]["podTemplate"]["template"]["spec"]["containers"][0]["env"][0][
        "value"] = "other-licence"
    pool_of(live)["componentConfig"]["client"]["patchToContainer"] = {"env": [{"name": "X", "value": "y"}]}
    assert diff(live, rendered_tfc()) == [
        {"pool": "shared", "field": "componentConfig.worker.podTemplate", "hidden": True},
        {"pool": "shared", "field": "componentConfig.client.patchToContainer", "hidden": True}]


def test_whole_entries_on_one_side():
    live, rendered = live_tfc(), rendered_tfc()
    extra = copy.deepcopy(live["spec"]["gpuPools"][0])
    extra["name"] = "inference"
    live["spec"]["gpuPools"].append(extra)
    chart_only = copy.deepcopy(rendered["spec"]["gpuPools"][0])
    chart_only["name"] = "batch"
    rendered["spec"]["gpuPools"].append(chart_only)
    assert diff(live, rendered) == [{"pool": "batch", "only": "rendered"}, {"pool": "inference", "only": "live"}]


def test_credentials_in_an_endpoint_url_are_not_shown():
    live = live_tfc()
    pool_of(live)["componentConfig"]["client"]["operatorEndpoint"] = "http://user:pa55@op:8080"
    (found,) = diff(live, rendered_tfc())
    assert found["live"] == "http://***@op:8080" and "pa55" not in json.dumps(found)


# ---- the findings -----------------------------------------------------------------------------------
def picture(live, drift):
    cluster = dict(slim_cluster(live), chart_drift=drift)
    return {"namespace": "tf-sys", "clusters": [dict(cluster, phase="Running")], "pools": [], "gpunodes": [],
            "hypervisors": [], "controller": [{"name": "ctl", "namespace": "tf-sys", "replicas": 1, "available": 1}],
            "alert_manager": [], "release": {"name": "tf", "revision": 4, "status": "deployed"},
            "warning_events": [], "workloads": []}


def chart_findings(data):
    return [f for f in findings.builtin_findings(data) if f["code"].startswith("POOL_DRIFT")]


def test_drift_finding_names_each_field_with_both_values():
    live = live_tfc()
    pool_of(live)["componentConfig"]["hypervisor"]["image"] = "hv:2.16.0"
    pool_of(live)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"] = 50
    pool_of(live)["componentConfig"]["hypervisor"]["podTemplate"]["template"]["spec"]["containers"][0]["env"] = []
    data = picture(live, {"revision": 4, "unchecked": None, "differences": diff(live, rendered_tfc())})
    assert chart_findings(data) == [{
        "code": "POOL_DRIFTS_FROM_CHART", "severity": "warning", "object": "tensorfusioncluster/tensor-fusion",
        "message": "TensorFusionCluster tensor-fusion pool shared differs from the rendering of Helm release "
                   "tf-sys/tf revision 4, which the next chart upgrade that changes the rendered pools puts back "
                   "unless it keeps the live pools (keep_pools, on by default in the runbooks) (set these in the chart's values to keep them): "
                   'componentConfig.hypervisor.image live "hv:2.16.0", chart "hv:2.15.0"; '
                   "componentConfig.hypervisor.podTemplate differs (not shown: env values can be secrets); "
                   "nodeManagerConfig.nodePoolRollingUpdatePolicy.batchPercentage live 50, chart 20"}]


def test_one_finding_per_entry_and_whole_entries():
    live = live_tfc()
    extra = copy.deepcopy(live["spec"]["gpuPools"][0])
    extra["name"] = "inference"
    live["spec"]["gpuPools"].append(extra)
    pool_of(live)["componentConfig"]["worker"]["image"] = None
    data = picture(live, {"revision": 4, "unchecked": None, "differences": diff(live, rendered_tfc())})
    messages = [f["message"] for f in chart_findings(data)]
    assert messages == [
        "TensorFusionCluster tensor-fusion pool inference is not in the rendering of Helm release tf-sys/tf "
        "revision 4: the next chart upgrade that changes the rendered pools removes it unless it keeps the live "
        "pools (keep_pools, on by default in the runbooks)",
        "TensorFusionCluster tensor-fusion pool shared differs from the rendering of Helm release tf-sys/tf "
        "revision 4, which the next chart upgrade that changes the rendered pools puts back unless it keeps the "
        "live pools (keep_pools, on by default in the runbooks) (set these in the "
        'chart\'s values to keep them): componentConfig.worker.image live unset, chart "worker:2.15.0"']


def test_no_finding_without_drift_or_without_helm():
    assert chart_findings(picture(live_tfc(), {"revision": 4, "unchecked": None, "differences": []})) == []
    assert chart_findings(picture(rendered_tfc(), None)) == []


def test_unchecked_drift_is_an_info_naming_why():
    data = picture(live_tfc(), {"revision": 4, "unchecked": "forbidden: get secrets in tf-sys (...)",
                                "differences": None})
    (found,) = chart_findings(data)
    assert found["code"] == "POOL_DRIFT_UNCHECKED" and found["severity"] == "info"
    assert found["message"].endswith("is unknown: forbidden: get secrets in tf-sys (...)")


def test_a_secret_in_a_pod_template_is_never_shown():
    rendered = rendered_tfc()  # the worker podTemplate's TF_LICENSE is s3cr3t
    live = live_tfc()
    live_env = pool_of(live)["componentConfig"]["worker"]["podTemplate"]["template"]["spec"]["containers"][0]["env"]
    live_env[0]["value"] = "rotated"
    pool_of(live)["componentConfig"]["hypervisor"]["image"] = "hv:2.16.0"
    differences = diff(live, rendered)
    data = picture(live, {"revision": 4, "unchecked": None, "differences": differences})
    shown = json.dumps([differences, findings.builtin_findings(data)])
    assert "componentConfig.worker.podTemplate differs" in shown
    assert "s3cr3t" not in shown and "rotated" not in shown


# ---- the post-renderer's record -------------------------------------------------------------------------
def test_recorded_chart_pools_are_exposed_with_env_values_hashed():
    live = live_tfc()
    record = {"shared": pool_of(rendered_tfc())}
    live["metadata"]["annotations"][chart_drift.CHART_POOLS] = json.dumps(record)
    slim = slim_cluster(live)
    pools = slim["chart_pools"]
    assert pools["shared"]["componentConfig"]["hypervisor"]["image"] == "hv:2.15.0"
    env = pools["shared"]["componentConfig"]["worker"]["podTemplate"]["template"]["spec"]["containers"][0]["env"]
    assert env[0]["name"] == "TF_LICENSE" and env[0]["value"].startswith("sha256:")
    assert "s3cr3t" not in json.dumps(slim)
    live["metadata"]["annotations"][chart_drift.CHART_POOLS] = "{not json"
    assert slim_cluster(live)["chart_pools"] == {}


# ---- the release's stored rendering ---------------------------------------------------------------------
def stored_release(manifest, config=None):
    """A storage Secret's ``release`` field as the API returns it: base64 of Helm's base64 of gzip."""
    body = json.dumps({"name": "tf", "version": 4, "config": config or {}, "manifest": manifest})
    helm_b64 = base64.b64encode(gzip.compress(body.encode()))
    return base64.b64encode(helm_b64).decode()


def manifest_text(tfc=None):
    import yaml
    docs = [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds"}, "data": {"sk": "c2VjcmV0"}},
            tfc or rendered_tfc(),
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"x": "kind: Secret"}}]
    return "".join("---\n# Source: tensor-fusion/templates/x.yaml\n" + yaml.safe_dump(d) for d in docs)


def test_only_the_clusters_of_the_manifest_are_kept():
    found = chart_drift.rendered_clusters(stored_release(manifest_text(), config={"password": "hunter22"}))
    assert list(found) == ["tensor-fusion"] and found["tensor-fusion"] == rendered_tfc()
    assert "hunter22" not in json.dumps(found) and "c2VjcmV0" not in json.dumps(found)


def test_unreadable_renderings_never_quote_their_content():
    with pytest.raises(chart_drift.ChartRenderingError, match="cannot be decoded"):
        chart_drift.rendered_clusters("bm90IGd6aXA=")
    with pytest.raises(chart_drift.ChartRenderingError, match="cannot be decoded"):
        chart_drift.rendered_clusters(None)
    broken = "---\nkind: TensorFusionCluster\nspec: {env: [value: s3cr3t\n"
    with pytest.raises(chart_drift.ChartRenderingError) as exc:
        chart_drift.rendered_clusters(stored_release(broken))
    assert "s3cr3t" not in str(exc.value)


# ---- the gathering, against a stand-in API ----------------------------------------------------------------
class Response:
    def __init__(self, body):
        self.data = json.dumps(body).encode()


class FakeResource:
    name = "secrets"

    def path(self, name=None, namespace=None):
        return "/api/v1/namespaces/%s/secrets%s" % (namespace, "/" + name if name else "")


class FakeKube:
    """Serves Helm's storage Secrets of one release; ``get_error`` makes the GET fail."""

    def __init__(self, revisions, release_data, get_error=None):
        self.revisions, self.release_data, self.get_error = revisions, release_data, get_error
        self.requests, self.gets = 0, []
        self.dynamic = self

    def resource(self, kind, api_version=None, group=None):
        return FakeResource()

    def request(self, method, path, query_params=None, header_params=None, serialize=False):
        if query_params is not None:  # a list of Helm's storage labels (metadata only)
            assert "PartialObjectMetadataList" in header_params["Accept"]
            return Response({"items": [{"metadata": {"name": "sh.helm.release.v1.tf.v%d" % v, "labels": {
                "owner": "helm", "name": "tf", "status": s, "version": str(v)}}} for v, s in self.revisions]})
        self.gets.append(path)
        if self.get_error:
            raise self.get_error
        return Response({"kind": "Secret", "data": {"release": self.release_data}})

    def call(self, verb, what, fn, *args, **kwargs):
        return fn(*args, **kwargs)


def gathered(kube, live):
    gatherer = Gatherer(kube, "tf-sys", "tf")
    live_pools = {}
    clusters = [gatherer._cluster_projection(live_pools)(live)]
    gatherer._release()
    gatherer._chart_drift(clusters, live_pools)
    return clusters[0]


def test_the_newest_deployed_revision_is_read_once():
    live = live_tfc()
    pool_of(live)["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"] = 50
    kube = FakeKube([(2, "superseded"), (3, "deployed"), (4, "pending-upgrade")], stored_release(manifest_text()))
    tfc = gathered(kube, live)
    assert kube.gets == ["/api/v1/namespaces/tf-sys/secrets/sh.helm.release.v1.tf.v3"]
    assert tfc["chart_drift"] == {"revision": 3, "unchecked": None, "differences": [
        {"pool": "shared", "field": BATCH, "live": 50, "rendered": 20}]}
    assert "s3cr3t" not in json.dumps(tfc)


def test_not_owned_or_post_rendered_clusters_fetch_nothing():
    kube = FakeKube([(3, "deployed")], stored_release(manifest_text()))
    assert gathered(kube, rendered_tfc())["chart_drift"] is None
    annotated = live_tfc()
    annotated["metadata"]["annotations"][chart_drift.CHART_POOLS] = json.dumps({"shared": {}})
    pool_of(annotated)["componentConfig"]["hypervisor"]["image"] = "hv:9"
    tfc = gathered(kube, annotated)
    assert tfc["chart_drift"] is None and tfc["chart_pools"] == {"shared": {}}
    assert kube.gets == []


@pytest.mark.parametrize("error, revisions, text", [
    (Forbidden("forbidden: get secrets/tf-sys/x (no)", status=403), [(3, "deployed")],
     "forbidden: get secrets in tf-sys (Helm's storage Secret sh.helm.release.v1.tf.v3"),
    (ApiError("gone", status=404), [(3, "deployed")], "is gone"),
    (None, [(3, "failed")], "has no deployed revision"),
])
def test_what_cannot_be_checked_is_said_not_failed(error, revisions, text):
    tfc = gathered(FakeKube(revisions, stored_release(manifest_text()), get_error=error), live_tfc())
    assert tfc["chart_drift"]["differences"] is None and text in tfc["chart_drift"]["unchecked"]


def test_a_release_without_the_cluster_is_unchecked():
    other = rendered_tfc()
    other["metadata"]["name"] = "another"
    tfc = gathered(FakeKube([(3, "deployed")], stored_release(manifest_text(other))), live_tfc())
    assert tfc["chart_drift"]["unchecked"] == "revision 3 of Helm release tf-sys/tf renders no TensorFusionCluster tensor-fusion"


def test_other_api_errors_still_fail():
    kube = FakeKube([(3, "deployed")], "", get_error=ApiError("boom", status=500))
    with pytest.raises(ApiError):
        gathered(kube, live_tfc())
