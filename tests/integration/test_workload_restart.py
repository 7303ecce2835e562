"""workload_restart against the lab: real controller-manager rollouts, honest changed, check mode,
the TensorFusion controller found by labels, Secret-driven idempotence, and a stuck rollout that
fails with its reason."""

from kubernetes import client

from .ansible_runner import run_playbook
from .helpers import deployment, wait_for

TASK = "Restart"


def restart(lab, check=False, diff=False, **opts):
    args = (["--check"] if check else []) + (["--diff"] if diff else [])
    extra = {"lab_kubeconfig": lab["kubeconfig"]}
    extra.update({"wr_" + k: v for k, v in opts.items()})
    run = run_playbook("workload_restart.yml", extra, args=args)
    return run, run.task_results(TASK)


def ready_deployment(api_client, ns, name, labels=None, image="registry.lab/app:1", replicas=2):
    apps = client.AppsV1Api(api_client)
    body = deployment(name, image=image, replicas=replicas)
    body["metadata"]["labels"].update(labels or {})
    apps.create_namespaced_deployment(ns, body)
    return wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == name
                    and (d.status.available_replicas or 0) == replicas
                    and d.status.observed_generation == d.metadata.generation, namespace=ns)


def test_restart_by_name_then_idempotent_with_restarted_after(lab, api_client, ns):
    ready_deployment(api_client, ns, "web")
    run, res = restart(lab, namespace=ns, name="web")
    assert run.rc == 0, res
    assert res["changed"] is True
    [item] = res["workloads"]
    assert item["restarted"] and item["old_revision"] != item["new_revision"]
    assert item["new_revision"].startswith("web-")
    dep = client.AppsV1Api(api_client).read_namespaced_deployment("web", ns)
    assert dep.status.updated_replicas == dep.status.available_replicas == 2
    # Same call with the first restart's time: every Pod started after it, nothing to do.
    run, res2 = restart(lab, namespace=ns, name="web", restarted_after=item["restarted_at"])
    assert run.rc == 0
    assert res2["changed"] is False
    assert res2["workloads"][0]["new_revision"] == item["new_revision"]


def test_check_mode_writes_nothing(lab, api_client, ns):
    before = ready_deployment(api_client, ns, "web").metadata.resource_version
    run, res = restart(lab, check=True, diff=True, namespace=ns, name="web")
    assert run.rc == 0
    assert res["changed"] is True and res["workloads"][0]["new_revision"] is None
    assert "kubectl.kubernetes.io/restartedAt" in res["diff"][0]["after"]
    after = client.AppsV1Api(api_client).read_namespaced_deployment("web", ns).metadata.resource_version
    assert after == before


def test_finds_the_tensorfusion_controller_by_its_labels(lab, api_client, ns):
    ready_deployment(api_client, ns, "tensor-fusion-sys-controller",
                     labels={"tensor-fusion.ai/component": "operator"}, replicas=1)
    ready_deployment(api_client, ns, "bystander", replicas=1)
    run, res = restart(lab, namespace=ns)
    assert run.rc == 0, res
    assert [w["name"] for w in res["workloads"]] == ["tensor-fusion-sys-controller"]
    bystander = client.AppsV1Api(api_client).read_namespaced_deployment("bystander", ns)
    assert bystander.metadata.generation == 1, "nothing else was touched"


def test_no_controller_found_is_a_clear_error(lab, ns):
    run, res = restart(lab, namespace=ns)
    assert run.rc != 0
    assert res["msg"] == f"no Deployment in namespace {ns} matches tensor-fusion.ai/component=operator"


def test_restart_once_per_secret_change_and_no_secret_in_output(lab, api_client, ns):
    core = client.CoreV1Api(api_client)
    ready_deployment(api_client, ns, "ctl", replicas=1)
    core.create_namespaced_secret(ns, {"metadata": {"name": "creds"},
                                       "stringData": {"password": "s3cr3t-value-1"}})
    ref = {"name": "creds"}
    run, res = restart(lab, namespace=ns, name="ctl", restarted_after_secret=ref)
    assert run.rc == 0 and res["changed"] is True
    run, res = restart(lab, namespace=ns, name="ctl", restarted_after_secret=ref)
    assert run.rc == 0 and res["changed"] is False, "already restarted after the Secret changed"
    core.patch_namespaced_secret("creds", ns, {"stringData": {"password": "s3cr3t-value-2"}})
    args = ["-vvv"]
    run = run_playbook("workload_restart.yml", {"lab_kubeconfig": lab["kubeconfig"], "wr_namespace": ns,
                                                "wr_name": "ctl", "wr_restarted_after_secret": ref},
                       args=args)
    assert run.rc == 0 and run.task_results(TASK)["changed"] is True
    for value in ("s3cr3t-value-1", "s3cr3t-value-2"):
        assert value not in run.stdout + run.stderr


def test_statefulset_and_daemonset(lab, api_client, ns):
    apps = client.AppsV1Api(api_client)
    labels = {"app": "sts"}
    apps.create_namespaced_stateful_set(ns, {
        "metadata": {"name": "sts"},
        "spec": {"replicas": 2, "serviceName": "sts", "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "c", "image": "registry.lab/s:1"}]}}}})
    wait_for(apps.list_namespaced_stateful_set, lambda s: s.metadata.name == "sts"
             and (s.status.ready_replicas or 0) == 2, namespace=ns)
    run, res = restart(lab, kind="StatefulSet", namespace=ns, name="sts")
    assert run.rc == 0, res
    item = res["workloads"][0]
    assert item["old_revision"] != item["new_revision"]
    sts = apps.read_namespaced_stateful_set("sts", ns)
    assert sts.status.current_revision == sts.status.update_revision == item["new_revision"]

    labels = {"app": "ds"}
    apps.create_namespaced_daemon_set(ns, {
        "metadata": {"name": "ds", "labels": labels},
        "spec": {"selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"nodeSelector": {"nvidia.com/gpu.present": "true"},
                                       "containers": [{"name": "c", "image": "registry.lab/d:1"}]}}}})
    wait_for(apps.list_namespaced_daemon_set, lambda d: d.metadata.name == "ds"
             and (d.status.number_available or 0) == lab["nodes"], namespace=ns)
    run, res = restart(lab, kind="DaemonSet", namespace=ns, label_selectors=["app=ds"])
    assert run.rc == 0, res
    ds = apps.read_namespaced_daemon_set("ds", ns)
    assert ds.status.updated_number_scheduled == ds.status.number_available == lab["nodes"]


def test_stuck_rollout_fails_with_the_reason(lab, api_client, ns):
    core = client.CoreV1Api(api_client)
    ready_deployment(api_client, ns, "web", image="registry.lab/will-break:1", replicas=1)
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                      "data": {"neverReadyImages": "will-break"}})
    try:
        run, res = restart(lab, namespace=ns, name="web", wait_timeout=8)
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    assert run.rc != 0
    assert res["error"] == "WaitTimeout"
    assert "timed out (timeout of 8s) waiting for deployments" in res["msg"]
    assert "ImagePullBackOff" in res["msg"]


def test_unknown_name_fails_before_any_write(lab, api_client, ns):
    before = ready_deployment(api_client, ns, "web", replicas=1).metadata.resource_version
    run, res = restart(lab, namespace=ns, name="nope")
    assert run.rc != 0
    assert res["msg"] == "Deployment %s/nope does not exist" % ns  # #36: it read "get deployments/nope failed: ... not found"
    assert client.AppsV1Api(api_client).read_namespaced_deployment("web", ns).metadata.resource_version == before
