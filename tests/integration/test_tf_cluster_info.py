"""tf_cluster_info on the lab: a healthy installation has no blocking finding, and each unhealthy
case made on the lab (a pending release, a stuck hypervisor, a stopped controller, a fragile
business workload, a live pool edit the next chart upgrade would revert) shows up with its code."""
import contextlib
import json
import uuid

from kubernetes import client

from .ansible_runner import run_playbook
from .helpers import GROUP, NS, VERSION, tfc, wait_for, wait_pool
from .settle import controller_stopped, settle


def info(lab, **opts):
    extra = {"lab_kubeconfig": lab["kubeconfig"], **{"ci_" + k: v for k, v in opts.items()}}
    run = run_playbook("tf_cluster_info.yml", extra)
    res = run.task_results("Info")
    assert run.rc == 0, res.get("msg")
    return res


def codes(res, severity=None):
    return sorted({f["code"] for f in res["findings"] if severity in (None, f["severity"])})


def test_healthy_lab_has_no_blocking_finding(lab, api_client):
    settle(api_client)
    res = info(lab)
    assert res["summary"]["blocking"] == 0, res["findings"]
    data = res["data"]
    assert [c["name"] for c in data["clusters"]] == ["tensor-fusion"]
    assert data["pools"][0]["name"] == "tensor-fusion-shared"
    assert len(data["gpunodes"]) == lab["nodes"] == data["gpus"]["total"]
    assert len(data["hypervisors"]) == lab["nodes"]
    assert data["release"]["status"] == "deployed"
    assert data["controller"][0]["available"] >= 1
    assert res["api_requests"] <= 20, "a few list calls, not one per object"


def test_cached_and_consistent_reads_agree(lab, api_client):
    """The watch-cache reads (default) and the paged etcd reads give the same picture, and the
    GPUs counted from the Table view's Phase column are the GPUs listed."""
    settle(api_client)
    cached, consistent = info(lab), info(lab, cached_reads=False)
    for key in ("gpunodes", "hypervisors", "gpus", "workloads", "pools", "release"):
        assert cached["data"][key] == consistent["data"][key], key
    gpus = client.CustomObjectsApi(api_client).list_cluster_custom_object(GROUP, VERSION, "gpus")["items"]
    assert cached["data"]["gpus"]["total"] == len(gpus)
    assert cached["data"]["gpus"]["by_phase"] == {
        phase: sum(1 for g in gpus if (g.get("status") or {}).get("phase", "") == phase)
        for phase in {(g.get("status") or {}).get("phase", "") for g in gpus}}
    assert cached["api_requests"] <= consistent["api_requests"]


def test_pending_release_is_blocking(lab, api_client, ns):
    core = client.CoreV1Api(api_client)
    # Helm's own storage record of a release stuck mid-upgrade (only the labels matter here).
    core.create_namespaced_secret(ns, {"metadata": {
        "name": "sh.helm.release.v1.tf.v2",
        "labels": {"owner": "helm", "name": "tf", "status": "pending-upgrade", "version": "2"}},
        "type": "helm.sh/release.v1", "stringData": {"release": "not read"}})
    res = info(lab, namespace=ns, release_name="tf")
    assert "RELEASE_PENDING" in codes(res, "blocking")
    assert "CONTROLLER_MISSING" in codes(res, "blocking")


def _image_pull_failing(pod):
    return any(c.state and c.state.waiting and c.state.waiting.reason == "ImagePullBackOff"
               for c in pod.status.container_statuses or [])


def test_stuck_hypervisor_pending_node_and_recovery(lab, api_client):
    core = client.CoreV1Api(api_client)
    pod = core.read_namespaced_pod("hypervisor-tfops-gpu-3", NS)
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                      "data": {"neverReadyImages": pod.spec.containers[0].image}})
    try:
        core.delete_namespaced_pod("hypervisor-tfops-gpu-3", NS)
        wait_pool(api_client, lambda p: (p.get("status") or {}).get("phase") != "Running")
        # The pool leaves Running as soon as the node does; the kubelet reports the image pull
        # failing a moment later: the picture is taken once the new Pod says so.
        wait_for(core.list_namespaced_pod, _image_pull_failing, NS,
                 field_selector="metadata.name=hypervisor-tfops-gpu-3", what="hypervisor-tfops-gpu-3 in ImagePullBackOff")
        res = info(lab)
        blocking = codes(res, "blocking")
        for code in ("HYPERVISOR_NOT_READY", "GPUNODE_NOT_RUNNING", "POOL_NOT_RUNNING"):
            assert code in blocking, res["findings"]
        stuck = [f for f in res["findings"] if f["code"] == "HYPERVISOR_NOT_READY"]
        assert "tfops-gpu-3" in stuck[0]["message"] and "ImagePullBackOff" in stuck[0]["message"]
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    wait_pool(api_client, lambda p: (p.get("status") or {}).get("phase") == "Running")


def test_fragile_business_workload_warnings(lab, api_client, ns):
    apps = client.AppsV1Api(api_client)
    labels = {"app": "llm", "tensor-fusion.ai/enabled": "true"}
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "llm"},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "llm"}},
                 "template": {"metadata": {"labels": labels, "annotations": {
                     "tensor-fusion.ai/tflops-request": "10", "tensor-fusion.ai/vram-request": "1Gi"}},
                     "spec": {"containers": [{"name": "c", "image": "registry.lab/llm:1"}]}}}})
    _rolled_out(apps, ns, "llm", 1)  # else it is also in the middle of its rollout (another finding)
    res = info(lab)
    mine = sorted(f["code"] for f in res["findings"] if f["object"] == f"deployment/{ns}/llm")
    assert mine == ["WORKLOAD_NO_PDB", "WORKLOAD_NO_READINESS_PROBE", "WORKLOAD_SINGLE_REPLICA"]
    apps.patch_namespaced_deployment("llm", ns, {"spec": {"replicas": 2, "template": {"spec": {
        "containers": [{"name": "c", "readinessProbe": {"tcpSocket": {"port": 80}}}]}}}})
    _rolled_out(apps, ns, "llm", 2)
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "llm"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "llm"}}}}
    from kubernetes.dynamic import DynamicClient
    DynamicClient(api_client).resources.get(api_version="policy/v1", kind="PodDisruptionBudget") \
        .create(body=pdb, namespace=ns)
    res = info(lab)
    assert not [f for f in res["findings"] if f["object"] == f"deployment/{ns}/llm"]


def _rolled_out(apps, ns, name, replicas):
    def done(d):
        status = d.status
        return (status.observed_generation or 0) >= d.metadata.generation and \
            (status.updated_replicas or 0) == replicas == (status.available_replicas or 0) == (status.replicas or 0)
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == name and done(d), ns,
             what=f"Deployment {ns}/{name} rolled out to {replicas} available replicas")


def test_a_business_workload_in_the_middle_of_its_own_rollout_is_a_warning(lab, api_client, ns):
    """#37 item 9: a business Deployment whose rollout is not complete (here paused before its first
    ReplicaSet: 0 of 1 replicas updated) is WORKLOAD_ROLLOUT_IN_PROGRESS, a warning; the same
    workload without TensorFusion's label is none of the precheck's business."""
    apps = client.AppsV1Api(api_client)
    for name, labels in (("mid", {"app": "mid", "tensor-fusion.ai/enabled": "true"}), ("other", {"app": "other"})):
        apps.create_namespaced_deployment(ns, {"metadata": {"name": name}, "spec": {
            "replicas": 1, "paused": True, "selector": {"matchLabels": {"app": labels["app"]}},
            "template": {"metadata": {"labels": labels},
                         "spec": {"containers": [{"name": "c", "image": "registry.lab/llm:1"}]}}}})
    res = info(lab)
    found = [f for f in res["findings"] if f["code"] == "WORKLOAD_ROLLOUT_IN_PROGRESS" and ns in f["object"]]
    assert [f["object"] for f in found] == [f"deployment/{ns}/mid"], res["findings"]
    assert found[0]["severity"] == "warning"
    assert f"Deployment {ns}/mid is in the middle of its own rollout (" in found[0]["message"]
    mine = [w for w in res["data"]["workloads"] if w["namespace"] == ns]
    assert [(w["name"], bool(w["rollout"])) for w in mine] == [("mid", True)]
    # Gone now, not later with the namespace, while a later test counts the findings.
    for name in ("mid", "other"):
        apps.delete_namespaced_deployment(name, ns)
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name in ("mid", "other"), ns, gone=True,
             what=f"the Deployments of {ns} deleted")


def test_findings_per_code_counts_what_it_leaves_out(lab, api_client, ns):
    """Two fragile workloads, one finding of each code shown: the other one is counted, in the
    marker finding, in findings_omitted and in the summary."""
    apps = client.AppsV1Api(api_client)
    # The two pictures below must be of one cluster: the workloads of earlier tests' namespaces
    # (the ns fixture's, deleted as those tests end) are gone first.
    wait_for(client.CoreV1Api(api_client).list_namespace,
             lambda n: n.metadata.name.startswith("t-") and n.status.phase == "Terminating",
             gone=True, timeout=120, what="no test namespace terminating")
    for name in ("llm-a", "llm-b"):
        labels = {"app": name, "tensor-fusion.ai/enabled": "true"}
        apps.create_namespaced_deployment(ns, {
            "metadata": {"name": name},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "c", "image": "registry.lab/llm:1"}]}}}})
    full = info(lab, findings_per_code=0)
    capped = info(lab, findings_per_code=1)
    code = "WORKLOAD_NO_PDB"
    assert len([f for f in full["findings"] if f["code"] == code]) >= 2
    shown = [f for f in capped["findings"] if f["code"] == code]
    assert len(shown) == 2 and shown[-1]["object"] == "%d more" % capped["findings_omitted"][code]
    assert shown[-1]["severity"] == "warning"
    assert capped["summary"] == full["summary"] and full["findings_omitted"] == {}


def test_stopped_controller_is_blocking(lab, api_client):
    with controller_stopped(api_client):
        res = info(lab)
        ctl = [f for f in res["findings"] if f["code"] == "CONTROLLER_NOT_READY"]
        assert ctl and ctl[0]["severity"] == "blocking" and "0 of 0 replicas available" in ctl[0]["message"]


def test_custom_rule_and_bad_rule(lab):
    res = info(lab, rules=[{"code": "FEW_NODES", "severity": "warning",
                            "expression": "pools[?total_nodes < `100`]", "description": "fewer than 100 nodes"}])
    assert "FEW_NODES" in codes(res, "warning")
    run = run_playbook("tf_cluster_info.yml", {"lab_kubeconfig": lab["kubeconfig"], "ci_rules": [
        {"code": "X", "severity": "info", "expression": "pools[?"}]})
    assert run.rc != 0 and "not a JMESPath expression" in run.task_results("Info")["msg"]


CHART_POOLS = "ops.tensor-fusion.ai/chart-pools"
IMAGE = "componentConfig.hypervisor.image"
BATCH = "nodeManagerConfig.nodePoolRollingUpdatePolicy.batchPercentage"
AUTO = "nodeManagerConfig.nodePoolRollingUpdatePolicy.autoUpdateHypervisor"
POD_TEMPLATE = "componentConfig.hypervisor.podTemplate"


def _merge_patch_tfc(api_client, body):
    """A JSON merge patch of the chart's TensorFusionCluster, as a person editing it live sends."""
    from kubernetes.dynamic import DynamicClient
    tfcs = DynamicClient(api_client).resources.get(api_version="tensor-fusion.ai/v1", kind="TensorFusionCluster")
    tfcs.patch(body=body, name="tensor-fusion", content_type="application/merge-patch+json")


@contextlib.contextmanager
def _without_chart_pools_record(api_client):
    """The post-renderer's annotation (left by a chart step that ran before on this lab) taken off
    for the block and put back: with it, nothing is revertible and nothing is compared."""
    recorded = (tfc(api_client)["metadata"].get("annotations") or {}).get(CHART_POOLS)
    if recorded is not None:
        _merge_patch_tfc(api_client, {"metadata": {"annotations": {CHART_POOLS: None}}})
    try:
        yield
    finally:
        if recorded is not None:
            _merge_patch_tfc(api_client, {"metadata": {"annotations": {CHART_POOLS: recorded}}})


def _the_cluster(res):
    (cluster,) = [c for c in res["data"]["clusters"] if c["name"] == "tensor-fusion"]
    return cluster


def _drift_messages(res):
    return [f["message"] for f in res["findings"]
            if f["code"] == "POOL_DRIFTS_FROM_CHART" and f["object"] == "tensorfusioncluster/tensor-fusion"]


def test_live_pool_edits_the_next_chart_upgrade_would_revert(lab, api_client):
    """The chart's TensorFusionCluster is Helm-owned; a live edit of the pool (hypervisor image,
    batchPercentage, a secret env value in the Pod template) is reported field by field against
    the release's rendering, the secret never; the post-renderer's annotation means nothing
    revertible; putting the pool back removes the finding."""
    settle(api_client)
    original = tfc(api_client)
    recorded = (original["metadata"].get("annotations") or {}).get(CHART_POOLS)
    canary = "s3cr3t-" + uuid.uuid4().hex
    try:
        if recorded is not None:  # a chart step through the post-renderer ran before on this lab
            _merge_patch_tfc(api_client, {"metadata": {"annotations": {CHART_POOLS: None}}})
        before = info(lab)
        cluster = _the_cluster(before)
        assert cluster["helm_release"] == {"name": "tensor-fusion-sys", "namespace": "tensor-fusion-sys"}
        assert cluster["chart_pools"] is None
        if before["data"]["release"]["status"] == "deployed":  # else an older revision is the deployed one
            assert cluster["chart_drift"]["revision"] == before["data"]["release"]["revision"]
        baseline = cluster["chart_drift"]["differences"]
        pool = [p for p in original["spec"]["gpuPools"] if p["name"] == "shared"][0]["specTemplate"]
        assert not [d for d in baseline if d.get("only")], "the lab's pool is in the chart's rendering"
        # Tests before this one on the same lab (gpupool_rollout, change plans) may have left the
        # pool's image and batch size edited live: what the chart rendered is the baseline's
        # "rendered" then, else the live value.
        rendered = dict((d["field"], d["rendered"]) for d in baseline
                        if d.get("pool") == "shared" and d.get("field") in (IMAGE, BATCH) and "rendered" in d)
        old_image = rendered.get(IMAGE, pool["componentConfig"]["hypervisor"]["image"])
        live_batch = pool["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]["batchPercentage"]
        old_batch = rendered.get(BATCH, live_batch)

        edited = json.loads(json.dumps(original["spec"]["gpuPools"]))
        template = [p for p in edited if p["name"] == "shared"][0]["specTemplate"]
        template["componentConfig"]["hypervisor"]["image"] = "tensorfusion/tensor-fusion-hypervisor:drift-test"
        policy = template["nodeManagerConfig"]["nodePoolRollingUpdatePolicy"]
        policy["batchPercentage"] = next(v for v in (50, 30, 70) if v not in (old_batch, live_batch))
        # autoUpdate off in the same patch: the shared lab starts no rollout for this edit.
        policy["autoUpdateHypervisor"] = False
        container = template["componentConfig"]["hypervisor"]["podTemplate"]["template"]["spec"]["containers"][0]
        container.setdefault("env", []).append({"name": "TF_DEBUG_TOKEN", "value": canary})
        _merge_patch_tfc(api_client, {"spec": {"gpuPools": edited}})

        drifted = info(lab)
        drift = _the_cluster(drifted)["chart_drift"]
        differences = drift["differences"]
        assert {"pool": "shared", "field": IMAGE, "live": "tensorfusion/tensor-fusion-hypervisor:drift-test",
                "rendered": old_image} in differences
        assert {"pool": "shared", "field": BATCH, "live": policy["batchPercentage"], "rendered": old_batch} in differences
        assert {"pool": "shared", "field": POD_TEMPLATE, "hidden": True} in differences
        (message,) = [m for m in _drift_messages(drifted) if "pool shared " in m]
        assert message.startswith("TensorFusionCluster tensor-fusion pool shared differs from the rendering of "
                                  "Helm release tensor-fusion-sys/tensor-fusion-sys revision %d" % drift["revision"]), message
        assert '%s live "tensorfusion/tensor-fusion-hypervisor:drift-test", chart "%s"' % (IMAGE, old_image) in message
        assert "%s live %d, chart %d" % (BATCH, policy["batchPercentage"], old_batch) in message
        assert "%s differs (not shown" % POD_TEMPLATE in message
        assert [f["severity"] for f in drifted["findings"] if f["code"] == "POOL_DRIFTS_FROM_CHART"][0] == "warning"
        assert canary not in json.dumps(drifted), "a Pod template's env value never leaves the module"

        # Rendered through the post-renderer: the release holds the live pools, nothing revertible.
        record = {"shared": template}
        _merge_patch_tfc(api_client, {"metadata": {"annotations": {CHART_POOLS: json.dumps(record)}}})
        post_rendered = info(lab)
        cluster = _the_cluster(post_rendered)
        assert cluster["chart_drift"] is None and _drift_messages(post_rendered) == []
        assert cluster["chart_pools"]["shared"]["componentConfig"]["hypervisor"]["image"] == \
            "tensorfusion/tensor-fusion-hypervisor:drift-test"
        assert canary not in json.dumps(post_rendered), "env values of the recorded rendering are hashed"
    finally:
        _merge_patch_tfc(api_client, {"metadata": {"annotations": {CHART_POOLS: recorded}},
                                      "spec": {"gpuPools": original["spec"]["gpuPools"]}})
    restored = info(lab)
    if recorded is None:  # what differed before the test (edits of tests before it) differs again, no more
        assert _the_cluster(restored)["chart_drift"]["differences"] == baseline
        assert _drift_messages(restored) == _drift_messages(before)
    else:  # the post-renderer's record is back: nothing is compared
        assert not [m for m in _drift_messages(restored) if IMAGE in m or BATCH in m or POD_TEMPLATE in m]
    settle(api_client)


def test_the_precheck_rbac_reads_the_rendering_and_without_get_it_is_an_info(lab, api_client, sa_kubeconfig):
    """roles/rbac/files/precheck.yml grants the one GET; without it the module says what is missing
    instead of failing."""
    # info() reads only the "kubeconfig" of the lab it is given: here the ServiceAccounts'.
    granted_kubeconfig = sa_kubeconfig("precheck")
    refused_kubeconfig = sa_kubeconfig("precheck", drop=("Role", "secrets", "get"))
    with _without_chart_pools_record(api_client):
        granted = _the_cluster(info({"kubeconfig": granted_kubeconfig}))["chart_drift"]
        assert granted["unchecked"] is None and isinstance(granted["differences"], list)
        refused = info({"kubeconfig": refused_kubeconfig})
    assert _the_cluster(refused)["chart_drift"]["differences"] is None
    (found,) = [f for f in refused["findings"] if f["code"] == "POOL_DRIFT_UNCHECKED"]
    assert found["severity"] == "info" and found["object"] == "tensorfusioncluster/tensor-fusion"
    assert "forbidden: get secrets in tensor-fusion-sys (Helm's storage Secret sh.helm.release.v1.tensor-fusion-sys.v" \
        in found["message"], found


def test_a_held_maintenance_lock_is_an_info_finding_naming_holder_and_expiry(lab, api_client):
    """Precheck while another runbook holds the lock says so (info: the run would fail at its
    lock); the run's own lock is no finding; a free lock none."""
    holder = "bob@laptop pid=7 run=%s purpose=upgrade" % uuid.uuid4().hex[:8]
    lock = {"lock_kubeconfig": lab["kubeconfig"], "lock_holder": holder, "lock_ttl": 600}
    taken = run_playbook("maintenance_lock.yml", lock)
    assert taken.rc == 0, taken.stdout[-2000:]
    try:
        found = [f for f in info(lab)["findings"] if f["code"] == "MAINTENANCE_LOCK_HELD"]
        assert [f["severity"] for f in found] == ["info"], found
        assert "held by %s since " % holder in found[0]["message"] and "expires 20" in found[0]["message"]
        assert not [f for f in info(lab, own_lock_holder=holder)["findings"] if f["code"] == "MAINTENANCE_LOCK_HELD"]
    finally:
        released = run_playbook("maintenance_lock.yml", dict(lock, lock_state="released"))
        assert released.rc == 0
    res = info(lab)
    assert not [f for f in res["findings"] if f["code"] == "MAINTENANCE_LOCK_HELD"]
    assert res["data"]["lock"]["holder"] is None
