"""secret_rotate against the lab: the chart's vendor credentials rotated in place with a real
controller restart, a registry credential moved to a new version through the TensorFusionCluster
(an operator rollout of the hypervisors), the old Secret deleted only after verification, a
consumer that never becomes Ready leaving everything as it was, idempotence, and no value in the
output at -vvv."""
import base64
import copy
import re
import time
import uuid

import pytest
from kubernetes import client

from lab import cluster
from lab import tensorfusion as tf

from .ansible_runner import run_playbook, start_playbook
from .helpers import (GROUP, NS, VERSION, deployment, gpupool, pool_progress_at_least, run_watching_temp_files, tfc,
                      wait_for, wait_pool)
from .settle import settle

TASK = "Rotate"
TFC, POOL = "tensor-fusion", "shared"
VENDOR = "tf-cloud-vendor-credentials"


def rotate(lab, check=False, diff=False, verbose=False, **opts):
    args = (["--check"] if check else []) + (["--diff"] if diff else []) + (["-vvv"] if verbose else [])
    extra = {"lab_kubeconfig": lab["kubeconfig"]}
    extra.update({"sr_" + k: v for k, v in opts.items()})
    run = run_playbook("secret_rotate.yml", extra, args=args)
    return run, run.task_results(TASK)


def canary(tag):
    return "canary-%s-%s" % (tag, uuid.uuid4().hex)


def secret_data(api_client, name, ns=NS):
    data = client.CoreV1Api(api_client).read_namespaced_secret(name, ns).data or {}
    return dict((k, base64.b64decode(v).decode()) for k, v in data.items())


def secret_names(api_client, ns=NS):
    return {s.metadata.name for s in client.CoreV1Api(api_client).list_namespaced_secret(ns).items}


def assert_no_value(text, values):
    for value in values:
        for form in (value, base64.b64encode(value.encode()).decode()):
            assert form not in text, "a Secret value leaked into the output"


def controller(api_client):
    apps = client.AppsV1Api(api_client)
    [dep] = apps.list_namespaced_deployment(NS, label_selector="tensor-fusion.ai/component=operator").items
    return dep


def live_pods(api_client, ns, selector):
    pods = client.CoreV1Api(api_client).list_namespaced_pod(ns, label_selector=selector).items
    return [p for p in pods if p.metadata.deletion_timestamp is None]


@pytest.fixture
def never_ready(api_client):
    """Set the kubelet's never-Ready image pattern; removed afterwards."""
    core = client.CoreV1Api(api_client)

    def set_pattern(pattern):
        core.create_namespaced_config_map("kube-system", {
            "metadata": {"name": "tfops-lab-kubelet"}, "data": {"neverReadyImages": pattern}})
    yield set_pattern
    try:
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    except client.exceptions.ApiException:
        pass


def test_vendor_credentials_in_place_restart_verify_idempotent_and_quiet(lab, api_client):
    settle(api_client)
    original = secret_data(api_client, VENDOR)
    ak, sk = canary("ak"), canary("sk")
    dep = controller(api_client)
    consumer = [{"kind": "Deployment", "name": dep.metadata.name}]
    try:
        run, res = rotate(lab, verbose=True, diff=True, name=VENDOR, string_data={"ak": ak, "sk": sk},
                          consumers=consumer)
        assert run.rc == 0, res.get("msg")
        assert_no_value(run.stdout + run.stderr, [ak, sk])
        assert res["changed"] is True
        assert [s["step"] for s in res["steps"]] == ["backup", "update", "restart", "roll", "verify"]
        assert res["restarts"] == ["Deployment %s/%s" % (NS, dep.metadata.name)]
        assert res["secret"]["keys"] == ["ak", "sk"] and "digest" in res["secret"]
        assert secret_data(api_client, VENDOR) == {"ak": ak, "sk": sk}
        [backup] = res["previous"]
        assert secret_data(api_client, backup) == original, "the old content is kept in a copy"
        # the controller's Pods were restarted for this version of the Secret and are Ready
        secret = client.CoreV1Api(api_client).read_namespaced_secret(VENDOR, NS)
        version = "%s:%s" % (secret.metadata.uid, secret.metadata.resource_version)
        pods = live_pods(api_client, NS, "tensor-fusion.ai/component=operator")
        assert pods and all(p.metadata.annotations.get("secret.ops.tensor-fusion.ai/" + VENDOR) == version
                            for p in pods)
        run, again = rotate(lab, name=VENDOR, string_data={"ak": ak, "sk": sk}, consumers=consumer)
        assert run.rc == 0 and again["changed"] is False, again
        assert [s["step"] for s in again["steps"]] == ["restart", "roll", "verify"]
    finally:
        # Back to the chart's content; previous versions (the copies) deleted after verification.
        run, back = rotate(lab, name=VENDOR, string_data=original, consumers=consumer, delete_old=True)
    assert run.rc == 0, back.get("msg")
    assert secret_data(api_client, VENDOR) == original
    assert not [n for n in secret_names(api_client) if n.startswith(VENDOR + "-")]
    assert sorted(back["deleted"]) == sorted([backup, "%s-%s" % (VENDOR, res["secret"]["digest"])])


def _set_pull_secrets(lab, api_client, names):
    """Point the hypervisor template's imagePullSecrets at names (an operator rollout)."""
    template = _pool_entry(api_client)["specTemplate"]["componentConfig"]["hypervisor"]["podTemplate"]
    template["template"]["spec"]["imagePullSecrets"] = [{"name": n} for n in names]
    run = run_playbook("gpupool_rollout.yml", {
        "lab_kubeconfig": lab["kubeconfig"], "gr_pool": POOL,
        "gr_components": {"hypervisor": {"pod_template": template}},
        "gr_rolling_update": {"auto_update_hypervisor": True, "batch_percentage": 50,
                              "batch_interval": "1s"}})
    assert run.rc == 0, run.stdout[-2000:]


def _pool_entry(api_client):
    obj = tfc(api_client, TFC)
    return [p for p in obj["spec"]["gpuPools"] if p["name"] == POOL][0]


def _restore_pool_entry(api_client, entry):
    custom = client.CustomObjectsApi(api_client)
    obj = tfc(api_client, TFC)
    obj["spec"]["gpuPools"] = [entry if p["name"] == POOL else p for p in obj["spec"]["gpuPools"]]
    obj["metadata"].get("annotations", {}).pop("ops.tensor-fusion.ai/paused", None)
    custom.replace_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", TFC, obj)


def test_registry_credential_versioned_through_the_cluster_then_old_deleted(lab, api_client):
    settle(api_client)
    tf.set_knobs(api_client, batchGapFloorSeconds=1)
    core = client.CoreV1Api(api_client)
    base = "regcred-" + uuid.uuid4().hex[:5]
    old_value, new_value, third_value = canary("old"), canary("new"), canary("third")
    core.create_namespaced_secret(NS, {"metadata": {"name": base}, "stringData": {"token": old_value}})
    before = _pool_entry(api_client)
    consumer = [{"kind": "TensorFusionCluster", "pool": POOL, "component": "hypervisor"}]
    try:
        _set_pull_secrets(lab, api_client, [base])
        run, res = rotate(lab, check=True, name=base, strategy="versioned",
                          string_data={"token": new_value}, consumers=consumer, delete_old=True)
        assert run.rc == 0 and res["changed"] is True and res["deleted"] == [base]
        assert res["secret"]["name"] not in secret_names(api_client), "check mode creates nothing"

        run, res = rotate(lab, name=base, strategy="versioned", string_data={"token": new_value},
                          consumers=consumer, delete_old=True)
        assert run.rc == 0, res.get("msg")
        new = res["secret"]["name"]
        assert [s["step"] for s in res["steps"]] == ["create", "repoint", "roll", "verify", "delete_old"]
        assert res["previous"] == [base] and res["deleted"] == [base]
        assert base not in secret_names(api_client), "old Secret deleted after verification"
        assert secret_data(api_client, new) == {"token": new_value}
        pods = live_pods(api_client, NS, "tensor-fusion.ai/component=hypervisor")
        assert pods and all([s.name for s in p.spec.image_pull_secrets] == [new] for p in pods)
        assert all(p.status.phase == "Running" for p in pods)

        run, again = rotate(lab, name=base, strategy="versioned", string_data={"token": new_value},
                            consumers=consumer, delete_old=True)
        assert run.rc == 0 and again["changed"] is False, again

        # autoUpdateHypervisor off: the operator would never roll; refused before any write ...
        paused = run_playbook("gpupool_rollout.yml", {"lab_kubeconfig": lab["kubeconfig"], "gr_pool": POOL,
                                                      "gr_state": "paused", "gr_components": {"hypervisor": {}}})
        assert paused.rc == 0
        generation = tfc(api_client, TFC)["metadata"]["generation"]
        run, res = rotate(lab, name=base, strategy="versioned", string_data={"token": third_value},
                          consumers=consumer)
        assert run.rc != 0 and "autoUpdateHypervisor is false" in res["msg"]
        assert tfc(api_client, TFC)["metadata"]["generation"] == generation
        assert not [n for n in secret_names(api_client) if n.startswith(base) and n != new]
        # ... unless the task allows deleting the Pods that did not roll after the grace period
        old_uids = {p.metadata.uid for p in live_pods(api_client, NS, "tensor-fusion.ai/component=hypervisor")}
        run, res = rotate(lab, name=base, strategy="versioned", string_data={"token": third_value},
                          consumers=consumer, delete_unrolled_pods=True, unrolled_grace=2, delete_old=True)
        assert run.rc == 0, res.get("msg")
        pods = live_pods(api_client, NS, "tensor-fusion.ai/component=hypervisor")
        assert not old_uids & {p.metadata.uid for p in pods}, "every hypervisor Pod was recreated"
        assert all([s.name for s in p.spec.image_pull_secrets] == [res["secret"]["name"]] for p in pods)
        assert res["deleted"] == [new]
    finally:
        _restore_pool_entry(api_client, before)
        for name in [n for n in secret_names(api_client) if n.startswith(base)]:
            core.delete_namespaced_secret(name, NS)
        tf.set_knobs(api_client, batchGapFloorSeconds=None)
    settle(api_client)


def test_an_api_server_outage_during_the_consumer_wait_is_ridden_out(lab, api_client):
    """kube-apiserver stopped for 30 s (connections refused) while secret_rotate waits for the
    hypervisor rollout its repoint started: the rotation still verifies and deletes the old Secret,
    with one write of the TensorFusionCluster, says changed, and warns of the outage. (A 5 s
    outage takes the same retry path, covered by test_gpupool_rollout.py.)"""
    seconds = 30
    settle(api_client)
    core = client.CoreV1Api(api_client)
    base = "outage%d-%s" % (seconds, uuid.uuid4().hex[:5])
    new_value = canary("new")
    core.create_namespaced_secret(NS, {"metadata": {"name": base}, "stringData": {"token": canary("old")}})
    before = _pool_entry(api_client)
    consumer = [{"kind": "TensorFusionCluster", "pool": POOL, "component": "hypervisor"}]
    try:
        _set_pull_secrets(lab, api_client, [base])
        tf.set_knobs(api_client, batchGapFloorSeconds=4)
        generation = tfc(api_client, TFC)["metadata"]["generation"]
        job = start_playbook("secret_rotate.yml", {
            "lab_kubeconfig": lab["kubeconfig"], "sr_name": base, "sr_strategy": "versioned",
            "sr_string_data": {"token": new_value}, "sr_consumers": consumer, "sr_delete_old": True})
        try:
            wait_pool(api_client, pool_progress_at_least(20))
            cluster.outage(lab["state_dir"], seconds)
        finally:
            run = job.finish(timeout=600)
        res = run.task_results(TASK)
        assert run.rc == 0, res.get("msg") or run.stdout[-3000:]
        assert res["changed"] is True and res["deleted"] == [base]
        assert [s["step"] for s in res["steps"]] == ["create", "repoint", "roll", "verify", "delete_old"]
        assert tfc(api_client, TFC)[
            "metadata"]["generation"] == generation + 1, "one write of the TensorFusionCluster"
        assert "the API server could not be used for" in run.stdout + run.stderr
        assert_no_value(run.stdout + run.stderr, [new_value])
        pods = live_pods(api_client, NS, "tensor-fusion.ai/component=hypervisor")
        assert pods and all([s.name for s in p.spec.image_pull_secrets] == [res["secret"]["name"]] for p in pods)
    finally:
        tf.set_knobs(api_client, batchGapFloorSeconds=None)
        _restore_pool_entry(api_client, before)
        for name in [n for n in secret_names(api_client) if n.startswith(base)]:
            core.delete_namespaced_secret(name, NS)
    settle(api_client)


def _tf_pod(ns, name):
    """A TensorFusion-enabled Pod: the webhook gives the pool a TensorFusionWorkload, which is
    what a worker campaign works on."""
    annotations = {"tensor-fusion.ai/tflops-request": "5", "tensor-fusion.ai/vram-request": "1Gi",
                   "tensor-fusion.ai/gpupool": "%s-%s" % (TFC, POOL)}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"tensor-fusion.ai/enabled": "true"},
                         "annotations": annotations},
            "spec": {"containers": [{"name": "app", "image": "busybox"}]}}


def test_in_place_rotation_rolls_hypervisor_and_worker_templates_and_is_verified(lab, api_client, ns):
    """The operator hashes a component's Pod spec only: the in-place rotation records the Secret's
    version in the Pod spec (an environment variable), so both campaigns start and finish, and the
    new hypervisor Pods carry it; no Secret value anywhere in the output."""
    settle(api_client)
    tf.set_knobs(api_client, batchGapFloorSeconds=1)
    core, custom = client.CoreV1Api(api_client), client.CustomObjectsApi(api_client)
    name = "licence-" + uuid.uuid4().hex[:5]
    old_value, new_value = canary("old"), canary("new")
    core.create_namespaced_secret(NS, {"metadata": {"name": name}, "stringData": {"key": old_value}})
    before = _pool_entry(api_client)
    consumers = [{"kind": "TensorFusionCluster", "pool": POOL, "component": c} for c in ("hypervisor", "worker")]
    try:
        core.create_namespaced_pod(ns, _tf_pod(ns, "tf-app"))
        # The webhook creates the workload during the Pod's admission.
        assert custom.list_namespaced_custom_object(GROUP, VERSION, ns, "tensorfusionworkloads")["items"]
        config = copy.deepcopy(before["specTemplate"]["componentConfig"])  # before is restored as it was
        hv_template = config["hypervisor"]["podTemplate"]
        hv_template["template"]["spec"]["imagePullSecrets"] = [{"name": name}]
        wk_template = config["worker"]["podTemplate"]
        wk_template["template"]["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": name}}]
        run = run_playbook("gpupool_rollout.yml", {
            "lab_kubeconfig": lab["kubeconfig"], "gr_pool": POOL,
            "gr_components": {"hypervisor": {"pod_template": hv_template}, "worker": {"pod_template": wk_template}},
            "gr_rolling_update": {"auto_update_hypervisor": True, "auto_update_worker": True,
                                  "batch_percentage": 50, "batch_interval": "1s"}})
        assert run.rc == 0, run.stdout[-2000:]
        hv_uids = {p.metadata.uid for p in live_pods(api_client, NS, "tensor-fusion.ai/component=hypervisor")}
        pool_before = gpupool(api_client, "%s-%s" % (TFC, POOL))
        hashes_before = dict((c, pool_before["status"]["componentStatus"].get(c)) for c in ("hypervisor", "worker"))

        run, res = rotate(lab, verbose=True, name=name, strategy="in_place",
                          string_data={"key": new_value}, consumers=consumers)
        assert run.rc == 0, res.get("msg")
        assert [s["step"] for s in res["steps"]] == ["backup", "update", "restart", "restart",
                                                     "roll", "roll", "verify", "verify"]
        assert_no_value(run.stdout + run.stderr, [old_value, new_value])
        assert secret_data(api_client, name) == {"key": new_value}
        pool = gpupool(api_client, "%s-%s" % (TFC, POOL))
        status = pool["status"]["componentStatus"]
        for comp in ("hypervisor", "worker"):  # both campaigns ran to the end
            assert status[comp] != hashes_before[comp], comp
            assert status["%sConfigSynced" % comp] is True and status["%sUpdateProgress" % comp] == 100
        env_name = "TFOPS_SECRET_VERSION_" + name.upper().replace("-", "_")
        version = core.read_namespaced_secret(name, NS).metadata
        want = {"name": env_name, "value": "%s:%s" % (version.uid, version.resource_version)}
        pods = live_pods(api_client, NS, "tensor-fusion.ai/component=hypervisor")
        assert pods and not hv_uids & {p.metadata.uid for p in pods}, "every hypervisor Pod was replaced"
        assert all({"name": e.name, "value": e.value} == want
                   for p in pods for e in p.spec.containers[0].env or [] if e.name == env_name)
        template = _pool_entry(api_client)["specTemplate"]["componentConfig"]
        assert want in template["worker"]["podTemplate"]["template"]["spec"]["containers"][0]["env"]
        assert "annotations" not in (template["hypervisor"]["podTemplate"]["template"].get("metadata") or {})

        run, again = rotate(lab, name=name, strategy="in_place", string_data={"key": new_value},
                            consumers=consumers)
        assert run.rc == 0 and again["changed"] is False, again
    finally:
        _restore_pool_entry(api_client, before)
        for secret in [n for n in secret_names(api_client) if n.startswith(name)]:
            core.delete_namespaced_secret(secret, NS)
        tf.set_knobs(api_client, batchGapFloorSeconds=None)
    settle(api_client)


def test_consumer_never_ready_keeps_old_secret_and_references(lab, api_client, ns, never_ready):
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    image = "registry.lab/app:%s" % ns
    core.create_namespaced_secret(ns, {"metadata": {"name": "app-cred"}, "stringData": {"pw": canary("pw")}})
    body = deployment("web", image=image)
    body["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "app-cred"}}]
    apps.create_namespaced_deployment(ns, body)
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "web"
             and (d.status.available_replicas or 0) == 2, namespace=ns)
    never_ready(image.replace(".", r"\."))  # from now on new Pods of this image never get Ready
    new_value = canary("new")
    started = time.monotonic()
    run, res = rotate(lab, name="app-cred", namespace=ns, strategy="versioned",
                      string_data={"pw": new_value}, delete_old=True, wait_timeout=600)
    assert run.rc != 0
    # New Pods whose image cannot be pulled end the wait once it has lasted 30 s, not at
    # wait_timeout (nor at the Deployment's progress deadline, 600 s by default).
    assert time.monotonic() - started < 150, "it waited for wait_timeout"
    assert res["failed_step"] == "roll" and res["failed_consumer"] == "Deployment %s/web" % ns
    assert "its new Pods do not start" in res["msg"] and "ImagePullBackOff" in res["msg"], res["msg"]
    assert "app-cred again" in res["msg"]
    assert len(res["created"]) == 1 and res["created"][0].startswith("app-cred-"), res["created"]
    assert res["modified"] == ["Deployment %s/web" % ns] and res["put_back"] == res["restored"]
    # The undo waited for the consumer: it runs on the old Secret, all replicas available.
    web = apps.read_namespaced_deployment("web", ns)
    assert (web.status.available_replicas or 0) == 2 and (web.status.updated_replicas or 0) == 2, web.status
    assert_no_value(run.stdout + run.stderr, [new_value])
    template = apps.read_namespaced_deployment("web", ns).spec.template.spec
    assert template.containers[0].env_from[0].secret_ref.name == "app-cred", "references restored"
    assert "app-cred" in secret_names(api_client, ns), "the old Secret stays"
    statuses = [s["status"] for s in res["steps"]]
    assert statuses[:3] == ["ok", "ok", "failed"] and res["steps"][-1]["step"] == "restore"


def test_a_consumer_past_its_progress_deadline_fails_the_rotation_at_once(lab, api_client, ns, never_ready):
    """A Deployment that gives up (progressDeadlineSeconds 10, its new Pods never Ready) ends the
    wait when the controller says so, not at wait_timeout; the references are put back."""
    import time
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    image = "registry.lab/app:%s" % ns
    core.create_namespaced_secret(ns, {"metadata": {"name": "app-cred"}, "stringData": {"pw": canary("pw")}})
    body = deployment("web", image=image)
    body["spec"]["progressDeadlineSeconds"] = 10
    body["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "app-cred"}}]
    apps.create_namespaced_deployment(ns, body)
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "web"
             and (d.status.available_replicas or 0) == 2, namespace=ns)
    never_ready(image.replace(".", r"\."))
    started = time.monotonic()
    run, res = rotate(lab, name="app-cred", namespace=ns, strategy="versioned",
                      string_data={"pw": canary("new")}, delete_old=True, wait_timeout=300)
    assert run.rc != 0 and time.monotonic() - started < 150, "it waited for wait_timeout"
    assert "exceeded its progress deadline (10s)" in res["msg"], res["msg"]
    assert res["failed_step"] == "roll" and "app-cred again" in res["msg"]
    template = apps.read_namespaced_deployment("web", ns).spec.template.spec
    assert template.containers[0].env_from[0].secret_ref.name == "app-cred", "references restored"


def test_discovery_finds_the_workloads_and_bad_input_changes_nothing(lab, api_client, ns):
    core = client.CoreV1Api(api_client)
    apps = client.AppsV1Api(api_client)
    core.create_namespaced_secret(ns, {"metadata": {"name": "db"}, "stringData": {"pw": "x1"}})
    for name, spec in (("envuser", {"env": [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "db", "key": "pw"}}}]}),
                       ("bystander", {})):
        body = deployment(name, replicas=1)
        body["spec"]["template"]["spec"]["containers"][0].update(spec)
        apps.create_namespaced_deployment(ns, body)
    run, res = rotate(lab, check=True, name="db", namespace=ns, strategy="versioned", string_data={"pw": "x2"})
    assert run.rc == 0, res.get("msg")
    assert [c["name"] for c in res["consumers"]] == ["envuser"]
    before = {d.metadata.name: d.metadata.resource_version for d in apps.list_namespaced_deployment(ns).items}
    secret_rv = core.read_namespaced_secret("db", ns).metadata.resource_version
    bad = [({"strategy": "versioned", "string_data": {"pw": "x"}, "delete_old": True, "wait": False},
            "delete_old needs wait"),
           ({"data": {"pw": "not base64!"}}, "is not base64"),
           ({"string_data": {"bad key": "x"}}, "invalid Secret key name"),
           ({"string_data": {"pw": "x"}, "consumers": [{"kind": "TensorFusionCluster", "pool": "shared"}]},
            "component must be one of"),
           ({"string_data": {"pw": "x"}, "keep": -1}, "keep must be 0 or more")]
    for opts, message in bad:
        run, res = rotate(lab, name="db", namespace=ns, **opts)
        assert run.rc != 0 and message in res["msg"], res.get("msg")
    after = {d.metadata.name: d.metadata.resource_version for d in apps.list_namespaced_deployment(ns).items}
    assert after == before and core.read_namespaced_secret("db", ns).metadata.resource_version == secret_rv
    names = secret_names(api_client, ns)
    assert "db" in names and not [n for n in names if n.startswith("db-")]


@pytest.mark.smoke
def test_rotate_secret_runbook_end_to_end_then_nothing_to_do(lab, api_client, tmp_path):
    """The runbook as people run it (by its collection name): lock, precheck, rotation, verify,
    report; the second run changes nothing; the report holds no value; and no file under the
    run's temporary directories holds a new value, while the rotation runs or after it (#44: in
    the worker and as module processes, on each ansible-core of the matrix)."""
    settle(api_client)
    original = secret_data(api_client, VENDOR)
    ak, sk = canary("ak"), canary("sk")
    name = controller(api_client).metadata.name
    extra = {"tfops_kubeconfig": lab["kubeconfig"], "tfops_artifacts_dir": str(tmp_path / "artifacts"),
             "tfops_timeout": 600, "tfops_secret_name": VENDOR,
             "tfops_secret_string_data": {"ak": ak, "sk": sk},
             "tfops_secret_consumers": [{"kind": "Deployment", "name": name}]}
    try:
        run, holding = run_watching_temp_files(
            lambda env: start_playbook("tensorfusion.ops.rotate_secret", extra, env=env), tmp_path / "tmp", [ak, sk])
        assert run.rc == 0, run.stdout[-3000:]
        assert holding == set()
        assert secret_data(api_client, VENDOR) == {"ak": ak, "sk": sk}
        rotation = run.task_results("Rotate the Secret in the documented order (create or update, "
                                    "repoint or restart, verify, then delete)")
        assert rotation["changed"] is True and rotation["restarts"]
        run = run_playbook("tensorfusion.ops.rotate_secret", extra, timeout=900)
        assert run.rc == 0, run.stdout[-3000:]
        assert "changed=0" in run.stdout.split("PLAY RECAP")[-1]
        reports = list((tmp_path / "artifacts").rglob("report.*"))
        assert len(reports) == 6, reports
        import json
        first, second = [json.loads(p.read_text())["rotation"]
                         for p in sorted((tmp_path / "artifacts").rglob("report.json"))]
        assert first["secret"] == VENDOR and "Deployment %s/%s" % (NS, name) in first["modified"], first
        assert len(first["created"]) == 1 and first["put_back"] == [], first  # the copy of the old content
        assert second["created"] == second["modified"] == [], second
        assert_no_value("".join(p.read_text() for p in reports), [ak, sk])
        assert not lease_held(api_client)
    finally:
        run, back = rotate(lab, name=VENDOR, string_data=original, delete_old=True,
                           consumers=extra["tfops_secret_consumers"])
    assert run.rc == 0, back.get("msg")
    assert secret_data(api_client, VENDOR) == original


def lease_held(api_client):
    leases = client.CoordinationV1Api(api_client).list_namespaced_lease(NS).items
    return [le.metadata.name for le in leases if le.spec.holder_identity and le.metadata.name.startswith("tensorfusion-ops")]


def _helm(helm_bin, lab, *args):
    import json as _json
    import subprocess
    out = subprocess.run([helm_bin, "--kubeconfig", lab["kubeconfig"], *args], check=True,
                         capture_output=True, text=True).stdout
    return _json.loads(out) if "-o" in args else out


def _helm_upgrade_values(helm_bin, lab, tmp_path, values):
    """The session release at its current chart version with exactly these user values."""
    import json as _json
    last = max(_helm(helm_bin, lab, "history", "tensor-fusion-sys", "-n", NS, "-o", "json"),
               key=lambda r: r["revision"])
    path = tmp_path / ("values-%d.json" % len(list(tmp_path.glob("values-*"))))
    path.write_text(_json.dumps(values))
    _helm(helm_bin, lab, "upgrade", "tensor-fusion-sys", "tensor-fusion", "--repo",
          lab["tensorfusion"]["chart_repo"], "--version", last["chart"].rsplit("-", 1)[1], "-n", NS,
          "--reset-values", "-f", str(path))


def test_helm_values_key_repointed_controller_verified_old_deleted(lab, api_client, helm_bins, tmp_path):
    settle(api_client)
    helm_bin = helm_bins["3"]
    core = client.CoreV1Api(api_client)
    base = "ctlreg-" + uuid.uuid4().hex[:5]
    core.create_namespaced_secret(NS, {"metadata": {"name": base}, "stringData": {"token": canary("old")}})
    original = _helm(helm_bin, lab, "get", "values", "tensor-fusion-sys", "-n", NS, "-o", "json") or {}
    consumer = [{"kind": "HelmRelease", "name": "tensor-fusion-sys", "values_key": "imagePullSecrets"}]
    new_value = canary("new")
    try:
        _helm_upgrade_values(helm_bin, lab, tmp_path, dict(original, imagePullSecrets=[{"name": base}]))
        revision = max(r["revision"] for r in _helm(helm_bin, lab, "history", "tensor-fusion-sys", "-n", NS, "-o", "json"))
        run, res = rotate(lab, name=base, strategy="versioned", string_data={"token": new_value},
                          consumers=consumer, delete_old=True, binary_path=helm_bin)
        assert run.rc == 0, res.get("msg")
        new = res["secret"]["name"]
        assert [s["step"] for s in res["steps"]] == ["create", "repoint", "roll", "verify", "delete_old"]
        values = _helm(helm_bin, lab, "get", "values", "tensor-fusion-sys", "-n", NS, "-o", "json")
        assert values == dict(original, imagePullSecrets=[{"name": new}]), "only that key changed"
        history = _helm(helm_bin, lab, "history", "tensor-fusion-sys", "-n", NS, "-o", "json")
        assert max(r["revision"] for r in history) == revision + 1
        pods = live_pods(api_client, NS, "tensor-fusion.ai/component=operator")
        assert pods and all([s.name for s in p.spec.image_pull_secrets] == [new] for p in pods)
        assert base not in secret_names(api_client) and res["deleted"] == [base]
        run, again = rotate(lab, name=base, strategy="versioned", string_data={"token": new_value},
                            consumers=consumer, delete_old=True, binary_path=helm_bin)
        assert run.rc == 0 and again["changed"] is False, again
        assert_no_value(run.stdout + run.stderr, [new_value])
    finally:
        _helm_upgrade_values(helm_bin, lab, tmp_path, original)
        for name in [n for n in secret_names(api_client) if n.startswith(base)]:
            core.delete_namespaced_secret(name, NS)
    settle(api_client)


# ---- #37: a rotation's undo covers every consumer kind; in place verifies what Pods read ---------

class _WhenPointedBack:
    """A thread that watches the pool's hypervisor template and, once the rotation has repointed
    it at another Secret and then back at ``secret``, clears the kubelet's never-Ready images: new
    hypervisor Pods on the rotated credential cannot start, on the old one they can (a rotated
    registry credential that is wrong)."""

    def __init__(self, api_client, secret):
        import threading
        self.api_client, self.secret = api_client, secret
        self.moved = self.back = False
        self.error = None
        self.seen = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _names(self):
        template = _pool_entry(self.api_client)["specTemplate"]["componentConfig"]["hypervisor"]["podTemplate"]
        return [s["name"] for s in template["template"]["spec"].get("imagePullSecrets") or []]

    def _run(self):
        try:
            self._follow()
        except Exception as exc:  # noqa: BLE001 - said by the test's assertion
            self.error = exc

    def _follow(self):
        while not self.stop.wait(0.3):
            try:
                names = self._names()
            except client.exceptions.ApiException:
                continue
            if not self.seen or self.seen[-1] != names:
                self.seen.append(names)
            if self.secret not in names:
                self.moved = True
            elif self.moved:
                client.CoreV1Api(self.api_client).patch_namespaced_config_map(
                    "tfops-lab-kubelet", "kube-system", {"data": {"neverReadyImages": ""}})
                self.back = True
                return

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)


def test_a_pool_consumer_that_never_becomes_ready_fails_fast_and_the_pool_is_put_back(lab, api_client, never_ready):
    """#37 item 1: the hypervisor template repointed at the new version, its new Pods never Ready
    (ImagePullBackOff): the rotation fails once they have failed for 30 s (not at stall_timeout
    nor wait_timeout), repoints the component back and awaits that campaign; the result lists the
    component as modified and put back, never "nothing had changed"."""
    settle(api_client)
    tf.set_knobs(api_client, batchGapFloorSeconds=1)
    core = client.CoreV1Api(api_client)
    base = "poolreg-" + uuid.uuid4().hex[:5]
    new_value = canary("new")
    core.create_namespaced_secret(NS, {"metadata": {"name": base}, "stringData": {"token": canary("old")}})
    before = _pool_entry(api_client)
    label = "TensorFusionCluster %s pool %s hypervisor" % (TFC, POOL)
    consumer = [{"kind": "TensorFusionCluster", "pool": POOL, "component": "hypervisor"}]
    watcher = None
    try:
        _set_pull_secrets(lab, api_client, [base])
        image = _pool_entry(api_client)["specTemplate"]["componentConfig"]["hypervisor"]["image"]
        never_ready(re.escape(image))  # from now on no new hypervisor Pod becomes Ready ...
        watcher = _WhenPointedBack(api_client, base)  # ... until the template is back on base
        started = time.monotonic()
        run, res = rotate(lab, name=base, strategy="versioned", string_data={"token": new_value},
                          consumers=consumer, delete_old=True, stall_timeout=600, wait_timeout=900)
        elapsed = time.monotonic() - started
        assert run.rc != 0, res
        assert watcher.back, ("the template was not repointed at the new version and back",
                              watcher.seen, watcher.error, res)
        # Failed once the Pods had not started for 30 s; the put-back's campaign is in this time too.
        assert elapsed < 300, "it waited for stall_timeout (%.0f s)" % elapsed
        assert res["failed_step"] == "repoint" and res["failed_consumer"] == label, res["msg"]
        assert "hypervisor Pods do not start" in res["msg"] and "ImagePullBackOff" in res["msg"], res["msg"]
        assert "nothing had changed" not in res["msg"]
        new = res["created"][0]
        assert res["modified"] == [label]
        assert res["restored"] == res["put_back"] == ["%s points at %s again" % (label, base)]
        assert res["not_put_back"] == [] and res["stuck"] == []
        assert res["msg"].endswith("; put back: %s points at %s again" % (label, base))
        assert [(s["step"], s["status"]) for s in res["steps"]] == [
            ("create", "ok"), ("repoint", "failed"), ("restore", "ok")]
        assert res["changed"] is True
        # The pool is back on the old Secret and its campaign finished: every hypervisor Pod reads
        # base and is Ready.
        template = _pool_entry(api_client)["specTemplate"]["componentConfig"]["hypervisor"]["podTemplate"]
        names = [s["name"] for s in template["template"]["spec"]["imagePullSecrets"]]
        assert base in names and new not in names, names
        pods = live_pods(api_client, NS, "tensor-fusion.ai/component=hypervisor")
        assert len(pods) == 10 and all([s.name for s in p.spec.image_pull_secrets] == names for p in pods)
        assert all(any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or []) for p in pods)
        assert base in secret_names(api_client) and new in secret_names(api_client), "nothing deleted"
        assert_no_value(run.stdout + run.stderr, [new_value])
    finally:
        if watcher is not None:
            watcher.close()
        _kubelet_knobs(core, neverReadyImages="")
        tf.set_knobs(api_client, batchGapFloorSeconds=None)
        _restore_pool_entry(api_client, before)
        for name in [n for n in secret_names(api_client) if n.startswith(base)]:
            core.delete_namespaced_secret(name, NS)
    settle(api_client)


def _web(api_client, ns, secret="app-cred", image=None, replicas=2):
    apps = client.AppsV1Api(api_client)
    body = deployment("web", image=image or "registry.lab/app:%s" % ns, replicas=replicas)
    body["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": secret}}]
    apps.create_namespaced_deployment(ns, body)
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "web"
             and (d.status.available_replicas or 0) == replicas, namespace=ns)
    return body["spec"]["template"]["spec"]["containers"][0]["image"]


def test_in_place_whose_restore_cannot_roll_either_says_what_is_stuck_and_what_to_do(lab, api_client, ns, never_ready):
    """#37 item 1: in place, a Deployment whose new Pods never start (also on the previous
    content): the Secret's previous content is put back, the Deployment's restart on it is not
    (its rollout cannot finish), and the result says which Pods are stuck, why, that its Ready
    Pods run on the previous content, and what to do."""
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    old_value, new_value = canary("old"), canary("new")
    core.create_namespaced_secret(ns, {"metadata": {"name": "app-cred"}, "stringData": {"pw": old_value}})
    image = _web(api_client, ns)
    never_ready(re.escape(image))
    started = time.monotonic()
    run, res = rotate(lab, name="app-cred", namespace=ns, strategy="in_place", string_data={"pw": new_value},
                      consumers=[{"kind": "Deployment", "name": "web"}], wait_timeout=900)
    assert run.rc != 0, res
    assert time.monotonic() - started < 300, "waited for wait_timeout"
    web = "Deployment %s/web" % ns
    assert res["failed_step"] == "roll" and res["failed_consumer"] == web, res["msg"]
    [backup] = res["created"]
    assert res["modified"] == ["Secret app-cred", web]
    assert res["put_back"] == ["Secret app-cred has its previous content again (copy in %s)" % backup]
    assert res["not_put_back"] == ["%s restarted on the previous content" % web]
    [stuck] = res["stuck"]
    assert stuck.startswith("%s is stuck mid-rollout; to do: fix what keeps its new Pods from starting (web-" % web)
    assert "ImagePullBackOff" in stuck and "its rollout finishes by itself, on the previous content, " \
        "and nothing else is left to put back" in stuck, stuck
    assert "run on the rotated content" not in stuck, "no Ready Pod started on the rotated content"
    assert "; STUCK: %s is stuck mid-rollout" % web in res["msg"]
    [entry] = [s for s in res["steps"] if s.get("stuck")]
    assert entry["stuck"]["pods_not_ready"] and entry["stuck"]["ready_on_rotated"] == []
    # What the result says is what the cluster shows: the previous content, the two Pods of
    # before still Ready, one new Pod that cannot start.
    assert secret_data(api_client, "app-cred", ns) == {"pw": old_value}
    dep = apps.read_namespaced_deployment("web", ns)
    assert (dep.status.available_replicas or 0) == 2, dep.status
    stuck_pods = [p.metadata.name for p in live_pods(api_client, ns, "app=web")
                  if not any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or [])]
    assert any(p in stuck for p in stuck_pods), (stuck_pods, stuck)
    assert_no_value(run.stdout + run.stderr, [old_value, new_value])


def _kubelet_knobs(core, **knobs):
    """Set (None: remove) knobs of the kubelet stand-in (ConfigMap kube-system/tfops-lab-kubelet)."""
    try:
        core.patch_namespaced_config_map("tfops-lab-kubelet", "kube-system", {"data": knobs})
    except client.exceptions.ApiException as exc:
        if exc.status != 404:
            raise
        core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                          "data": {k: v for k, v in knobs.items() if v}})


def test_in_place_verifies_what_each_pod_references_not_its_mark(lab, api_client, ns):
    """#37 item 5: a Deployment that points at a versioned copy of the Secret is refused before
    anything is written; one repointed at the copy while the rotation rolls it is restarted (its
    Pods carry the rotation's mark) but read the copy: verification fails, naming what they read,
    and the previous content is put back."""
    import threading
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    old_value, new_value = canary("old"), canary("new")
    core.create_namespaced_secret(ns, {"metadata": {"name": "app-cred"}, "stringData": {"pw": old_value}})
    consumers = [{"kind": "Deployment", "name": "web"}]
    # A versioned copy, as a versioned rotation makes it (immutable, in the Secret's family).
    run, res = rotate(lab, name="app-cred", namespace=ns, strategy="versioned", string_data={"pw": old_value},
                      wait=False, consumers=[])
    assert run.rc == 0, res.get("msg")
    copy_name = res["secret"]["name"]
    _web(api_client, ns, secret=copy_name)
    secret_rv = core.read_namespaced_secret("app-cred", ns).metadata.resource_version
    run, res = rotate(lab, name="app-cred", namespace=ns, strategy="in_place", string_data={"pw": new_value},
                      consumers=consumers)
    assert run.rc != 0 and res["msg"] == (
        "consumer Deployment %s/web does not reference Secret app-cred (it references %s, a version of "
        "it: rotate with strategy versioned, or point it at app-cred first): an in-place rotation would "
        "restart it without it ever reading the new content; nothing was written" % (ns, copy_name)), res["msg"]
    assert core.read_namespaced_secret("app-cred", ns).metadata.resource_version == secret_rv

    def point(secret):
        apps.patch_namespaced_deployment("web", ns, {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "envFrom": [{"secretRef": {"name": secret}}]}]}}}})
    point("app-cred")
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "web" and (d.status.updated_replicas or 0) == 2
             and (d.status.available_replicas or 0) == 2 and (d.status.replicas or 0) == 2, namespace=ns)
    _kubelet_knobs(core, readyDelaySeconds="5")  # a rollout that takes a while
    repointed = threading.Event()

    def repoint_during_the_roll():
        """Someone points web at the copy again once the rotation has restarted it."""
        while not repointed.is_set():
            dep = apps.read_namespaced_deployment("web", ns)
            if "secret.ops.tensor-fusion.ai/app-cred" in (dep.spec.template.metadata.annotations or {}):
                point(copy_name)
                repointed.set()
                return
            time.sleep(0.2)
    thread = threading.Thread(target=repoint_during_the_roll, daemon=True)
    thread.start()
    try:
        run, res = rotate(lab, name="app-cred", namespace=ns, strategy="in_place", string_data={"pw": new_value},
                          consumers=consumers, wait_timeout=600)
    finally:
        repointed.set()
        thread.join(timeout=10)
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
    assert run.rc != 0, "verified although its Pods read %s" % copy_name
    assert res["failed_step"] == "verify" and res["failed_consumer"] == "Deployment %s/web" % ns, res["msg"]
    assert "does not reference Secret app-cred (it references %s)" % copy_name in res["msg"], res["msg"]
    assert res["put_back"][0].startswith("Secret app-cred has its previous content again")
    assert secret_data(api_client, "app-cred", ns) == {"pw": old_value}
    pods = live_pods(api_client, ns, "app=web")
    assert pods and all(p.spec.containers[0].env_from[0].secret_ref.name == copy_name for p in pods)
    assert_no_value(run.stdout + run.stderr, [old_value, new_value])
