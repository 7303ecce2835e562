"""The test chart from the lab's chart repository with real helm 3 and helm 4: the documented
command verbatim (with values-cn.yaml), helm's schema check against the API server's OpenAPI,
upgrades that roll the hypervisors (new images and a new operator version), the
TensorFusionCluster the chart owns, values that shape the controller (and both controller names
found by the collection), Secrets that helm must not touch, and helm 4's server-side apply with
field ownership."""
import base64
import json
import os
import subprocess

import pytest

from lab import paths
from lab import tensorfusion as tf

from .conftest import NS

REL = tf.RELEASE


def helm(state, major, *args, check=True):
    env = {**os.environ, "KUBECONFIG": state["kubeconfig"]}
    res = subprocess.run([str(paths.helm_binary(major)), *args], capture_output=True, text=True,
                         env=env)
    assert not check or res.returncode == 0, res.stderr
    return res


def documented(state, major, *extra):
    """`helm upgrade --install --create-namespace --namespace tensor-fusion-sys --repo <url>
    tensor-fusion-sys tensor-fusion -f <url>/values-cn.yaml`, verbatim (plus ``extra``)."""
    repo = state["tensorfusion"]["chart_repo"]
    return helm(state, major, "upgrade", "--install", "--create-namespace", "--namespace", NS,
                "--repo", repo, REL, "tensor-fusion", "-f", f"{repo}/values-cn.yaml", *extra)


def release(state):
    out = helm(state, "3", "list", "-n", NS, "-o", "json").stdout
    return {r["name"]: r for r in json.loads(out)}[REL]


def controller(tfx):
    deps = tfx.apps.list_namespaced_deployment(
        NS, label_selector="tensor-fusion.ai/component=operator").items
    assert len(deps) == 1, [d.metadata.name for d in deps]
    return deps[0]


def images(tfx):
    return {p.spec.containers[0].image for p in tfx.hv_pods().values()}


def history(state):
    return json.loads(helm(state, "3", "history", REL, "-n", NS, "-o", "json").stdout)


@pytest.mark.parametrize("major", ["3", "4"])
def test_helm_checks_the_chart_against_the_servers_schema(tfx, tf_lab, major):
    """No flag needed on a current API server: helm checks the rendered chart against the
    server's OpenAPI (a server-side dry run writes nothing), and the alert-manager Services'
    internalTrafficPolicy, which Kubernetes 1.20 did not know, is a field it knows and stores."""
    repo = tf_lab["tensorfusion"]["chart_repo"]
    args = ["upgrade", "--install", "-n", NS, "--repo", repo, REL, "tensor-fusion", "--version", tf.V1]
    before = history(tf_lab)
    helm(tf_lab, major, *args, "--dry-run=server")
    assert history(tf_lab) == before
    svc = tfx.core.read_namespaced_service("alert-manager", NS)
    assert svc.spec.internal_traffic_policy == "Cluster"


def test_the_chart_owns_the_cluster_and_its_rolling_policy(tfx, tf_lab):
    """The TensorFusionCluster as upstream's chart renders it: kept, one default pool, images from
    values, the rolling policy written into the template."""
    tfc = tfx.tfc()
    assert tfc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert tfc["metadata"]["annotations"]["meta.helm.sh/release-name"] == REL
    [pool] = tfc["spec"]["gpuPools"]
    assert pool["name"] == "shared" and pool["isDefault"] is True
    spec = pool["specTemplate"]
    cc, nmc = spec["componentConfig"], spec["nodeManagerConfig"]
    values = tf.VERSIONS[tf.V1]["values"]
    assert cc["hypervisor"]["image"] == values["cluster"]["hypervisorImage"]
    images = values["providerConfigs"]["nvidia"]["images"]
    assert {cc["client"][k] for k in ("image", "remoteModeImage", "embeddedModeImage")} == \
        {images["remoteClient"]}
    assert cc["worker"]["image"] == images["remoteWorker"]
    assert cc["client"]["operatorEndpoint"] == f"http://tensor-fusion-sys.{NS}:8080"
    assert nmc["nodePoolRollingUpdatePolicy"] == {
        "autoUpdateHypervisor": True, "batchInterval": "1s", "batchPercentage": 20,
        "maxDuration": "10m", "maintenanceWindow": {"includes": ["2 2 * * *"]}}
    assert (nmc["provisioningMode"], nmc["defaultVendor"], nmc["defaultIsolationMode"]) == \
        ("AutoSelect", "NVIDIA", "soft")
    assert nmc["nodeSelector"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}]
    assert spec["schedulingConfigTemplate"] == "tf-scheduling-config"
    assert spec["capacityConfig"]["minResources"] == {"tflops": "20", "vram": "10Gi"}
    # The controller as the real chart names and labels it.
    dep = controller(tfx)
    assert dep.metadata.name == f"{REL}-controller"
    assert dep.metadata.labels["tensor-fusion.ai/component"] == "operator"
    assert "app.kubernetes.io/instance" not in dep.metadata.labels
    assert dep.spec.selector.match_labels == dep.spec.template.metadata.labels == {
        "app.kubernetes.io/name": "tensor-fusion", "app.kubernetes.io/instance": REL,
        "app.kubernetes.io/component": "controller", "tensor-fusion.ai/component": "operator"}


def test_documented_command_with_helm4_upgrades_to_latest(tfx, tf_lab, fast_gaps):
    before = tfx.wait_synced()["status"]["componentStatus"]["hypervisor"]
    revs_before = tfx.pool()["metadata"]["annotations"]["tensor-fusion.ai/provider-config-revisions"]
    documented(tf_lab, "4")
    assert release(tf_lab)["chart"] == f"tensor-fusion-{tf.V2}"
    dep = controller(tfx)
    assert dep.metadata.name == "tensor-fusion-sys-controller"   # the real chart's name
    assert dep.spec.template.spec.containers[0].image == \
        "registry.cn-hangzhou.aliyuncs.com/tensorfusion/tensor-fusion-operator:2.17.0"
    sts = tfx.apps.list_namespaced_stateful_set(
        NS, label_selector="tensor-fusion.ai/component=alert-manager").items
    assert [s.spec.template.spec.containers[0].image for s in sts] == \
        ["docker.m.daocloud.io/prom/alertmanager:v0.28.1"]
    # New hypervisor image (values-cn does not mirror it), new operator version, new
    # ProviderConfig: the hypervisors roll without any edit of ours.
    tfx.wait_synced(differs_from=before, timeout=120)
    assert images(tfx) == {"tensorfusion/tensor-fusion-hypervisor:2.15.0"}
    assert tfx.pool()["metadata"]["annotations"][
        "tensor-fusion.ai/provider-config-revisions"] != revs_before


def test_helm3_back_to_previous_version(tfx, tf_lab, fast_gaps):
    before = tfx.wait_synced()["status"]["componentStatus"]["hypervisor"]
    helm(tf_lab, "3", "upgrade", "--install", "-n", NS, "--repo", tf_lab["tensorfusion"]["chart_repo"],
         REL, "tensor-fusion", "--version", tf.V1, "--wait", "--reset-values")
    assert release(tf_lab)["chart"] == f"tensor-fusion-{tf.V1}"
    assert controller(tfx).spec.template.spec.containers[0].image == \
        "tensorfusion/tensor-fusion-operator:2.16.0"
    tfx.wait_synced(differs_from=before, timeout=120)
    assert images(tfx) == {"tensorfusion/tensor-fusion-hypervisor:2.14.0"}


def test_values_shape_the_controller(tfx, tf_lab):
    repo = tf_lab["tensorfusion"]["chart_repo"]
    common = ["upgrade", "--install", "-n", NS, "--repo", repo, REL, "tensor-fusion",
              "--version", tf.V1, "--wait"]
    # The product docs' name for the controller: the collection must find it as well.
    helm(tf_lab, "3", *common, "--set", "controller.deploymentName=tensor-fusion-sys-controller-manager",
         "--set", "agent.agentId=agent-1", "--set", "imagePullSecrets[0].name=regcred",
         "--set", "greptime.isCloud=true", "--set", "greptime.password=s3cret")
    try:
        dep = controller(tfx)
        assert dep.metadata.name == "tensor-fusion-sys-controller-manager"   # the docs' name
        assert collection_finds_controller(tf_lab) == "tensor-fusion-sys-controller-manager"
        spec = dep.spec.template.spec
        ctrs = {c.name: c for c in spec.containers}
        assert set(ctrs) == {"controller", "cluster-agent", "vector"}
        assert [s.name for s in spec.image_pull_secrets] == ["regcred"]
        ref = {e.name: e for e in ctrs["controller"].env}["TSDB_MYSQL_PASSWORD"]
        assert ref.value_from.secret_key_ref.name == f"{REL}-greptimedb-secret"
        secret = tfx.core.read_namespaced_secret(f"{REL}-greptimedb-secret", NS)
        assert base64.b64decode(secret.data["password"]).decode() == "s3cret"
        # The double follows the Pods, whatever the Deployment is called.
        tfx.knobs(batchGapFloorSeconds="1")
        before = tfx.wait_synced()["status"]["componentStatus"]["hypervisor"]
        tfx.hv_image("tensorfusion/tensor-fusion-hypervisor:renamed-controller")
        tfx.wait_synced(differs_from=before)
    finally:
        tfx.knobs(batchGapFloorSeconds=None)
        helm(tf_lab, "3", *common, "--reset-values")
    assert controller(tfx).metadata.name == "tensor-fusion-sys-controller"
    assert collection_finds_controller(tf_lab) == "tensor-fusion-sys-controller"


def collection_finds_controller(state):
    """The controller Deployment as the collection finds it (workload_restart's default target, the
    upgrade role's wait), whatever its name; the RBAC of roles/rbac/files names both."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import resolve_auth
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import Kube
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.restart import Restarter
    kube = Kube(resolve_auth({"kubeconfig": state["kubeconfig"]}, environ={}))
    try:
        [dep] = Restarter(kube, "Deployment").find(NS)
    finally:
        kube.close()
    assert dep["metadata"]["name"] in (tf.REPO_ROOT / "roles" / "rbac" / "files" / "upgrade.yml").read_text()
    return dep["metadata"]["name"]


def test_vendor_credentials_are_created_once_and_never_updated(tfx, tf_lab):
    name = "tf-cloud-vendor-credentials"
    sec = tfx.core.read_namespaced_secret(name, NS)
    assert base64.b64decode(sec.data["ak"]) == b"dummy"
    assert sec.metadata.annotations["helm.sh/resource-policy"] == "keep"
    tfx.core.patch_namespaced_secret(name, NS, {"stringData": {"ak": "rotated-by-hand"}})
    helm(tf_lab, "3", "upgrade", "--install", "-n", NS, "--repo", tf_lab["tensorfusion"]["chart_repo"],
         REL, "tensor-fusion", "--version", tf.V1, "--set", "cloudVendorCredentials.accessKey=new")
    sec = tfx.core.read_namespaced_secret(name, NS)
    assert base64.b64decode(sec.data["ak"]) == b"rotated-by-hand"


def test_helm4_uninstall_then_fresh_install(tfx, tf_lab):
    helm(tf_lab, "4", "uninstall", REL, "-n", NS, "--wait")
    # keep: the cluster, its ProviderConfig and the credentials survive an uninstall
    assert tfx.tfc()["metadata"]["name"] == "tensor-fusion"
    tfx.core.read_namespaced_secret("tf-cloud-vendor-credentials", NS)
    args = ["upgrade", "--install", "--create-namespace", "-n", NS, "--repo",
            tf_lab["tensorfusion"]["chart_repo"], REL, "tensor-fusion", "--version", tf.V1, "--wait",
            "--timeout", "120s"]
    # A fresh helm 4 release applies server-side, with field ownership: the kept
    # TensorFusionCluster was edited by another field manager (the tests' client), so the apply
    # conflicts unless forced.
    res = helm(tf_lab, "4", *args, check=False)
    assert res.returncode != 0 and "conflict" in res.stderr, res.stderr
    helm(tf_lab, "4", *args, "--force-conflicts")
    assert release(tf_lab)["status"] == "deployed"
    svc = tfx.core.read_namespaced_service("alert-manager", NS)
    assert svc.spec.internal_traffic_policy == "Cluster"
    tfx.apps.read_namespaced_stateful_set(f"{REL}-alert-manager", NS)
    tf.wait_settled(tf_lab, 60)
    tfx.wait_synced()
