"""The lab is real: a real controller-manager rolls Deployments, RBAC denies, the status
subresource is enforced, custom resources do not crash the API server, and the kubelet stand-in's
knobs behave. Every wait here is a watch with a deadline."""
import json
import subprocess
import sys
import time
import uuid

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from lab import cluster, procs

from .helpers import deployment, service_account_token, wait_for
from .settle import settle


@pytest.fixture
def namespace(ns):
    """The conftest's own namespace, under the name these tests use."""
    return ns


def test_rollout_restart_completes_through_the_real_controller_manager(lab, api_client, namespace,
                                                                       kubectl_bin):
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("web"))
    kubectl = [kubectl_bin, "--kubeconfig", lab["kubeconfig"], "-n", namespace]
    subprocess.run(kubectl + ["rollout", "status", "deploy/web", "--timeout=60s"], check=True,
                   capture_output=True)
    before = {rs.metadata.name for rs in apps.list_namespaced_replica_set(namespace).items}
    subprocess.run(kubectl + ["rollout", "restart", "deploy/web"], check=True, capture_output=True)
    out = subprocess.run(kubectl + ["rollout", "status", "deploy/web", "--timeout=60s"],
                         check=True, capture_output=True, text=True).stdout
    assert "successfully rolled out" in out
    after = apps.list_namespaced_replica_set(namespace).items
    new = [rs for rs in after if rs.metadata.name not in before]
    assert len(new) == 1, "a restart makes exactly one new ReplicaSet"
    assert new[0].status.ready_replicas == 2
    pods = client.CoreV1Api(api_client).list_namespaced_pod(namespace, label_selector="app=web").items
    live = [p for p in pods if p.metadata.deletion_timestamp is None]
    assert all(p.metadata.labels["pod-template-hash"] in new[0].metadata.name for p in live)


def _sa_token(api_client, namespace, name):
    return service_account_token(api_client, namespace, name)


def _client_with_token(lab, token):
    cfg = client.Configuration()
    cfg.host = lab["server"]
    cfg.ssl_ca_cert = f"{lab['state_dir']}/pki/ca.crt"
    cfg.api_key = {"authorization": "Bearer " + token}
    return client.ApiClient(cfg)


def test_service_account_without_rights_gets_403(lab, api_client, namespace):
    token = _sa_token(api_client, namespace, "nobody")
    with _client_with_token(lab, token) as sa_client:
        with pytest.raises(ApiException) as exc:
            client.CoreV1Api(sa_client).list_namespaced_secret(namespace)
    assert exc.value.status == 403
    assert "cannot list resource \"secrets\"" in json.loads(exc.value.body)["message"]


def test_rbac_grant_takes_effect(lab, api_client, namespace):
    token = _sa_token(api_client, namespace, "reader")
    rbac = client.RbacAuthorizationV1Api(api_client)
    rbac.create_namespaced_role(namespace, {
        "metadata": {"name": "read-cm"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]}]})
    rbac.create_namespaced_role_binding(namespace, {
        "metadata": {"name": "read-cm"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "read-cm"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": namespace}]})
    with _client_with_token(lab, token) as sa_client:
        core = client.CoreV1Api(sa_client)
        deadline = time.monotonic() + 10  # RBAC caches refresh asynchronously
        while True:
            try:
                core.list_namespaced_config_map(namespace)
                break
            except ApiException as exc:
                if exc.status != 403 or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        with pytest.raises(ApiException) as exc:
            core.list_namespaced_secret(namespace)
        assert exc.value.status == 403


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.lab.tfops.test"},
    "spec": {"group": "lab.tfops.test", "scope": "Cluster",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {
                                   "size": {"type": "integer", "default": 3, "maximum": 10}}},
                               "status": {"type": "object", "properties": {
                                   "phase": {"type": "string"}}}}}}}]}}


def test_custom_resource_status_only_through_subresource(lab, api_client):
    ext = client.ApiextensionsV1Api(api_client)
    try:
        ext.create_custom_resource_definition(CRD)
    except ApiException as exc:
        assert exc.status == 409
    wait_for(ext.list_custom_resource_definition, lambda c: c.metadata.name == CRD["metadata"]["name"]
             and any(cond.type == "Established" and cond.status == "True"
                     for cond in (c.status.conditions or [])))
    co = client.CustomObjectsApi(api_client)
    name = "w-" + uuid.uuid4().hex[:6]
    # The first create of a custom resource is where a mis-built API server crashes (reflect2).
    for attempt in range(20):
        try:
            obj = co.create_cluster_custom_object("lab.tfops.test", "v1", "widgets",
                                                  {"apiVersion": "lab.tfops.test/v1",
                                                   "kind": "Widget", "metadata": {"name": name},
                                                   "spec": {}, "status": {"phase": "Sneaky"}})
            break
        except ApiException as exc:  # the new resource may take a moment to be served
            if exc.status != 404 or attempt == 19:
                raise
            time.sleep(0.2)
    assert obj["spec"]["size"] == 3, "structural defaults apply"
    assert "status" not in obj or not obj["status"], "status is dropped on create"
    obj["status"] = {"phase": "ViaMain"}
    updated = co.replace_cluster_custom_object("lab.tfops.test", "v1", "widgets", name, obj)
    assert not updated.get("status"), "the main endpoint ignores status"
    updated["status"] = {"phase": "ViaStatus"}
    via_status = co.replace_cluster_custom_object_status("lab.tfops.test", "v1", "widgets", name,
                                                         updated)
    assert via_status["status"]["phase"] == "ViaStatus"
    with pytest.raises(ApiException) as exc:
        co.patch_cluster_custom_object("lab.tfops.test", "v1", "widgets", name,
                                       {"spec": {"size": 11}})
    assert exc.value.status == 422, "bounds are enforced"
    # state.json, not the fixture's copy: other tests restart components on purpose.
    assert cluster.status(lab["state_dir"])["processes"]["kube-apiserver"], "the API server survived"


def _pod(name, image, owner=None):
    meta = {"name": name}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": image}],
                                       "restartPolicy": "Never" if owner else "Always"}}


def _ready(pod):
    return any(c.type == "Ready" and c.status == "True" for c in (pod.status.conditions or []))


def test_kubelet_stand_in_never_ready_image_knob(lab, api_client, namespace):
    core = client.CoreV1Api(api_client)
    knobs = {"metadata": {"name": "tfops-lab-kubelet"}, "data": {"neverReadyImages": "broken-image"}}
    core.create_namespaced_config_map("kube-system", knobs)
    try:
        time.sleep(0.5)  # the stand-in applies knobs from its own watch
        core.create_namespaced_pod(namespace, _pod("good", "registry.lab/ok:1"))
        core.create_namespaced_pod(namespace, _pod("bad", "registry.lab/broken-image:1"))
        wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "good" and _ready(p),
                 namespace=namespace)
        bad = wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "bad"
                       and p.status.container_statuses, namespace=namespace)
        assert bad.status.container_statuses[0].state.waiting.reason == "ImagePullBackOff"
        assert not _ready(bad)
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    # Once the pull "works" again the Pod starts, as a real kubelet's retry would.
    wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "bad" and _ready(p),
             namespace=namespace)


def test_job_pods_succeed(api_client, namespace):
    batch = client.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, {
        "metadata": {"name": "once"},
        "spec": {"backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "containers": [{"name": "c", "image": "registry.lab/job:1"}]}}}})
    job = wait_for(batch.list_namespaced_job, lambda j: j.metadata.name == "once"
                   and (j.status.succeeded or 0) >= 1, namespace=namespace)
    assert job.status.succeeded == 1


def test_gpu_nodes_are_labelled_and_ready(lab, api_client):
    nodes = client.CoreV1Api(api_client).list_node(label_selector="nvidia.com/gpu.present=true").items
    assert len(nodes) == lab["nodes"]
    for node in nodes:
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)


def test_two_labs_side_by_side_and_down_leaves_nothing(lab, tmp_path):
    second = cluster.up(tmp_path / "second", nodes=1, cpu_nodes=0)
    try:
        assert second["server"] != lab["server"]
        assert cluster.status(tmp_path / "second")["running"]
        assert cluster.status(lab["state_dir"])["running"]
        started = list(second["processes"])
    finally:
        cluster.down(tmp_path / "second")
    assert not any(procs.alive(r) for r in started), "down ends every process it started"
    assert not (tmp_path / "second").exists(), "down removes its state"
    assert cluster.status(lab["state_dir"])["running"], "the other lab is untouched"


def _node_ready(node):
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def test_dead_node_knob_makes_the_real_node_lifecycle_controller_mark_it(api_client):
    """A node that stops answering is marked by kube-controller-manager itself (grace 40 s)."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map("kube-system", {
        "metadata": {"name": "tfops-lab-kubelet"}, "data": {"deadNodes": "tfops-gpu-2"}})
    try:
        node = wait_for(core.list_node, lambda n: n.metadata.name == "tfops-gpu-2"
                        and not _node_ready(n), timeout=120)
        ready = next(c for c in node.status.conditions if c.type == "Ready")
        assert ready.status == "Unknown" and ready.reason == "NodeStatusUnknown"
        assert all(_node_ready(n) for n in core.list_node().items if n.metadata.name != "tfops-gpu-2")
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    wait_for(core.list_node, lambda n: n.metadata.name == "tfops-gpu-2" and _node_ready(n), timeout=60)
    # The node came back: its Pods are Ready again and TensorFusion's GPUNode Running (as with
    # a real kubelet that reconnects), so the rest of the session sees a healthy lab.
    settle(api_client)


def test_kubelet_keeps_heartbeating_across_an_api_server_restart(lab, api_client):
    """The lab must survive what the collection's tests do to it (restarting kube-apiserver)."""
    import datetime
    cluster.restart_api_server(lab["state_dir"])
    restarted = datetime.datetime.now(datetime.timezone.utc)
    coord = client.CoordinationV1Api(api_client)
    lease = wait_for(coord.list_namespaced_lease, lambda le: le.metadata.name == "tfops-gpu-0"
                     and le.spec.renew_time > restarted, timeout=60, namespace="kube-node-lease")
    assert lease.spec.holder_identity == "tfops-gpu-0"


def test_a_node_marked_not_ready_is_ready_again_at_the_stand_ins_next_status_sync(api_client):
    """After an API server outage past the node grace period (40 s), kube-controller-manager marks
    every node Unknown; a live kubelet puts Ready back at its next status sync (seconds), not at
    its next periodic report (a minute). The mark is made here as the node controller makes it:
    whether the real one marks after an outage races with the first lease renewal."""
    core = client.CoreV1Api(api_client)
    name = "tfops-gpu-3"
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    core.patch_node_status(name, {"status": {"conditions": [
        {"type": "Ready", "status": "Unknown", "reason": "NodeStatusUnknown",
         "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": stamp,
         "lastTransitionTime": stamp}]}})
    wait_for(core.list_node, lambda n: n.metadata.name == name and _node_ready(n), timeout=12,
             field_selector=f"metadata.name={name}")
    settle(api_client)  # the node controller may have marked the node's Pods not Ready meanwhile


def test_a_pod_whose_start_falls_into_an_outage_starts_once_the_api_server_is_back(
        lab, api_client, namespace):
    """The Pod is bound, then the API server goes away before its start is played: the stand-in
    keeps trying, as a kubelet's status sync does (it once forgot such a Pod for good)."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_config_map("kube-system", {
        "metadata": {"name": "tfops-lab-kubelet"}, "data": {"readyDelaySeconds": "4"}})
    try:
        time.sleep(0.5)  # the stand-in applies knobs from its own watch
        core.create_namespaced_pod(namespace, _pod("late", "registry.lab/ok:1"))
        wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "late" and p.spec.node_name,
                 timeout=30, namespace=namespace)
        cluster.outage(lab["state_dir"], 10)  # the start (4 s after the binding) falls inside
        wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "late" and _ready(p),
                 timeout=30, namespace=namespace)
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    settle(api_client)


def test_the_lab_runs_the_kubernetes_and_etcd_it_was_built_for(lab, kubectl_bin):
    """kubectl version says the release the lab built (paths.DEFAULT_KUBE_MINOR), not v0.0.0: the
    build's version ldflags reach the server; etcd says 3.6 on its own /version endpoint."""
    from lab import paths
    out = subprocess.run([kubectl_bin, "--kubeconfig", lab["kubeconfig"], "version", "-o", "json"],
                         check=True, capture_output=True, text=True).stdout
    server = json.loads(out)["serverVersion"]
    release = paths.kube_release()
    assert server["gitVersion"] == f"v{release}" == f"v{lab['kube_version']}"
    assert (server["major"], server["minor"]) == tuple(release.split(".")[:2])
    import urllib.request
    with urllib.request.urlopen(f"http://127.0.0.1:{lab['ports']['etcd']}/version", timeout=5) as resp:
        etcd = json.loads(resp.read())
    assert etcd["etcdserver"] == paths.ETCD_VERSION and etcd["etcdserver"].startswith("3.6.")


def test_up_with_tensorfusion_returns_only_when_it_has_settled(tmp_path):
    """What the demo does on a fresh machine (python -m lab up --tensorfusion, then the upgrade
    runbook at once): when up returns, every pool is Running and no component campaign is in
    progress, so the runbook's precheck does not meet the chart's first hypervisor campaign."""
    from kubernetes import config
    from lab import tensorfusion as tf
    state_dir = tmp_path / "settled-lab"
    subprocess.run([sys.executable, "-m", "lab", "--state", str(state_dir), "up", "--tensorfusion",
                    "--nodes", "6"], check=True, capture_output=True, text=True)
    try:
        api = config.new_client_from_config(str(state_dir / "kubeconfig"))
        co = client.CustomObjectsApi(api)
        items = {plural: co.list_cluster_custom_object("tensor-fusion.ai", "v1", plural)["items"]
                 for plural in ("tensorfusionclusters", "gpupools")}
        assert tf.unsettled(items["tensorfusionclusters"], items["gpupools"]) == []
        pods = client.CoreV1Api(api).list_namespaced_pod(
            tf.NAMESPACE, label_selector="tensor-fusion.ai/component=hypervisor").items
        assert len(pods) == 6 and all(
            any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])
            for p in pods)
        api.close()
    finally:
        cluster.down(state_dir)


# ---- the kubelet stand-in (kwok): what the knobs' translation must keep ------------------------

def _knobs(core, **data):
    """The kubelet stand-in's knobs, as the tests above set them."""
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                      "data": data})


def _pod_on(name, node, image="registry.lab/ok:1"):
    return {"metadata": {"name": name},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": image}]}}


def _stays(core, namespace, name, seconds, condition, what):
    """Pod ``name`` keeps ``condition`` for ``seconds``: a watch of it for that long, every change
    looked at (a dead node's Pods must not move)."""
    selector = f"metadata.name={name}"
    listing = core.list_namespaced_pod(namespace, field_selector=selector)
    assert listing.items and condition(listing.items[0]), f"{name} is not {what}"
    for event in watch.Watch().stream(core.list_namespaced_pod, namespace, field_selector=selector,
                                      resource_version=listing.metadata.resource_version,
                                      timeout_seconds=seconds):
        assert event["type"] != "DELETED" and condition(event["object"]), \
            f"{name} is no longer {what} ({event['type']})"


def test_a_dead_nodes_pods_stay_as_they_are_and_it_comes_back_at_once(api_client, namespace):
    """While a node is in deadNodes its Pods are frozen: a deleted one stays Terminating, a new
    one is not started. Off the list again, it confirms the deletion and starts the new one at
    once (well before the node-lifecycle controller would have noticed anything)."""
    core = client.CoreV1Api(api_client)
    node = "tfops-gpu-1"
    core.create_namespaced_pod(namespace, _pod_on("before", node))
    wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "before" and _ready(p),
             namespace=namespace)
    _knobs(core, deadNodes=node)
    try:
        # The stand-in marks a dead node with a label (kwok then leaves it alone).
        wait_for(core.list_node, lambda n: (n.metadata.labels or {}).get("tfops.lab/dead") == "true",
                 field_selector=f"metadata.name={node}", timeout=30)
        core.delete_namespaced_pod("before", namespace)
        core.create_namespaced_pod(namespace, _pod_on("during", node))
        _stays(core, namespace, "before", 4, lambda p: p.metadata.deletion_timestamp is not None,
               "terminating")
        _stays(core, namespace, "during", 1, lambda p: not p.status.pod_ip
               and not p.status.container_statuses, "unstarted")
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    started = time.monotonic()
    wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "before", gone=True,
             namespace=namespace, timeout=20)
    wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "during" and _ready(p),
             namespace=namespace, timeout=20)
    assert time.monotonic() - started < 20


def test_tensor_fusions_own_scheduler_is_a_profile_of_kube_scheduler(api_client, namespace):
    """Pods naming tensor-fusion-scheduler (which the lab does not run) are bound by
    kube-scheduler's second profile, which honours their node selector."""
    core = client.CoreV1Api(api_client)
    core.create_namespaced_pod(namespace, {"metadata": {"name": "tf-scheduled"}, "spec": {
        "schedulerName": "tensor-fusion-scheduler", "nodeSelector": {"nvidia.com/gpu.present": "true"},
        "containers": [{"name": "c", "image": "registry.lab/ok:1"}]}})
    pod = wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "tf-scheduled" and _ready(p),
                   namespace=namespace)
    assert pod.spec.node_name.startswith("tfops-gpu-")
    event = wait_for(client.EventsV1Api(api_client).list_namespaced_event,
                     lambda e: e.regarding.name == "tf-scheduled" and e.reason == "Scheduled",
                     namespace=namespace)
    assert event.reporting_controller == "tensor-fusion-scheduler"


def test_pod_ips_stay_unique_when_a_knob_change_restarts_kwok(api_client, namespace):
    core = client.CoreV1Api(api_client)
    names = [f"ip-{i}" for i in range(4)]
    for name in names[:2]:
        core.create_namespaced_pod(namespace, _pod(name, "registry.lab/ok:1"))
    _knobs(core, readyDelaySeconds="1")  # new Stages: kwok starts again and lists every Pod
    try:
        time.sleep(0.5)  # the stand-in applies knobs from its own watch
        for name in names[2:]:
            core.create_namespaced_pod(namespace, _pod(name, "registry.lab/ok:1"))
        for name in names:
            wait_for(core.list_namespaced_pod, lambda p, n=name: p.metadata.name == n and _ready(p),
                     namespace=namespace)
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    # (a host-network Pod has its node's IP, as with a real kubelet)
    ips = [p.status.pod_ip for p in core.list_pod_for_all_namespaces().items
           if p.status.pod_ip and not p.spec.host_network]
    assert len(ips) == len(set(ips)), f"a pod IP given twice: {sorted(ips)}"


def test_an_unusable_knob_is_said_on_the_configmap_and_pods_still_start(api_client, namespace):
    core = client.CoreV1Api(api_client)
    _knobs(core, neverReadyImages="(?!ok)broken", readyDelaySeconds="soon")
    try:
        for knob in ("neverReadyImages", "readyDelaySeconds"):
            event = wait_for(core.list_namespaced_event, lambda e, k=knob: e.reason == "InvalidKnob"
                             and e.involved_object.name == "tfops-lab-kubelet" and k in e.message,
                             "kube-system")
            assert event.type == "Warning"
        core.create_namespaced_pod(namespace, _pod("despite", "registry.lab/broken:1"))
        wait_for(core.list_namespaced_pod, lambda p: p.metadata.name == "despite" and _ready(p),
                 namespace=namespace)
    finally:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")


def _children(pid):
    try:
        return [int(c) for c in open(f"/proc/{pid}/task/{pid}/children").read().split()]
    except OSError:
        return []


def _running(pid):
    """Whether ``pid`` runs (a zombie nobody has reaped yet has ended)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_kwok_ends_with_the_stand_in_even_a_killed_one(tmp_path):
    """kwok is the stand-in's child, not a process the lab records: it must not outlive it."""
    import os
    import signal
    state = cluster.up(tmp_path / "kwok-lab", nodes=1, cpu_nodes=0)
    try:
        stand_in = next(r for r in state["processes"] if r["name"] == "kubelet")
        [kwok] = _children(stand_in["pid"])
        assert open(f"/proc/{kwok}/cmdline").read().split("\0")[0].endswith("/kwok")
        os.kill(stand_in["pid"], signal.SIGKILL)
        deadline = time.monotonic() + 15
        while _running(kwok) and time.monotonic() < deadline:
            time.sleep(0.1)  # a process's end: nothing to watch but /proc
        assert not _running(kwok), "kwok outlived its stand-in"
    finally:
        cluster.down(tmp_path / "kwok-lab")


def test_a_crashed_kube_scheduler_is_started_again_and_pods_are_scheduled(lab, api_client, namespace):
    """kube-scheduler ends itself when its cache sees a Pod bound elsewhere than it assumed (an API
    server outage in a binding can cause it); the lab starts it again, as a kubelet would."""
    import os
    import signal
    [record] = [r for r in lab["processes"] if r["name"] == "kube-scheduler"]
    children = open(f"/proc/{record['pid']}/task/{record['pid']}/children").read().split()
    assert len(children) == 1, children
    os.kill(int(children[0]), signal.SIGKILL)  # the scheduler itself; its supervisor stays
    time.sleep(0.5)
    assert procs.alive(record)
    apps = client.AppsV1Api(api_client)
    apps.create_namespaced_deployment(namespace, deployment("after-crash", replicas=2))
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "after-crash"
             and (d.status.ready_replicas or 0) == 2, namespace=namespace, timeout=60,
             what="the Deployment's Pods scheduled and Ready after kube-scheduler was killed")
    again = open(f"/proc/{record['pid']}/task/{record['pid']}/children").read().split()
    assert again and again != children
