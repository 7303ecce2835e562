"""The test chart from the lab's chart repository with real helm 3 and helm 4: the documented
command verbatim (with values-cn.yaml), upgrades that roll the hypervisors (new images and a new
operator version), values that shape the controller, Secrets that helm must not touch."""
import base64
import json
import os
import subprocess

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


def test_documented_command_with_helm4_upgrades_to_latest(tfx, tf_lab, fast_gaps):
    before = tfx.wait_synced()["status"]["componentStatus"]["hypervisor"]
    revs_before = tfx.pool()["metadata"]["annotations"]["tensor-fusion.ai/provider-config-revisions"]
    documented(tf_lab, "4")
    assert release(tf_lab)["chart"] == f"tensor-fusion-{tf.V2}"
    dep = controller(tfx)
    assert dep.metadata.name == "tensor-fusion-sys-controller-manager"
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
    helm(tf_lab, "3", *common, "--set", "controller.deploymentName=tensor-fusion-sys-controller",
         "--set", "agent.agentId=agent-1", "--set", "imagePullSecrets[0].name=regcred",
         "--set", "greptime.isCloud=true", "--set", "greptime.password=s3cret")
    try:
        dep = controller(tfx)
        assert dep.metadata.name == "tensor-fusion-sys-controller"   # the real chart's name
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
    assert controller(tfx).metadata.name == "tensor-fusion-sys-controller-manager"


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
            tf_lab["tensorfusion"]["chart_repo"], REL, "tensor-fusion", "--version", tf.V1, "--wait"]
    # A fresh helm 4 release uses server-side apply: the kept TensorFusionCluster was edited by
    # another field manager (the tests' client), so the apply conflicts unless forced.
    res = helm(tf_lab, "4", *args, check=False)
    assert res.returncode != 0 and "conflict" in res.stderr, res.stderr
    helm(tf_lab, "4", *args, "--force-conflicts")
    assert release(tf_lab)["status"] == "deployed"
    tf.wait_pools_running(tf_lab, 60)
    tfx.wait_synced()
