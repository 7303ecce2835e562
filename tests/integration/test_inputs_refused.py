"""Nothing is written before every input is checked (#36), against the lab's API server.

Each runbook runs once for an inventory of hosts, one bad tfops_* variable per host (all of them
the session lab): every host must stop in its inputs step, before the lock, with a message that
names the variable, and no resourceVersion may move in the lab - the TensorFusionCluster, its
GPUPool, the release namespace's Secrets, ConfigMaps, workloads and Leases (the maintenance Lease
included: it must not even be created, nor a report ConfigMap). The modules' own refusals run the
same way, one task each, around a Secret and its consumer of the test's own namespace.

A run that fails in its report step must still release its lock and leave a report."""
import json
import os
import uuid
from pathlib import Path

import pytest
import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from .ansible_runner import run_playbook
from .helpers import GROUP, NS, VERSION, deployment, wait_for
from .settle import settle

LEASE = "tensorfusion-ops-maintenance"
# A kubeconfig given as data whose user would run a command on the controller (#46).
PWNED = "/tmp/tfops-inputs-exec-ran"
EXEC_KUBECONFIG = {"apiVersion": "v1", "kind": "Config",
                   "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
                   "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}], "current-context": "x",
                   "users": [{"name": "u", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                                             "command": "touch", "args": [PWNED]}}}]}
# Lines as /etc/shadow has them (which parse as YAML keys without values).
FILES = str(Path(__file__).resolve().parent / "files")
SHADOW_LIKE = str(Path(FILES) / "shadow-like")
NOT_A_MAPPING = str(Path(FILES) / "not-a-mapping.yaml")
INPUTS_TASK = "Check every tfops_* variable before anything is written"
DATA_TEXT = "dG9rZW4="  # what issue #36 gave as data: Ansible read it as {"dG9rZW4": ""}


def versions(api_client, namespaces):
    """{(kind, namespace, name): resourceVersion} of everything a runbook or module could write."""
    found = {}
    custom = client.CustomObjectsApi(api_client)
    for plural in ("tensorfusionclusters", "gpupools"):
        for obj in custom.list_cluster_custom_object(GROUP, VERSION, plural)["items"]:
            found[(plural, None, obj["metadata"]["name"])] = obj["metadata"]["resourceVersion"]
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    coordination = client.CoordinationV1Api(api_client)
    for namespace in namespaces:
        for kind, lister in (("Secret", core.list_namespaced_secret), ("ConfigMap", core.list_namespaced_config_map),
                             ("Lease", coordination.list_namespaced_lease),
                             ("Deployment", apps.list_namespaced_deployment),
                             ("StatefulSet", apps.list_namespaced_stateful_set),
                             ("DaemonSet", apps.list_namespaced_daemon_set)):
            for obj in lister(namespace).items:
                found[(kind, namespace, obj.metadata.name)] = obj.metadata.resource_version
    return found


def moved(before, after):
    return {k: (before.get(k), after.get(k)) for k in set(before) | set(after) if before.get(k) != after.get(k)}


@pytest.fixture(scope="module")
def app_ns(api_client):
    """A namespace with a Secret and a Deployment that uses it (the rotation's target)."""
    core = client.CoreV1Api(api_client)
    name = "in-" + uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": name}})
    core.create_namespaced_secret(name, {"metadata": {"name": "app-cred"}, "data": {"token": "b2xk"}})
    body = deployment("app", replicas=1)
    body["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "app-cred", "key": "token"}}}]
    client.AppsV1Api(api_client).create_namespaced_deployment(name, body)
    # Settled (its controller has written its status): from now on only a write of ours moves it.
    wait_for(client.AppsV1Api(api_client).list_namespaced_deployment,
             lambda d: d.metadata.name == "app" and (d.status.observed_generation or 0) >= d.metadata.generation
             and (d.status.available_replicas or 0) == 1 and (d.status.updated_replicas or 0) == 1,
             namespace=name, timeout=120, what="Deployment app available")
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def base(lab, helm_bins, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("inputs")
    return {"tfops_kubeconfig": lab["kubeconfig"], "tfops_helm_binary": helm_bins["3"],
            "tfops_artifacts_dir": str(tmp / "artifacts"), "tfops_snapshot_dir": str(tmp / "snapshots"),
            "tfops_chart_repo": lab["tensorfusion"]["chart_repo"], "tfops_verify_acceptance_pod": False}


# One bad input per host: (host, the variables, what the refusal says). The first ones are those
# issue #36 found getting through (each took the lock, wrote a snapshot, upgraded the chart, ...).
UPGRADE = [
    ("batch-abc", {"tfops_batch_percentage": "abc"}, "tfops_batch_percentage: 'abc' is not a whole number (1-100)"),
    ("batch-0", {"tfops_batch_percentage": 0}, "tfops_batch_percentage: 0 is out of range (1-100)"),
    ("batch-101", {"tfops_batch_percentage": 101}, "tfops_batch_percentage: 101 is out of range (1-100)"),
    ("interval", {"tfops_batch_interval": "1 minute"}, "tfops_batch_interval: '1 minute' is not a Go duration"),
    ("pools", {"tfops_pools": ["nosuchpool"]}, "tfops_pools[0]: no pool nosuchpool; the pools are: shared"),
    ("values-files", {"tfops_values_files": ["/tmp/tfops-nonexistent/values.yaml"]},
     "tfops_values_files[0]: /tmp/tfops-nonexistent/values.yaml is not a file on the controller"),
    # #46: a file that is not a mapping of values never becomes the release's values (its lines were
    # keys of the values and of the restore point); a folder that is not a chart is not read as one.
    ("values-not-mapping", {"tfops_values_files": [NOT_A_MAPPING]},
     "tfops_values_files[0]: %s is not a mapping of Helm values but a YAML list (its content is not shown)" % NOT_A_MAPPING),
    ("values-cn-not-mapping", {"tfops_region": "cn", "tfops_values_cn": NOT_A_MAPPING},
     "tfops_values_cn: %s is not a mapping of Helm values" % NOT_A_MAPPING),
    # #46 item 2: a path outside the project and the runbook's folders is refused before it is read.
    ("values-outside", {"tfops_values_files": ["/etc/passwd"]},
     "tfops_values_files[0]: /etc/passwd is outside the folders a runbook may read files from"),
    ("values-cn-outside", {"tfops_region": "cn", "tfops_values_cn": "../../../../../../../../etc/shadow"},
     "tfops_values_cn: ../../../../../../../../etc/shadow (/etc/shadow) is outside the folders"),
    ("extra-args-outside", {"tfops_helm_extra_args": "--ca-file=/etc/ssl/private/x.pem"},
     "tfops_helm_extra_args: /etc/ssl/private/x.pem is outside the folders a runbook may read files from"),
    ("helm-not-helm", {"tfops_helm_binary": "/usr/bin/env"}, "tfops_helm_binary: /usr/bin/env is not helm"),
    ("artifacts-outside", {"tfops_artifacts_dir": "/etc/cron.d"},
     "tfops_artifacts_dir: /etc/cron.d is outside the folders a runbook may write to"),
    ("values-shadow", {"tfops_values_files": [SHADOW_LIKE]},
     "tfops_values_files[0]: %s is not a values file: none of its 2 keys has a value" % SHADOW_LIKE),
    ("kubeconfig-exec", {"tfops_kubeconfig": EXEC_KUBECONFIG},
     "tfops_kubeconfig: user u would run a command on the controller to get its credentials"),
    ("chart-outside", {"tfops_chart": "../../../../../../../../etc"},
     "tfops_chart: ../../../../../../../../etc (/etc) is outside the folders a runbook may read files from"),
    ("chart-not-a-chart", {"tfops_chart": FILES}, "tfops_chart: %s is a folder without Chart.yaml: not a chart" % FILES),
    ("on-deadline", {"tfops_on_deadline": "explode"}, "tfops_on_deadline: 'explode' is not one of pause, fail"),
    ("image", {"tfops_hypervisor_image": "Bad Image:1"}, "tfops_hypervisor_image: 'Bad Image:1' is not a valid image"),
    ("chart-version", {"tfops_chart_version": "latest!"}, "tfops_chart_version: 'latest!' is not a chart version"),
    # #46: a version the repository does not have was found by helm after the lock and a restore point.
    ("chart-version-missing", {"tfops_chart_version": "9.9.9"},
     "tfops_chart_version: 9.9.9 is not a version of chart tensor-fusion in the chart repository's index (it has "),
    ("gates", {"tfops_gates": "abc"}, "tfops_gates: a string, not a mapping"),
    ("values", {"tfops_values": "notadict"}, "tfops_values: a string, not a mapping"),
    ("region", {"tfops_region": "mars"}, "tfops_region: 'mars' is not one of international, cn"),
    ("timeout", {"tfops_timeout": "abc"}, "tfops_timeout: 'abc' is not a whole number (1 or more seconds)"),
    ("snapshot-store", {"tfops_snapshot_store": "tape"}, "tfops_snapshot_store: 'tape' is not one of local, cluster, both"),
    ("report-store", {"tfops_report_store": "s3"}, "tfops_report_store: 's3' is not one of local, cluster, both"),
    ("lock-ttl", {"tfops_lock_ttl": 0}, "tfops_lock_ttl: 0 is out of range (1 or more seconds)"),
    # #46: numbers and strings bounded (a 31-year lock, forged log lines, 100 kB holders).
    ("lock-ttl-years", {"tfops_lock_ttl": 1000000000}, "tfops_lock_ttl: 1000000000 seconds is more than a day"),
    ("lock-holder-newline", {"tfops_lock_holder": "ops\nTASK [forged]"},
     "tfops_lock_holder holds a line break or another control character"),
    ("lock-holder-long", {"tfops_lock_holder": "h" * 100000}, "tfops_lock_holder is 100000 characters long; at most 256"),
    ("each-batch", {"tfops_each_batch": "perhaps"}, "tfops_each_batch: 'perhaps' is not a boolean"),
    # And more of the kind.
    ("namespace", {"tfops_namespace": "nosuchns"}, "tfops_namespace: namespace nosuchns does not exist"),
    ("window-pool", {"tfops_window_pool": "nosuchpool"}, "tfops_window_pool: there is no GPUPool nosuchpool"),
    ("verify-pool", {"tfops_verify_pool": "nosuchpool"}, "tfops_verify_pool: there is no GPUPool nosuchpool"),
    ("chart-repo", {"tfops_chart_repo": "not a url"}, "tfops_chart_repo: 'not a url' is not an http:// or https:// URL"),
    ("helm", {"tfops_helm_binary": "/tmp/tfops-nonexistent/helm"}, "tfops_helm_binary: /tmp/tfops-nonexistent/helm is not an executable file"),
    ("extra-args", {"tfops_helm_extra_args": "--kube-context=prod"}, "tfops_helm_extra_args: '--kube-context=prod' is a flag"),
    ("cron", {"tfops_window_cron": "0 2 * * *"}, "missing parameter(s) required by 'tfops_window_cron': tfops_window_duration"),
    ("gate-bake", {"tfops_gates": {"bake_seconds": 0}}, "tfops_gates.bake_seconds must be a positive number"),
    ("pool-template", {"tfops_pools": [{"name": "shared", "components": {"hypervisor": {"pod_template": {"spex": {}}}}}]},
     "tfops_pools[0].components.hypervisor.pod_template: unknown key spex"),
    # Checked against the field names the API server publishes (its OpenAPI v3), once connected.
    ("pool-template-field", {"tfops_pools": [{"name": "shared", "components": {"hypervisor": {"pod_template": {
        "template": {"spec": {"containers": [{"name": "tensorfusion-hypervisor", "imagee": "x"}]}}}}}}]},
     "tfops_pools[0].components.hypervisor.pod_template.template.spec.containers[0]: unknown key imagee"),
    ("keep-pools", {"tfops_keep_pools": "sometimes"}, "tfops_keep_pools: 'sometimes' is not a boolean"),
    ("kubeconfig", {"tfops_kubeconfig": "/tmp/tfops-nonexistent/kubeconfig"}, "tfops_kubeconfig: /tmp/tfops-nonexistent/kubeconfig is not a file"),
]
ROTATE = [
    ("strategy", {"tfops_secret_strategy": "sideways"}, "tfops_secret_strategy: 'sideways' is not one of in_place, versioned"),
    ("no-name", {"tfops_secret_name": ""}, "tfops_secret_name is required"),
    ("data-text", {"tfops_secret_data": DATA_TEXT, "tfops_secret_string_data": ""},
     "tfops_secret_data: a string, not a mapping of Secret keys to base64 values"),
    ("nested", {"tfops_secret_string_data": {"token": {"nested": "x"}}}, "tfops_secret_string_data.token: a mapping, not text"),
    ("no-secret", {"tfops_secret_name": "nosuchsecret"}, "tfops_secret_name: there is no Secret nosuchsecret in namespace"),
    ("no-consumer", {"tfops_secret_consumers": [{"kind": "Deployment", "name": "nosuchapp"}]},
     "tfops_secret_consumers[0]: Deployment {ns}/nosuchapp does not exist"),
    ("secret-ns", {"tfops_secret_namespace": "nosuchns"}, "tfops_secret_namespace: namespace nosuchns does not exist"),
    ("keep", {"tfops_secret_keep": -1}, "tfops_secret_keep: -1 is out of range (0 or more)"),
    # #46 item 4: secret_rotate wrote its copy of the Secret before the API server refused the change.
    ("type-change", {"tfops_secret_type": "kubernetes.io/dockerconfigjson"},
     "tfops_secret_type: Secret app-cred is of type Opaque, and a Secret's type cannot change"),
]
ROLLBACK = [
    ("snapshot-path", {"tfops_snapshot": "/tmp/tfops-nonexistent/bundle"}, "tfops_snapshot: /tmp/tfops-nonexistent/bundle is neither"),
    ("snapshot-ref", {"tfops_snapshot": "secret://tensor-fusion-sys/nosuchbundle"},
     "tfops_snapshot: there is no snapshot secret://tensor-fusion-sys/nosuchbundle"),
    # #46: any Secret passed the check and was read as a bundle after the lock.
    ("snapshot-app-secret", {"tfops_snapshot": "secret://{ns}/app-cred"},
     "tfops_snapshot: secret://{ns}/app-cred is not a restore point of tensorfusion.ops (Secret app-cred is of "
     "type Opaque, not tensorfusion.ops/snapshot)"),
    ("restore", {"tfops_restore_component_config": "maybe"}, "tfops_restore_component_config: 'maybe' is not a boolean"),
    ("snapshot-outside", {"tfops_snapshot": "/etc"}, "tfops_snapshot: /etc is outside the folders a runbook may read files from"),
    # #46 item 4: helm_release refused it after the lock and the window.
    ("no-release", {"tfops_release": "nosuchrelease"},
     "tfops_release: there is no Helm release nosuchrelease in namespace tensor-fusion-sys"),
]
PRECHECK = [
    ("rbac-preflight", {"tfops_rbac_preflight": "perhaps"}, "tfops_rbac_preflight: 'perhaps' is not a boolean"),
]
CASES = {"tensorfusion.ops.upgrade": UPGRADE, "tensorfusion.ops.rotate_secret": ROTATE,
         "tensorfusion.ops.rollback": ROLLBACK, "tensorfusion.ops.precheck": PRECHECK}


@pytest.fixture(scope="module")
def refused_runs(lab, api_client, base, app_ns, tmp_path_factory):
    """{playbook: (run, resourceVersions moved)}: each runbook run once, one bad input per host."""
    settle(api_client)
    tmp = tmp_path_factory.mktemp("refusals")
    rotation = {"tfops_secret_name": "app-cred", "tfops_secret_namespace": app_ns,
                "tfops_secret_string_data": {"token": "new-value-h36"}}
    out = {}
    for playbook, cases in CASES.items():
        common = dict(base, ansible_connection="local", **(rotation if "rotate" in playbook else {}))
        # A case may name the test's own namespace as {ns}.
        inventory = {"refusals": {"vars": common, "hosts": {
            host: json.loads(json.dumps(bad).replace("{ns}", app_ns)) for host, bad, _e in cases}}}
        path = tmp / ("%s.yml" % playbook.rsplit(".", 1)[-1])
        path.write_text(yaml.safe_dump(inventory))
        before = versions(api_client, [NS, app_ns])
        run = run_playbook(playbook, {"tfops_hosts": "refusals"}, args=("-i", str(path), "--forks", "10"), timeout=600)
        out[playbook] = (run, moved(before, versions(api_client, [NS, app_ns])))
    return out


@pytest.mark.parametrize("playbook, host, expected", [
    (playbook, host, expected) for playbook, cases in CASES.items() for host, _bad, expected in cases])
def test_a_bad_runbook_variable_is_refused_before_anything_is_written(refused_runs, app_ns, playbook, host, expected):
    run, changed = refused_runs[playbook]
    assert run.rc != 0, run.stdout[-3000:]
    result = run.task_results(INPUTS_TASK, host)
    assert [r["status"] for r in run.results if r["task"] == INPUTS_TASK and r["host"] == host] == ["failed"]
    assert result["refused"] and all(name in result["msg"] for name in result["refused"]), result
    assert expected.format(ns=app_ns) in result["msg"], result["msg"]
    assert "refused before anything was written (no lock, no change)" in result["msg"]
    assert "new-value-h36" not in json.dumps(result)
    # The job fails with that message, and the lock was never taken.
    final = run.task_results("The job fails when the run did not succeed", host)
    assert expected.format(ns=app_ns) in final["msg"], final
    assert "Take (or renew) the maintenance lock" not in [r["task"] for r in run.results if r["host"] == host]
    # Its report says so, and is local only.
    report = run.task_results("Write the report", host)
    assert report["status"] == "failed" and report["report_ref"] is None and report["dir"], report
    assert json.loads((Path(report["dir"]) / "report.json").read_text())["error"]["step"] == "preflight"
    # Not one object written: no Lease, no report ConfigMap, no snapshot, no chart revision.
    assert changed == {}, changed
    assert not Path(PWNED).exists(), "a kubeconfig given as data ran its command"


JINJA_RAN = "/tmp/tfops-inputs-jinja-ran"
RUN_IT = "{{ lookup('ansible.builtin.pipe', 'touch %s') }}" % JINJA_RAN


@pytest.mark.parametrize("playbook, where, bad, named", [
    ("tensorfusion.ops.upgrade", "extra", {"tfops_values": {"note": RUN_IT}}, "tfops_values"),
    ("tensorfusion.ops.upgrade", "extra", {"tfops_kubeconfig": RUN_IT}, "tfops_kubeconfig"),
    ("tensorfusion.ops.rotate_secret", "extra", {"tfops_secret_name": RUN_IT, "tfops_secret_namespace": "x"},
     "tfops_secret_name"),
    ("tensorfusion.ops.precheck", "inventory", {"tfops_namespace": RUN_IT}, "tfops_namespace"),
])
def test_a_variable_that_carries_a_template_is_refused_and_never_rendered(
        lab, api_client, base, tmp_path, playbook, where, bad, named):
    """#46 item 3: input is data. Jinja in a tfops_* value (from -e or the inventory) is refused by
    name by the runbook's first task, before anything renders it: the lookup never runs, nothing
    is written, the lock is never taken."""
    if os.path.exists(JINJA_RAN):
        os.unlink(JINJA_RAN)
    before = versions(api_client, [NS])
    if where == "extra":
        run = run_playbook(playbook, dict(base, **bad), timeout=300)
    else:
        inventory = tmp_path / "inventory.yml"
        inventory.write_text(yaml.safe_dump({"all": {"hosts": {"cluster-a": dict(bad, ansible_connection="local")}}}))
        run = run_playbook(playbook, dict(base, tfops_hosts="cluster-a"), args=("-i", str(inventory)), timeout=300)
    assert run.rc != 0
    host = "localhost" if where == "extra" else "cluster-a"
    task = "Input is data - no tfops_* variable may carry a template"
    assert [r["status"] for r in run.results if r["task"] == task and r["host"] == host] == ["failed"], run.stdout[-3000:]
    guard = run.task_results(task, host)
    assert guard["templated"] == [named], guard
    assert guard["msg"].startswith("%s: holds Jinja" % named) and "!unsafe" in guard["msg"], guard["msg"]
    assert not os.path.exists(JINJA_RAN), "the template in %s was rendered" % named
    assert moved(before, versions(api_client, [NS])) == {}
    assert "Take (or renew) the maintenance lock" not in [r["task"] for r in run.results]


# ---- the modules -------------------------------------------------------------------------------
HV_CHANGE = {"components": {"hypervisor": {"image": "tensorfusion/tensor-fusion-hypervisor:9.9.9"}},
             "rolling_update": {"auto_update_hypervisor": True}}


def pod_template(template):
    return {"pool": "shared", "components": {"hypervisor": {"pod_template": template}},
            "rolling_update": {"auto_update_hypervisor": True}}


def module_cases(app_ns):
    """(task name, module, options, what the refusal says)."""
    rotate = {"name": "app-cred", "namespace": app_ns}
    return [
        # gpupool_rollout: a namespace that is not there started a real rollout; pod templates
        # that are no Pod templates were stored.
        ("rollout-namespace", "gpupool_rollout", dict(HV_CHANGE, pool="shared", namespace="nosuchns"),
         "namespace: namespace nosuchns does not exist; nothing was written"),
        ("rollout-bogus-key", "gpupool_rollout", pod_template({"bogusKey": 1}),
         "components.hypervisor.pod_template: unknown key bogusKey; a Pod template has apiVersion, kind, metadata, template"),
        ("rollout-spex", "gpupool_rollout", pod_template({"template": {"spex": {"containers": []}}}),
         "components.hypervisor.pod_template.template: unknown key spex"),
        ("rollout-spex-top", "gpupool_rollout", pod_template({"spex": {}}),
         "components.hypervisor.pod_template: unknown key spex"),
        ("rollout-misspelt-field", "gpupool_rollout",
         pod_template({"template": {"spec": {"tolerationz": [], "containers": [{"name": "tensorfusion-hypervisor"}]}}}),
         "components.hypervisor.pod_template.template.spec: unknown key tolerationz; a Pod spec has"),
        ("rollout-containers-mapping", "gpupool_rollout",
         pod_template({"template": {"spec": {"containers": {"name": "tensor-fusion-hypervisor"}}}}),
         "components.hypervisor.pod_template.template.spec.containers: a mapping, not a list of containers"),
        ("rollout-container-no-name", "gpupool_rollout",
         pod_template({"template": {"spec": {"containers": [{"image": "x"}]}}}),
         "template.spec.containers[0]: a container needs a name"),
        ("rollout-env-mapping", "gpupool_rollout",
         pod_template({"template": {"spec": {"containers": [{"name": "tensor-fusion-hypervisor", "env": {"A": "1"}}]}}}),
         "template.spec.containers[0].env: a mapping, not a list of env"),
        ("rollout-deadline", "gpupool_rollout", dict(HV_CHANGE, pool="shared", deadline="soon"),
         "deadline: 'soon' is not an ISO 8601 time"),
        # secret_rotate: content that replaced the Secret, a consumer found only after the write.
        ("rotate-data-text", "secret_rotate", dict(rotate, data=DATA_TEXT),
         "data: a string, not a mapping of Secret keys to base64 values"),
        ("rotate-data-parsed", "secret_rotate", dict(rotate, data={"dG9rZW4": ""}),
         "data.dG9rZW4 is empty: a rotation sets new content"),
        ("rotate-nested", "secret_rotate", dict(rotate, string_data={"token": {"nested": "x"}}),
         "string_data.token: a mapping, not text"),
        ("rotate-list", "secret_rotate", dict(rotate, string_data=["token=x"]),
         "string_data: a list, not a mapping of Secret keys to values"),
        ("rotate-no-consumer", "secret_rotate",
         dict(rotate, string_data={"token": "new-value-h36"}, consumers=[{"kind": "Deployment", "name": "nosuchapp"}]),
         "consumer Deployment %s/nosuchapp: Deployment %s/nosuchapp does not exist; nothing was written" % (app_ns, app_ns)),
        ("rotate-no-consumer-versioned", "secret_rotate",
         dict(rotate, strategy="versioned", string_data={"token": "new-value-h36"},
              consumers=[{"kind": "Deployment", "name": "nosuchapp"}]),
         "Deployment %s/nosuchapp does not exist; nothing was written" % app_ns),
        ("rotate-namespace", "secret_rotate", dict(name="app-cred", namespace="nosuchns", string_data={"token": "v"}),
         "namespace: namespace nosuchns does not exist; nothing was written"),
        ("rotate-not-base64", "secret_rotate", dict(rotate, data={"token": "%%%"}), "data.token is not base64"),
        # Every text option of every module is one bounded line (core/option_text.py; #46 item 6).
        ("text-forged-line", "secret_rotate", dict(rotate, string_data={"token": "v2"}, type="Opaque\nTASK [forged]"),
         "type holds a line break or another control character"),
        ("text-too-long", "tf_cluster_info", dict(namespace="n" * 5000), "namespace is 5000 characters long; text is at most 4096"),
        # The API server refuses a Secret's type change; the module wrote its copy Secret first (#46).
        ("rotate-type-change", "secret_rotate", dict(rotate, string_data={"token": "v2"}, type="kubernetes.io/dockerconfigjson"),
         "type: Secret app-cred is of type Opaque, and a Secret's type cannot change"),
        # helm_release: options together that cannot be, or that a state ignores.
        ("helm-reuse-reset", "helm_release", dict(reuse_values=True, reset_values=True, chart_version="1.8.7"),
         "reset_values and reuse_values are mutually exclusive"),
        ("helm-snapshot-present", "helm_release", dict(snapshot="secret://tensor-fusion-sys/x"),
         "snapshot goes with state: rolled_back; state: present would ignore it"),
        ("helm-revision-present", "helm_release", dict(revision=1), "revision goes with state: rolled_back"),
        ("helm-signing-key", "helm_release", dict(state="rolled_back", revision=1, signing_key="k" * 20),
         "signing_key goes with snapshot"),
        ("helm-repo-url", "helm_release", dict(chart_repo_url="not a url"),
         "chart_repo_url: 'not a url' is not an http:// or https:// URL"),
        ("helm-timeout", "helm_release", dict(wait_timeout=-1), "wait_timeout: a timeout cannot be negative (-1)"),
        ("auth-exec", "tf_cluster_info", dict(namespace=NS, kubeconfig=EXEC_KUBECONFIG),
         "kubeconfig: user u would run a command on the controller to get its credentials"),
        ("helm-values-not-mapping", "helm_release", dict(values_files=["/etc/passwd"]),
         "values_files: /etc/passwd is not a mapping of Helm values but a YAML str (its content is not shown)"),
        ("helm-chart-not-a-chart", "helm_release", dict(chart_ref="/etc"),
         "chart_ref: /etc is a folder without Chart.yaml: not a chart"),
        # workload_restart: an unknown namespace read "deployments.apps ... not found".
        ("restart-namespace", "workload_restart", dict(namespace="nosuchns", name="app"),
         "namespace: namespace nosuchns does not exist; nothing was written"),
        ("restart-name", "workload_restart", dict(namespace=app_ns, name="nosuchapp"),
         "Deployment %s/nosuchapp does not exist" % app_ns),
        ("restart-timeout", "workload_restart", dict(namespace=app_ns, name="app", wait_timeout=-1),
         "wait_timeout: a timeout cannot be negative (-1)"),
        ("lock-ttl", "maintenance_lock", dict(namespace=NS, ttl=0), "ttl must be at least 1 second"),
        ("lock-ttl-years", "maintenance_lock", dict(namespace=NS, ttl=10 ** 9), "ttl: 1000000000 seconds is more than a day"),
        ("lock-holder-newline", "maintenance_lock", dict(namespace=NS, holder="ops\nTASK [forged]"),
         "holder holds a line break or another control character"),
        # helm_snapshot: state=absent deleted any Secret named as a bundle (#46).
        ("snapshot-delete-app-secret", "helm_snapshot",
         dict(state="absent", name="tensor-fusion-sys", namespace=NS, bundle="secret://%s/app-cred" % app_ns),
         "bundle: secret://%s/app-cred is not a restore point of tensorfusion.ops (Secret app-cred is of type "
         "Opaque, not tensorfusion.ops/snapshot); not removing it" % app_ns),
    ]


@pytest.fixture(scope="module")
def module_run(lab, api_client, helm_bins, app_ns, tmp_path_factory):
    """One playbook, one task per bad input (each may fail), and what moved in the lab meanwhile."""
    settle(api_client)
    cases = module_cases(app_ns)
    tasks = []
    for name, module, options, _expected in cases:
        if module == "helm_release":
            options = dict(options, binary_path=helm_bins["3"])
        tasks.append({"name": name, "tensorfusion.ops." + module: options, "ignore_errors": True})
    play = [{"name": "Bad module inputs", "hosts": "localhost", "gather_facts": False,
             "module_defaults": {"group/tensorfusion.ops.tfops": {"kubeconfig": lab["kubeconfig"]}},
             "tasks": tasks}]
    path = tmp_path_factory.mktemp("module-inputs") / "play.yml"
    path.write_text(yaml.safe_dump(play, sort_keys=False))
    before = versions(api_client, [NS, app_ns])
    run = run_playbook(str(path), timeout=600)
    return run, moved(before, versions(api_client, [NS, app_ns]))


@pytest.mark.parametrize("index", range(len(module_cases("app-ns"))))
def test_a_bad_module_input_is_refused_before_anything_is_written(module_run, app_ns, index):
    cases = module_cases(app_ns)
    name, _module, _options, expected = cases[index]
    run, changed = module_run
    result = run.task_results(name)
    assert [r["status"] for r in run.results if r["task"] == name] == ["failed"], result
    assert not result.get("changed"), result
    assert expected in result["msg"], result["msg"]
    # Readable: no part of the message masked by no_log, and no value shown.
    assert "********" not in result["msg"] and "new-value-h36" not in json.dumps(result)
    assert changed == {}, changed
    assert not Path(PWNED).exists(), "a kubeconfig given as data ran its command"


# ---- the end of a run always runs --------------------------------------------------------------
def test_a_run_that_fails_in_its_report_step_still_releases_its_lock_and_leaves_a_report(lab, api_client, base):
    """The issue's case: tfops_report_store s3 ran the whole run, failed in the report and never
    released the lock. Here the inputs' check is left out on purpose (--skip-tags inputs) so that
    the bad store reaches the report step itself."""
    settle(api_client)
    run = run_playbook("tensorfusion.ops.upgrade", dict(base, tfops_report_store="s3"),
                       args=("--tags", "precheck", "--skip-tags", "inputs"), timeout=600)
    assert run.rc != 0
    lock = run.task_results("Take (or renew) the maintenance lock")
    assert not lock.get("failed"), lock
    failed_report = [r for r in run.results if r["task"] == "Write the report" and r["status"] == "failed"]
    assert failed_report, "the report step failed as asked"
    assert "s3" in failed_report[0]["result"]["msg"]
    # The lock was released.
    released = run.task_results("Release the maintenance lock")
    assert not released.get("failed"), released
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(LEASE, NS)
    assert not lease.spec.holder_identity, lease.spec
    # A report exists: what could be written, locally with the default settings.
    report = run.task_results("Write the local report with the default settings")
    assert not report.get("failed"), report
    record = json.loads((Path(report["dir"]) / "report.json").read_text())
    assert Path(report["dir"]).is_relative_to(Path(base["tfops_artifacts_dir"])), report["dir"]
    assert record["playbook"] == "upgrade" and [s["name"] for s in record["steps"]][:3] == ["preflight", "lock", "window"]
    # And the job says what could not be written.
    final = run.task_results("The job fails when the run did not succeed")
    assert "the report could not be written as asked" in final["msg"] and "s3" in final["msg"], final["msg"]


def test_a_report_folder_that_fails_still_leaves_the_cluster_copy(lab, api_client, base, tmp_path):
    """store both, the local folder cannot be made (below a file): the ConfigMap is still written,
    the lock released, and the job fails saying which copy exists."""
    settle(api_client)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    run = run_playbook("tensorfusion.ops.upgrade", dict(base, tfops_artifacts_dir=str(blocker / "reports")),
                       args=("--tags", "precheck", "--skip-tags", "inputs"), timeout=600)
    assert run.rc != 0
    failed = [r["result"] for r in run.results if r["task"] == "Write the report" and r["status"] == "failed"]
    assert failed and "cannot write the report into" in failed[-1]["msg"], failed
    ref = failed[-1]["report_ref"]
    assert ref and ref in failed[-1]["msg"], failed[-1]
    name = ref.rsplit("/", 1)[-1]
    stored = client.CoreV1Api(api_client).read_namespaced_config_map(name, NS)
    assert json.loads(stored.data["report.json"])["playbook"] == "upgrade"
    lease = client.CoordinationV1Api(api_client).read_namespaced_lease(LEASE, NS)
    assert not lease.spec.holder_identity, lease.spec
    try:
        client.CoreV1Api(api_client).delete_namespaced_config_map(name, NS)
    except ApiException as exc:
        if exc.status != 404:
            raise


def test_a_refused_variable_is_said_at_once_when_the_api_server_does_not_answer(tmp_path):
    """#46: a typo waited out an API server that does not answer (retry_timeout) before it was
    reported; refused anyway, the cluster is read without retries."""
    import time
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "x",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9", "insecure-skip-tls-verify": True}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}]}))
    play = [{"name": "Inputs", "hosts": "localhost", "gather_facts": False, "tasks": [
        {"name": "Check", "tensorfusion.ops.runbook_inputs": {
            "playbook": "upgrade", "variables": {"tfops_batch_percentage": "abc"},
            "kubeconfig": str(kubeconfig), "retry_timeout": 120}}]}]
    path = tmp_path / "play.yml"
    path.write_text(yaml.safe_dump(play, sort_keys=False))
    started = time.monotonic()
    run = run_playbook(str(path), timeout=300)
    took = time.monotonic() - started
    result = run.task_results("Check")
    assert run.rc != 0 and "tfops_batch_percentage: 'abc' is not a whole number" in result["msg"], result
    assert "the cluster cannot be read" in result["msg"], result["msg"]
    assert took < 90, "refused after %.0f s: the outage was waited out" % took
