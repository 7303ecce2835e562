"""The collection against a release outside ``tensor-fusion-sys``: this package's lab installs
TensorFusion into its own namespace, where the operator puts its hypervisor Pods (upstream's
OPERATOR_NAMESPACE), and gpupool_rollout follows them there. Also the hash rules as the operator
applies them: a change of template metadata alone is written, but rolls nothing."""
import json
import uuid

from ..ansible_runner import run_playbook
from .conftest import NS

HV = "tensorfusion/tensor-fusion-hypervisor"


def rollout(tf_lab, **opts):
    extra = {"lab_kubeconfig": tf_lab["kubeconfig"], "gr_namespace": NS, "gr_wait_timeout": 180}
    extra.update({"gr_" + k: v for k, v in opts.items()})
    run = run_playbook("gpupool_rollout.yml", extra)
    return run, run.task_results("Rollout")


def test_the_release_namespace_is_not_the_default(tf_lab, tfx):
    assert tf_lab["tensorfusion"]["namespace"] == NS != "tensor-fusion-sys"
    pods = tfx.hv_pods()
    assert len(pods) == tf_lab["nodes"]
    assert not tfx.core.list_namespaced_pod(
        "tensor-fusion-sys", label_selector="tensor-fusion.ai/component=hypervisor").items


def test_a_pool_rollout_in_the_release_namespace(tf_lab, tfx):
    image = f"{HV}:ns-1.0.0"
    run, res = rollout(tf_lab, components={"hypervisor": {"image": image}},
                       rolling_update={"auto_update_hypervisor": True, "batch_percentage": 50})
    assert run.rc == 0, res.get("msg")
    assert res["changed"] is True and res["waited_for"] == ["hypervisor"]
    assert res["nodes"] == {"total": tf_lab["nodes"], "updated": tf_lab["nodes"], "stuck": 0}
    assert {p.spec.containers[0].image for p in tfx.hv_pods().values()} == {image}
    again, res2 = rollout(tf_lab, components={"hypervisor": {"image": image}},
                          rolling_update={"auto_update_hypervisor": True, "batch_percentage": 50})
    assert again.rc == 0 and res2["changed"] is False and res2["waited_for"] == []


def test_template_metadata_alone_is_written_but_rolls_nothing(tf_lab, tfx):
    before_hash = tfx.cs().get("hypervisor")
    uids = {name: pod.metadata.uid for name, pod in tfx.hv_pods().items()}
    run, res = rollout(tf_lab, components={"hypervisor": {"pod_template": {"template": {
        "metadata": {"annotations": {"example.com/owner": "gpu-team"}}}}}},
        rolling_update={"auto_update_hypervisor": True})
    assert run.rc == 0, res.get("msg")
    assert res["changed"] is True  # the TensorFusionCluster was written
    assert res["changed_components"] == [] and res["waited_for"] == []
    assert any("does not hash" in w for w in res.get("warnings", [])), res.get("warnings")
    template = tfx.template()["componentConfig"]["hypervisor"]
    assert template["podTemplate"]["template"]["metadata"]["annotations"] == {
        "example.com/owner": "gpu-team"}
    # The operator saw the change (the GPUPool follows the TFC) and started no campaign.
    tfx.wait_pool(lambda p: (((p["spec"]["componentConfig"]["hypervisor"].get("podTemplate") or {})
                              .get("template") or {}).get("metadata") or {}).get("annotations"))
    pool = tfx.pool()
    assert pool["status"]["componentStatus"].get("hypervisor") == before_hash
    assert not (pool["metadata"].get("annotations") or {}).get(
        "tensor-fusion.ai/hypervisor-update-in-progress")
    assert {name: pod.metadata.uid for name, pod in tfx.hv_pods().items()} == uids


def test_a_secret_rotation_for_the_hypervisors_in_the_release_namespace(tf_lab, tfx):
    """secret_rotate in place for a Secret the hypervisor template uses, all in the release's own
    namespace: the hypervisor Pods there roll onto the new version and are verified; discovery finds
    the pool component because TensorFusion's controller runs in that namespace."""
    name = "pull-" + uuid.uuid4().hex[:5]
    tfx.core.create_namespaced_secret(NS, {"metadata": {"name": name}, "type": "Opaque",
                                           "stringData": {"token": "old-" + uuid.uuid4().hex}})
    before = tfx.tfc()["spec"]["gpuPools"][0]
    try:
        template = before["specTemplate"]["componentConfig"]["hypervisor"]["podTemplate"]
        template = json.loads(json.dumps(template))
        template["template"]["spec"]["imagePullSecrets"] = [{"name": name}]
        run, res = rollout(tf_lab, components={"hypervisor": {"pod_template": template}},
                           rolling_update={"auto_update_hypervisor": True, "batch_percentage": 50})
        assert run.rc == 0, res.get("msg")
        new_value = "new-" + uuid.uuid4().hex
        run = run_playbook("secret_rotate.yml", {"lab_kubeconfig": tf_lab["kubeconfig"], "sr_name": name,
                                                 "sr_namespace": NS, "sr_strategy": "in_place",
                                                 "sr_string_data": {"token": new_value}})
        res = run.task_results("Rotate")
        assert run.rc == 0, res.get("msg")
        assert {"kind": "TensorFusionCluster", "name": "tensor-fusion", "pool": "shared",
                "component": "hypervisor"} in res["consumers"]
        assert [s["step"] for s in res["steps"]][-2:] == ["roll", "verify"]
        version = tfx.core.read_namespaced_secret(name, NS).metadata
        want = "%s:%s" % (version.uid, version.resource_version)
        env_name = "TFOPS_SECRET_VERSION_" + name.upper().replace("-", "_")
        pods = tfx.hv_pods().values()
        assert pods and all({(e.name, e.value) for e in p.spec.containers[0].env or []} >= {(env_name, want)}
                            for p in pods)
        assert new_value not in run.stdout + run.stderr
    finally:
        cluster = tfx.tfc()
        cluster["spec"]["gpuPools"][0] = before
        tfx.co.replace_cluster_custom_object("tensor-fusion.ai", "v1", "tensorfusionclusters", "tensor-fusion", cluster)
        for secret in tfx.core.list_namespaced_secret(NS).items:
            if secret.metadata.name.startswith(name):
                tfx.core.delete_namespaced_secret(secret.metadata.name, NS)
