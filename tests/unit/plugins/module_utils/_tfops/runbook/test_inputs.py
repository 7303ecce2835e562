"""runbook/inputs.py: the one specification of the runbooks' tfops_* variables, checked all at
once before anything is written, each refusal naming the variable the user set (#36)."""
import os
import tempfile

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import values
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import inputs

HELM = "/usr/bin/helm"
SECRET = {"tfops_secret_name": "regcred", "tfops_secret_string_data": {"token": "x"}}


# The folders these tests' files are in count (the confinement itself is tested below, and in
# test_places.py): the controller's opt-in, as whoever runs it would give it.
ENV = dict(os.environ, TFOPS_ALLOWED_PATHS=os.pathsep.join(["/nonexistent", "/etc", tempfile.gettempdir()]))


def problems(playbook, **given):
    return inputs.check(playbook, given, helm_on_path=HELM, places=inputs.places_for(given, environ=ENV))[1]


# What issue #36 found getting through (each took the lock, wrote a snapshot, upgraded the chart,
# ...), and more of the same kind.
@pytest.mark.parametrize("playbook, given, expected", [
    ("upgrade", dict(tfops_batch_percentage="abc"), "tfops_batch_percentage: 'abc' is not a whole number (1-100)"),
    ("upgrade", dict(tfops_batch_percentage=0), "tfops_batch_percentage: 0 is out of range (1-100)"),
    ("upgrade", dict(tfops_batch_percentage=101), "tfops_batch_percentage: 101 is out of range (1-100)"),
    ("upgrade", dict(tfops_batch_percentage=True), "tfops_batch_percentage: True is not a whole number"),
    ("upgrade", dict(tfops_batch_interval="1 minute"), "tfops_batch_interval: '1 minute' is not a Go duration"),
    ("upgrade", dict(tfops_batch_interval="-5s"), "tfops_batch_interval: '-5s' is negative"),
    ("upgrade", dict(tfops_values_files=["/nonexistent/values.yaml"]),
     "tfops_values_files[0]: /nonexistent/values.yaml is not a file on the controller"),
    ("upgrade", dict(tfops_values_files="https://ok.example/v.yaml,/nonexistent/b.yaml"),
     "tfops_values_files[1]: /nonexistent/b.yaml is not a file"),
    ("upgrade", dict(tfops_on_deadline="explode"), "tfops_on_deadline: 'explode' is not one of pause, fail"),
    ("upgrade", dict(tfops_hypervisor_image="Bad Image:1"), "tfops_hypervisor_image: 'Bad Image:1' is not a valid image"),
    ("upgrade", dict(tfops_worker_image="repo/w:"), "tfops_worker_image: 'repo/w:' is not a valid image"),
    ("upgrade", dict(tfops_client_image="a\n"), "tfops_client_image: 'a\\n' is not a valid image"),
    ("upgrade", dict(tfops_chart_version="latest!"), "tfops_chart_version: 'latest!' is not a chart version"),
    ("upgrade", dict(tfops_chart_version="latest"), "tfops_chart_version: 'latest' is not a chart version"),
    ("upgrade", dict(tfops_gates="abc"), "tfops_gates: a string, not a mapping"),
    ("upgrade", dict(tfops_gates={"bake_seconds": 0}), "tfops_gates.bake_seconds must be a positive number"),
    ("upgrade", dict(tfops_gates={"bake_secs": 3}), "tfops_gates: unknown key bake_secs. Supported parameters include"),
    ("upgrade", dict(tfops_gates={"bake_seconds": "soon"}), "tfops_gates: argument 'bake_seconds' is of type str"),
    ("upgrade", dict(tfops_gates={"http": [{"url": "ftp://x"}]}), "tfops_gates.http url must be an http"),
    # gpupool_rollout's business_changes spec, then the gate's own rules, under the variables' names.
    ("upgrade", dict(tfops_business_change_gate="stop"), "tfops_business_change_gate: value of gate must be one of: off, warn, pause"),
    ("upgrade", dict(tfops_business_change_workloads="many"), "tfops_business_change_workloads: argument 'workloads' is of type str"),
    ("upgrade", dict(tfops_business_change_workloads=0), "tfops_business_change_workloads: 0 is not a whole number of 1 or more"),
    ("upgrade", dict(tfops_business_change_percent="150"), "tfops_business_change_percent: 150 is not a whole number 1-100"),
    ("upgrade", dict(tfops_business_change_gate=True), "tfops_business_change_gate: value of gate must be one of"),
    ("upgrade", dict(tfops_values="notadict"), "tfops_values: a string, not a mapping"),
    ("upgrade", dict(tfops_values=["a"]), "tfops_values: a list, not a mapping"),
    ("upgrade", dict(tfops_region="mars"), "tfops_region: 'mars' is not one of international, cn"),
    ("upgrade", dict(tfops_region="cn", tfops_chart_repo=""), "tfops_region: cn needs values-cn.yaml - set tfops_values_cn"),
    ("upgrade", dict(tfops_timeout="abc"), "tfops_timeout: 'abc' is not a whole number (1 or more seconds)"),
    ("upgrade", dict(tfops_timeout=0), "tfops_timeout: 0 is out of range (1 or more seconds)"),
    ("upgrade", dict(tfops_snapshot_store="tape"), "tfops_snapshot_store: 'tape' is not one of local, cluster, both"),
    ("upgrade", dict(tfops_report_store="s3"), "tfops_report_store: 's3' is not one of local, cluster, both"),
    ("upgrade", dict(tfops_report_keep=0), "tfops_report_keep: 0 is out of range (1 or more)"),
    ("upgrade", dict(tfops_lock_ttl=0), "tfops_lock_ttl: 0 is out of range (1 or more seconds)"),
    ("upgrade", dict(tfops_lock_ttl="0"), "tfops_lock_ttl: 0 is out of range"),
    ("upgrade", dict(tfops_each_batch="perhaps"), "tfops_each_batch: 'perhaps' is not a boolean (true or false)"),
    ("upgrade", dict(tfops_keep_pools="sometimes"), "tfops_keep_pools: 'sometimes' is not a boolean"),
    ("upgrade", dict(tfops_rollback_on_failure=2), "tfops_rollback_on_failure: 2 is not a boolean"),
    ("upgrade", dict(tfops_stall_timeout=-1), "tfops_stall_timeout: -1 is out of range"),
    ("upgrade", dict(tfops_rollback_timeout="1.5"), "tfops_rollback_timeout: '1.5' is not a whole number"),
    ("upgrade", dict(tfops_chart_repo="not a url"), "tfops_chart_repo: 'not a url' is not an http:// or https:// URL"),
    ("upgrade", dict(tfops_helm_extra_args="--kube-context=prod"), "tfops_helm_extra_args: '--kube-context=prod' is a flag"),
    ("upgrade", dict(tfops_helm_extra_args=["--debug"]), "tfops_helm_extra_args: '--debug' is not accepted"),
    ("upgrade", dict(tfops_helm_binary="/nonexistent/helm"), "tfops_helm_binary: /nonexistent/helm is not an executable file"),
    ("upgrade", dict(tfops_kubeconfig="/nonexistent/kubeconfig"), "tfops_kubeconfig: /nonexistent/kubeconfig is not a file"),
    ("upgrade", dict(tfops_namespace="Tensor_Fusion"), "tfops_namespace: 'Tensor_Fusion' is not a namespace name"),
    ("upgrade", dict(tfops_release="x" * 54), "is not a Helm release name"),
    ("upgrade", dict(tfops_lock_name="Lock!"), "tfops_lock_name: 'Lock!' is not an object name"),
    ("upgrade", dict(tfops_snapshot_signing_key="short"), "tfops_snapshot_signing_key: a snapshot signing key needs at least 16"),
    ("upgrade", dict(tfops_artifacts_dir="/etc/hostname/reports"), "tfops_artifacts_dir: /etc/hostname/reports cannot be a folder"),
    ("upgrade", dict(tfops_plan_out="/"), "tfops_plan_out: / is outside the folders a runbook may write to"),
    ("upgrade", dict(tfops_plan="/nonexistent/plan.json"), "tfops_plan: /nonexistent/plan.json is not a file"),
    ("upgrade", dict(tfops_plan_max_age=0), "tfops_plan_max_age: 0 is out of range"),
    ("upgrade", dict(tfops_verify_image="Busybox"), "tfops_verify_image: 'Busybox' is not a valid image"),
    ("upgrade", dict(tfops_verify_acceptance_pod="maybe"), "tfops_verify_acceptance_pod: 'maybe' is not a boolean"),
    ("upgrade", dict(tfops_pools=[{"nam": "shared"}]), "tfops_pools[0]: unknown key nam (a pool is a name or"),
    ("upgrade", dict(tfops_pools=[{"cluster": "x"}]), "tfops_pools[0]: each pool needs a name (or pool)"),
    ("upgrade", dict(tfops_pools=[{"name": "x", "components": {"hypervisr": {}}}]),
     "tfops_pools[0].components: unknown key hypervisr"),
    ("upgrade", dict(tfops_pools=[{"name": "x", "rolling_update": {"batch_percentage": 0}}]),
     "tfops_pools[0].rolling_update.batch_percentage must be 1-100"),
    ("upgrade", dict(tfops_pools=[{"name": "x", "components": {"hypervisor": {"pod_template": {"spex": {}}}}}]),
     "tfops_pools[0].components.hypervisor.pod_template: unknown key spex"),
    ("upgrade", dict(tfops_pools=[{"name": "x", "components": {"worker": {"image": "Bad Image"}}}]),
     "tfops_pools[0].components.worker.image: 'Bad Image' is not a valid image"),
    ("upgrade", dict(tfops_pools=[3]), "tfops_pools[0]: a number, not a mapping"),
    ("upgrade", dict(tfops_window_start="2026-12-01T02:00:00Z"),
     "parameters are required together: tfops_window_start, tfops_window_end"),
    ("upgrade", dict(tfops_window_cron="0 2 * * *"), "missing parameter(s) required by 'tfops_window_cron': tfops_window_duration"),
    ("upgrade", dict(tfops_window_cron="0 2 * *", tfops_window_duration="4h"), "tfops_window_cron: cron '0 2 * *' has 4 fields"),
    ("upgrade", dict(tfops_window_cron="0 2 * * *", tfops_window_duration="4h", tfops_window_pool="p"),
     "parameters are mutually exclusive: tfops_window_cron|tfops_window_pool"),
    ("upgrade", dict(tfops_window_start="soon", tfops_window_end="later"), "tfops_window_start: 'soon' is not an ISO 8601 time"),
    ("upgrade", dict(tfops_window_start="2026-12-01T04:00:00Z", tfops_window_end="2026-12-01T02:00:00Z"),
     "tfops_window_end 2026-12-01T02:00:00Z is not after tfops_window_start"),
    ("upgrade", dict(tfops_window_timezone="Mars/Olympus"), "tfops_window_timezone: unknown time zone 'Mars/Olympus'"),
    ("upgrade", dict(tfops_window_duration="a while"), "tfops_window_duration: 'a while' is not a Go duration"),
    ("upgrade", dict(tfops_window_safety_margin="-5m"), "tfops_window_safety_margin: '-5m' is negative"),
    ("rollback", dict(tfops_snapshot="/nonexistent/bundle"), "tfops_snapshot: /nonexistent/bundle is neither a snapshot reference"),
    ("rollback", dict(tfops_snapshot="secret://Bad/x"), "tfops_snapshot: 'secret://Bad/x' is not a cluster snapshot reference"),
    ("rollback", dict(tfops_runs="x"), "tfops_runs: a string, not a mapping"),
    ("rollback", dict(tfops_allow_unsigned="perhaps"), "tfops_allow_unsigned: 'perhaps' is not a boolean"),
    ("rollback", dict(tfops_restore_component_config="nope"), "tfops_restore_component_config: 'nope' is not a boolean"),
    ("rotate_secret", dict(SECRET, tfops_secret_strategy="sideways"), "tfops_secret_strategy: 'sideways' is not one of in_place, versioned"),
    ("rotate_secret", dict(tfops_secret_string_data={"a": "b"}), "tfops_secret_name is required"),
    ("rotate_secret", dict(tfops_secret_name="regcred"), "tfops_secret_string_data or tfops_secret_data must hold the new content"),
    ("rotate_secret", dict(tfops_secret_name="Reg_Cred", tfops_secret_string_data={"a": "b"}), "tfops_secret_name: 'Reg_Cred' is not a valid Secret name"),
    ("rotate_secret", dict(tfops_secret_name="regcred", tfops_secret_data="dG9rZW4="),
     "tfops_secret_data: a string, not a mapping of Secret keys to base64 values"),
    ("rotate_secret", dict(tfops_secret_name="regcred", tfops_secret_data={"dG9rZW4": ""}), "tfops_secret_data.dG9rZW4 is empty"),
    ("rotate_secret", dict(tfops_secret_name="regcred", tfops_secret_data={"token": "%%%"}), "tfops_secret_data.token is not base64"),
    ("rotate_secret", dict(tfops_secret_name="regcred", tfops_secret_string_data={"token": {"nested": "x"}}),
     "tfops_secret_string_data.token: a mapping, not text"),
    ("rotate_secret", dict(SECRET, tfops_secret_string_data={"bad key": "x"}), "invalid Secret key name(s): bad key"),
    ("rotate_secret", dict(SECRET, tfops_secret_consumers=[{"kind": "Job", "name": "x"}]),
     "tfops_secret_consumers[0]: kind must be one of"),
    ("rotate_secret", dict(SECRET, tfops_secret_consumers="Deployment/x"), "tfops_secret_consumers: a string, not a list of consumers"),
    ("rotate_secret", dict(SECRET, tfops_secret_keep=-1), "tfops_secret_keep: -1 is out of range (0 or more)"),
    ("rotate_secret", dict(SECRET, tfops_secret_wait_timeout="forever"), "tfops_secret_wait_timeout: 'forever' is not a whole number"),
    ("rotate_secret", dict(SECRET, tfops_secret_delete_old="sure"), "tfops_secret_delete_old: 'sure' is not a boolean"),
    ("rotate_secret", dict(SECRET, tfops_secret_namespace="Bad NS"), "tfops_secret_namespace: 'Bad NS' is not a namespace name"),
    ("precheck", dict(tfops_precheck_downgrade_codes={"a": 1}), "tfops_precheck_downgrade_codes: a mapping, not a list"),
    ("precheck", dict(tfops_rbac_preflight="perhaps"), "tfops_rbac_preflight: 'perhaps' is not a boolean"),
])
def test_a_bad_input_is_refused_naming_its_variable(playbook, given, expected):
    found = problems(playbook, **given)
    assert any(expected in p for p in found), found


def test_every_problem_is_reported_at_once():
    found = problems("upgrade", tfops_batch_percentage=0, tfops_on_deadline="explode", tfops_region="mars")
    assert [p.split(":")[0] for p in found] == ["tfops_region", "tfops_batch_percentage", "tfops_on_deadline"]
    text = inputs.message(found)
    assert text.startswith("3 inputs refused before anything was written (no lock, no change): ")


@pytest.mark.parametrize("playbook, given", [
    ("upgrade", dict(tfops_batch_percentage="20", tfops_batch_interval="30s", tfops_chart_version="1.8.7",
                     tfops_hypervisor_image="tensorfusion/tensor-fusion-hypervisor:2.17.0",
                     tfops_each_batch="false", tfops_keep_pools="yes", tfops_lock_ttl="600",
                     tfops_pools="shared, other", tfops_gates={"bake_seconds": 30},
                     tfops_helm_extra_args="--history-max=20", tfops_values={"a": {"b": 1}},
                     tfops_window_cron=["0 2 * * 6,0"], tfops_window_duration="4h",
                     tfops_window_timezone="Europe/Berlin", tfops_business_change_gate="pause",
                     tfops_business_change_workloads="3", tfops_business_change_percent=25)),
    ("upgrade", dict(tfops_chart_version=">=1.8.0 <2", tfops_chart_repo="", tfops_region="international")),
    ("upgrade", dict(tfops_chart_version="~1.8", tfops_window_start="2026-12-01T02:00:00", tfops_window_end="2026-12-01T04:00:00")),
    # Blank is unset (an AWX survey's empty answer).
    ("upgrade", dict(tfops_batch_percentage="", tfops_on_deadline="", tfops_gates="", tfops_values="",
                     tfops_business_change_gate="", tfops_business_change_percent="")),
    ("upgrade", dict(tfops_pools=[{"name": "shared", "cluster": "tensor-fusion", "components": {"hypervisor": {
        "image": "a/b:1", "pod_template": {"template": {"spec": {"containers": [{"name": "c", "env": []}]}}}}},
        "rolling_update": {"batch_percentage": 50, "auto_update_hypervisor": True}}])),
    ("rollback", dict(tfops_snapshot="secret://tensor-fusion-sys/tfops-snapshot.x", tfops_allow_unsigned="no")),
    ("rotate_secret", dict(SECRET, tfops_secret_strategy="versioned", tfops_secret_consumers=[
        {"kind": "Deployment", "name": "controller"},
        {"kind": "TensorFusionCluster", "pool": "shared", "component": "hypervisor"}])),
    ("precheck", dict(tfops_precheck_downgrade_codes="WORKLOAD_NO_PDB")),
    ("upgrade", dict(tfops_business_change_gate=False)),  # off unquoted in YAML
])
def test_good_inputs_pass(playbook, given):
    assert problems(playbook, **given) == []


def test_a_variable_of_another_runbook_is_not_read():
    assert problems("precheck", tfops_batch_percentage="abc", tfops_secret_strategy="sideways") == []


def test_a_missing_helm_names_the_runbook_variable():
    found = inputs.check("upgrade", {}, helm_on_path="")[1]
    assert found == ["tfops_helm_binary: no helm on the controller's PATH; install helm 3 or 4, or set "
                     "tfops_helm_binary to its path"]
    assert inputs.check("precheck", {}, helm_on_path="")[1] == []


def test_files_that_exist_pass(tmp_path):
    values_file = tmp_path / "values.yaml"
    values_file.write_text("a: 1\n")
    helm = tmp_path / "helm"
    helm.write_text("#!/bin/sh\n")
    helm.chmod(0o755)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://k}}]\n")
    assert problems("upgrade", tfops_values_files=[str(values_file)], tfops_values_cn=str(values_file),
                    tfops_helm_binary=str(helm), tfops_kubeconfig=str(kubeconfig),
                    tfops_artifacts_dir=str(tmp_path / "new" / "reports"), tfops_plan_out=str(tmp_path / "plan.json")) == []
    assert problems("rollback", tfops_snapshot=str(bundle)) == []
    helm.chmod(0o644)
    assert problems("upgrade", tfops_helm_binary=str(helm)) == [
        "tfops_helm_binary: %s is not an executable file on the controller" % helm]


def test_secret_values_never_reach_a_message():
    found = problems("rotate_secret", tfops_secret_name="regcred",
                     tfops_secret_string_data={"token": {"k": "s3cr3t-value"}}, tfops_snapshot_signing_key="s3cr3t")
    assert found and not any("s3cr3t" in p for p in found)


def test_the_secret_variables_are_marked():
    marked = sorted(v.name for v in inputs.SPEC if v.is_secret({"a": "b"}))
    assert marked == ["tfops_kubeconfig", "tfops_secret_data", "tfops_secret_string_data",
                      "tfops_snapshot_signing_key", "tfops_values"]
    # A kubeconfig is a secret given inline, not as a path (a refusal shows the path).
    assert not inputs.BY_NAME["tfops_kubeconfig"].is_secret("/home/me/.kube/config")


def test_every_variable_in_the_readme_is_specified():
    """playbooks/README.md documents the variables; each one a runbook reads (not the play's own
    hosts and fleet settings) is in the specification, and nothing is specified undocumented."""
    import re
    from pathlib import Path
    readme = (Path(__file__).resolve().parents[6] / "playbooks" / "README.md").read_text()
    documented = set(re.findall(r"^\| `(tfops_[a-z0-9_]+)`", readme, re.M))
    documented |= set(re.findall(r"^\| `(tfops_[a-z0-9_]+)`, `(tfops_[a-z0-9_]+)`", readme, re.M) and
                      [n for pair in re.findall(r"^\| `(tfops_[a-z0-9_]+)`, `(tfops_[a-z0-9_]+)`", readme, re.M) for n in pair])
    documented |= set(n for pair in re.findall(r"^\| `(tfops_[a-z0-9_]+)` / `(tfops_[a-z0-9_]+)`", readme, re.M) for n in pair)
    play_level = {"tfops_hosts", "tfops_fleet_hosts"}
    assert documented - play_level == set(inputs.BY_NAME)


def test_an_unknown_runbook_is_refused():
    with pytest.raises(InvalidInput, match="is not a runbook"):
        inputs.check("deploy", {})


@pytest.mark.parametrize("value, expected", [
    (True, True), ("yes", True), ("True", True), (1, True), ("on", True),
    (False, False), ("no", False), ("0", False), ("off", False)])
def test_booleans_as_surveys_give_them(value, expected):
    assert values.boolean(value, "x") is expected


@pytest.mark.parametrize("value", ["perhaps", 2, None, [], "", 1.5])
def test_anything_else_is_not_a_boolean(value):
    with pytest.raises(InvalidInput, match="^x: .* is not a boolean"):
        values.boolean(value, "x")


def test_whole_numbers_as_surveys_give_them():
    assert values.whole_number("20", "x", 1, 100) == 20
    assert values.whole_number(20.0, "x") == 20
    with pytest.raises(InvalidInput, match=r"^x: '2e1' is not a whole number \(1-100\)$"):
        values.whole_number("2e1", "x", 1, 100)


def test_a_kubeconfig_is_one_and_given_as_data_runs_no_command_unless_allowed(tmp_path):
    """#46: an inline kubeconfig's exec user ran its command during the inputs' check."""
    inline = {"apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": "https://k"}}],
              "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
              "users": [{"name": "u", "user": {"exec": {"command": "sh", "args": ["-c", "touch /tmp/pwned"]}}}]}
    found = problems("precheck", tfops_kubeconfig=inline)
    assert len(found) == 1 and found[0].startswith("tfops_kubeconfig: user u would run a command on the controller")
    assert "/tmp/pwned" not in found[0]
    assert problems("precheck", tfops_kubeconfig=inline, tfops_kubeconfig_allow_exec=True) == []
    assert problems("precheck", tfops_kubeconfig={"users": "x", "clusters": []}) == [
        "tfops_kubeconfig: users is not a list of mappings: not a kubeconfig"]
    not_one = tmp_path / "notes.txt"
    not_one.write_text("just text\n")
    assert problems("precheck", tfops_kubeconfig=str(not_one)) == [
        "tfops_kubeconfig: %s is not a kubeconfig (a YAML mapping; its content is not shown)" % not_one]
    # a file's exec users run (the file is the controller's own: EKS, GKE)
    with_exec = tmp_path / "eks"
    import yaml
    with_exec.write_text(yaml.safe_dump(inline))
    assert problems("precheck", tfops_kubeconfig=str(with_exec)) == []


BAD_SHAPES = [object(), {"a": {"b": [["deep"]]}}, [[["deep"]]], -1, float("nan"), float("inf"), 10 ** 30, True]


@pytest.mark.parametrize("playbook", inputs.RUNBOOKS)
def test_every_variable_has_a_checker_that_refuses_what_is_not_its_kind(playbook):
    """#46 item 6: each variable of each runbook is checked - text past the bound is refused
    whatever the variable, and no value of another shape crashes the check (it is refused or, for
    the variables that take any shape such as Helm values, passed as data)."""
    for variable in inputs.variables(playbook):
        checked, problems = inputs.check(playbook, {variable.name: "x" * (inputs.MAX_TEXT + 1)}, helm_on_path="/bin/helm")
        assert any(p.startswith(variable.name) for p in problems), (variable.name, problems)
        for bad in BAD_SHAPES:
            checked, problems = inputs.check(playbook, {variable.name: bad}, helm_on_path="/bin/helm")
            assert variable.name in checked or any(variable.name in p for p in problems), (variable.name, bad)
