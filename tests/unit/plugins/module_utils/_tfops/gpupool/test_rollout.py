"""gpupool_rollout's decisions without a cluster: what changes, what must wait, estimates (the
batches and their schedule), the stale-status guard, and every bad input refused before a write."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import podtemplate
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    Superseded,
)


def template(hv="hv:1", auto_hv=True, **policy):
    pol = {"autoUpdateHypervisor": auto_hv, "batchPercentage": 100, "batchInterval": "1s"}
    pol.update(policy)
    return {"componentConfig": {"hypervisor": {"image": hv, "portNumber": 8000,
                                               "podTemplate": {"template": {"spec": {"containers": [
                                                   {"name": "tensor-fusion-hypervisor",
                                                    "env": [{"name": "A", "value": "1"}]}]}}}},
                                "worker": {"image": "w:1"}, "client": {"image": "c:1"}},
            "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": pol}}


def test_image_change_moves_only_the_hypervisor_hash():
    new = rollout.desired_spec_template(template(), {"hypervisor": {"image": "hv:2"}}, {})
    assert rollout.hash_changed_components(template(), new) == ["hypervisor"]


def test_policy_only_change_moves_no_hash():
    new = rollout.desired_spec_template(template(), {}, {"batch_percentage": 20, "batch_interval": "5s"})
    assert rollout.policy_of(new)["batchPercentage"] == 20
    assert rollout.hash_changed_components(template(), new) == []


def test_port_moves_hypervisor_and_worker_hashes():
    new = rollout.desired_spec_template(template(), {"hypervisor": {"port_number": 8001}}, {})
    assert rollout.hash_changed_components(template(), new) == ["hypervisor", "worker"]


def test_remote_mode_image_is_not_hashed():
    new = rollout.desired_spec_template(template(), {"client": {"remote_mode_image": "c:9"}}, {})
    assert rollout.hash_changed_components(template(), new) == []


def _with_cpu(tmpl, comp, cpu):
    spec = tmpl["componentConfig"][comp].setdefault("podTemplate", {"template": {"spec": {"containers": [
        {"name": "tensor-fusion-%s" % comp}]}}})["template"]["spec"]
    spec["containers"][0]["resources"] = {"requests": {"cpu": cpu}}
    return tmpl


@pytest.mark.parametrize("comp", ["hypervisor", "worker"])
def test_a_quantity_written_another_way_moves_no_hash_and_another_value_does(comp):
    """The operator hashes the template as Go reads it (#47: cpu 1000m -> "1" started no campaign
    upstream, and the task waited for one until stall_timeout)."""
    before = _with_cpu(template(), comp, "1000m")
    assert rollout.hash_changed_components(before, _with_cpu(template(), comp, "1")) == []
    assert rollout.hash_changed_components(before, _with_cpu(template(), comp, 1)) == []
    moved = rollout.hash_changed_components(before, _with_cpu(template(), comp, "1500m"))
    assert moved == [comp]


def test_isolation_rules_move_the_hypervisor_hash_only_outside_the_dynamic_policy():
    new = template()
    new["nodeManagerConfig"]["defaultIsolationMode"] = "hard"
    assert rollout.hash_changed_components(template(), new, "static") == ["hypervisor"]
    # The chart's default policy is dynamic: the operator starts no campaign for it.
    assert rollout.hash_changed_components(template(), new) == []


def test_template_metadata_moves_no_hash():
    new = template()
    pod_template = new["componentConfig"]["hypervisor"]["podTemplate"]["template"]
    pod_template["metadata"] = {"annotations": {"ops.tensor-fusion.ai/restarted": "1"}}
    new["componentConfig"]["worker"]["podTemplate"] = {"template": {"metadata": {
        "labels": {"team": "a"}}}}
    assert rollout.hash_changed_components(template(), new) == []


def test_vector_image_is_hashed_only_with_enable_vector():
    new = rollout.desired_spec_template(template(), {"hypervisor": {"vector_image": "v:2"}}, {})
    assert rollout.hash_changed_components(template(), new) == []
    on = rollout.desired_spec_template(template(), {"hypervisor": {"enable_vector": True}}, {})
    assert rollout.hash_changed_components(template(), on) == ["hypervisor"]
    on_new = rollout.desired_spec_template(on, {"hypervisor": {"vector_image": "v:3"}}, {})
    assert rollout.hash_changed_components(on, on_new) == ["hypervisor"]


def test_containers_the_operator_drops_move_no_hash():
    """docs/operator-behaviour.md 3.1: with enableVector on, the chart's one-container template is
    replaced by bare containers, so an env change there starts no campaign (the collection would
    otherwise wait for a campaign that never comes); with the count enableVector calls for, the
    same change does start one."""
    on = rollout.desired_spec_template(template(), {"hypervisor": {"enable_vector": True}}, {})
    env_changed = rollout.desired_spec_template(on, {"hypervisor": {"pod_template": {"template": {"spec": {
        "containers": [{"name": "tensor-fusion-hypervisor", "env": [{"name": "A", "value": "2"}]}]}}}}}, {})
    assert rollout.hash_changed_components(on, env_changed) == []
    env_changed_off = rollout.desired_spec_template(template(), {"hypervisor": {"pod_template": {"template": {
        "spec": {"containers": [{"name": "tensor-fusion-hypervisor", "env": [{"name": "A", "value": "2"}]}]}}}}}, {})
    assert rollout.hash_changed_components(template(), env_changed_off) == ["hypervisor"]
    # Volumes and pull secrets stay in the spec whatever the containers are: they count.
    pulled = rollout.desired_spec_template(on, {"hypervisor": {"pod_template": {"template": {"spec": {
        "imagePullSecrets": [{"name": "regcred-v2"}]}}}}}, {})
    assert rollout.hash_changed_components(on, pulled) == ["hypervisor"]


def test_worker_pod_spec_moves_only_the_worker_hash():
    new = rollout.desired_spec_template(template(), {"worker": {"pod_template": {"template": {
        "spec": {"imagePullSecrets": [{"name": "registry"}]}}}}}, {})
    assert rollout.hash_changed_components(template(), new) == ["worker"]


def test_pod_template_merges_by_name():
    new = rollout.desired_spec_template(template(), {"hypervisor": {"pod_template": {"template": {"spec": {
        "containers": [{"name": "tensor-fusion-hypervisor", "env": [{"name": "B", "value": "2"}]}],
        "imagePullSecrets": [{"name": "regcred"}]}}}}}, {})
    spec = new["componentConfig"]["hypervisor"]["podTemplate"]["template"]["spec"]
    assert spec["containers"][0]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]


def test_frozen_component_is_refused_with_the_reason():
    tpl = template(auto_hv=False)
    new = rollout.desired_spec_template(tpl, {"hypervisor": {"image": "hv:2"}}, {})
    with pytest.raises(InvalidInput, match="autoUpdateHypervisor is false.*never roll"):
        rollout.refuse_frozen(rollout.hash_changed_components(tpl, new), new)
    new = rollout.desired_spec_template(tpl, {"hypervisor": {"image": "hv:2"}}, {"auto_update_hypervisor": True})
    rollout.refuse_frozen(["hypervisor"], new)


def test_absent_policy_means_auto_update_false():
    assert rollout.auto_update({"nodeManagerConfig": {}}, "hypervisor") is False


@pytest.mark.parametrize("pct,expected", [(100, 1), (20, 5), (30, 4), (1, 100), (33, 4)])
def test_batches(pct, expected):
    assert rollout.batches(pct) == expected


@pytest.mark.parametrize("components,policy,fragment", [
    ({"hypervisor": {"image": "Bad Image!"}}, {}, "not a valid image reference"),
    ({"worker": {"image": "repo/w:"}}, {}, "not a valid image reference"),
    ({"hypervisor": {"port_number": 70000}}, {}, "not a port"),
    ({}, {"batch_percentage": 0}, "every node at once"),
    ({}, {"batch_percentage": 101}, "must be 1-100"),
    ({}, {"batch_interval": "5 minutes"}, "not a Go duration"),
    # A YAML block scalar or a survey answer ends with a newline; "$" alone would let it through.
    ({"hypervisor": {"image": "tensorfusion/tensor-fusion-hypervisor:2.16.0\n"}}, {}, "no spaces or newlines"),
    ({"hypervisor": {"image": " busybox"}}, {}, "not a valid image reference"),
    ({"hypervisor": {"image": "Tensorfusion/hv:1"}}, {}, "lowercase repository"),
    ({}, {"batch_percentage": True}, "batch_percentage: True is not a whole number 1-100"),
    ({"hypervisor": {"port_number": False}}, {}, "port_number: False is not a whole number"),
    ({}, {"batch_interval": "-5s"}, "batch_interval: '-5s' is negative"),
    ({"hypervisor": {"pod_template": {"template": {"spec": {"containers": [{"image": "x"}]}}}}}, {},
     r"components.hypervisor.pod_template.template.spec.containers\[0\]: a container needs a name"),
    # What got through before (#36): a misspelt level stored as is, a mapping where a list belongs.
    ({"hypervisor": {"pod_template": {"bogusKey": 1}}}, {},
     r"components.hypervisor.pod_template: unknown key bogusKey; a Pod template has apiVersion"),
    ({"worker": {"pod_template": {"template": {"spex": {}}}}}, {},
     r"components.worker.pod_template.template: unknown key spex"),
    ({"hypervisor": {"pod_template": {"template": {"spec": {"containers": {"name": "x"}}}}}}, {},
     r"template.spec.containers: a mapping, not a list of containers \(write each item as - name: ...\)"),
    ({"hypervisor": {"pod_template": {"template": {"spec": {"containers": [{"name": "a", "env": {"A": "1"}}]}}}}},
     {}, r"containers\[0\].env: a mapping, not a list of env"),
    ({"hypervisor": {"pod_template": "template: {}"}}, {}, r"pod_template: a string, not a Pod template"),
])
def test_bad_input(components, policy, fragment):
    with pytest.raises(InvalidInput, match=fragment):
        rollout.validate_task(components, policy)


# The second pass, once connected: the keys of the Pod spec and its containers against the names
# the API server publishes (core/podtemplate.py; Kubernetes 1.35's stand in here).
MISSPELT = [
    ({"hypervisor": {"pod_template": {"template": {"spec": {"containres": []}}}}},
     r"template.spec: unknown key containres; a Pod spec has"),
    ({"hypervisor": {"pod_template": {"template": {"spec": {"containers": [{"name": "a", "imagee": "x"}]}}}}},
     r"containers\[0\]: unknown key imagee; a container has"),
    ({"worker": {"pod_template": {"template": {"metadata": {"label": {"a": "b"}}}}}},
     r"worker.pod_template.template.metadata: unknown key label; object metadata has"),
]


@pytest.mark.parametrize("components, fragment", MISSPELT)
def test_misspelt_pod_fields_are_refused_against_the_servers_names(components, fragment):
    rollout.validate_task(components, {})  # the shape is right: the first pass takes it
    with pytest.raises(InvalidInput, match=fragment):
        rollout.validate_task(components, {}, pod_fields=podtemplate.BUILTIN_FIELDS)


def test_a_field_the_server_knows_is_taken_though_kubernetes_1_35_did_not_know_it():
    """A newer Kubernetes adds Pod spec fields: the server's own names decide, not ours."""
    components = {"hypervisor": {"pod_template": {"template": {"spec": {"futureField": True}}}}}
    newer = dict(podtemplate.BUILTIN_FIELDS, PodSpec=podtemplate.BUILTIN_FIELDS["PodSpec"] + ("futureField",))
    rollout.validate_task(components, {}, pod_fields=newer)
    with pytest.raises(InvalidInput, match="unknown key futureField"):
        rollout.validate_task(components, {}, pod_fields=podtemplate.BUILTIN_FIELDS)


def test_a_runbook_names_its_own_variable():
    with pytest.raises(InvalidInput, match=r"^tfops_pools\[1\].rolling_update.batch_percentage must be 1-100"):
        rollout.validate_task({}, {"batch_percentage": 0}, "tfops_pools[1].")
    with pytest.raises(InvalidInput, match=r"^tfops_pools\[0\].components.hypervisor.image: 'A:1' is not"):
        rollout.validate_task({"hypervisor": {"image": "A:1"}}, {}, "tfops_pools[0].")


def test_a_full_pod_template_passes():
    rollout.validate_task({"hypervisor": {"pod_template": {
        "apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "x"},
        "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
            "containers": [{"name": "tensor-fusion-hypervisor", "image": "a/b:1", "env": [{"name": "A", "value": "1"}],
                            "resources": {"requests": {"cpu": "1"}}, "volumeMounts": []}],
            "initContainers": [], "volumes": [{"name": "v", "emptyDir": {}}], "nodeSelector": {"a": "b"},
            "tolerations": [{"operator": "Exists"}]}}}}}, {})


@pytest.mark.parametrize("image", [
    "tensorfusion/tensor-fusion-hypervisor:2.15.0", "registry.example.com:5000/a/b:v1",
    "busybox", "ghcr.io/x/y@sha256:" + "a" * 64])
def test_good_images(image):
    rollout.validate_image("hypervisor", "image", image)


@pytest.mark.parametrize("text,seconds", [("1s", 1), ("1m30s", 90), ("500ms", 0.5), ("2h", 7200), ("0", 0),
                                          (".5s", 0.5), ("+1s", 1), ("1\u00b5s", 1e-6), ("1.5h", 5400), ("-0", 0)])
def test_go_durations(text, seconds):
    assert rollout.go_duration_seconds(text) == seconds


def tfc(*names):
    return {"metadata": {"name": "tensor-fusion"},
            "spec": {"gpuPools": [{"name": n, "specTemplate": {}} for n in names]}}


def test_pool_found_by_entry_or_gpupool_name():
    assert rollout.find_pool_index(tfc("a", "shared"), "shared") == 1
    assert rollout.find_pool_index(tfc("a", "shared"), "tensor-fusion-shared") == 1
    with pytest.raises(InvalidInput, match="has no pool 'x'; its pools are: a .GPUPool tensor-fusion-a."):
        rollout.find_pool_index(tfc("a"), "x")


def pool(status_hash="h0", progress=None, synced=None, in_progress=""):
    status = {"hypervisor": status_hash}
    if progress:
        status["hypervisorUpdateProgress"] = progress
    if synced:
        status["hypervisorConfigSynced"] = True
    return {"metadata": {"annotations": {rollout.IN_PROGRESS % "hypervisor": in_progress}},
            "status": {"componentStatus": status}}


def test_stale_synced_status_does_not_end_the_wait():
    before = pool("h0", 100, True)
    tracker = rollout.CampaignTracker("hypervisor", before)
    assert not tracker.observe(before), "the synced status from before the change is stale"
    assert not tracker.observe(pool("h0", 100, True, in_progress="h1")), "campaign started, status old"
    assert not tracker.observe(pool("h1", 40, None, in_progress="h1"))
    assert tracker.observe(pool("h1", 100, True, in_progress=""))


def test_a_campaign_that_ends_as_ours_begins_does_not_count():
    tracker = rollout.CampaignTracker("hypervisor", pool("h1", 60, None, in_progress="h1"))
    assert not tracker.observe(pool("h1", 100, True, in_progress="")), "that was the previous campaign"
    assert not tracker.observe(pool("h1", 100, True, in_progress="h2"))
    assert tracker.observe(pool("h2", 100, True, in_progress=""))


def test_a_later_change_supersedes_the_campaign_we_wait_for():
    tracker = rollout.CampaignTracker("hypervisor", pool("h0", 100, True))
    tracker.observe(pool("h1", 20, None, in_progress="h1"))
    with pytest.raises(Superseded, match="superseded by another change"):
        tracker.observe(pool("h1", 20, None, in_progress="h2"))


def test_a_task_started_mid_rollout_waits_for_its_own_campaign():
    tracker = rollout.CampaignTracker("hypervisor", pool("h1", 20, None, in_progress="h1"))
    assert not tracker.observe(pool("h1", 20, None, in_progress="h2"))
    assert tracker.campaign == "h2"
    assert not tracker.observe(pool("h1", 100, True, in_progress=""))
    assert tracker.observe(pool("h2", 100, True, in_progress=""))


def test_resume_waits_for_the_campaign_under_way():
    tracker = rollout.CampaignTracker("hypervisor", pool("h1", 40, None, in_progress="h1"), changed=False)
    assert tracker.campaign == "h1"
    assert not tracker.observe(pool("h1", 60, None, in_progress="h1"))
    assert tracker.observe(pool("h1", 100, True, in_progress=""))


def test_omitted_status_fields_mean_zero_and_false():
    assert rollout.component_status({"metadata": {}, "status": {}}, "worker") == ("", 0, False, "")


def test_diff_masks_secret_looking_env():
    masked = rollout.redact_for_diff({"env": [{"name": "TF_LICENSE", "value": "abc"},
                                              {"name": "LOG_LEVEL", "value": "info"}]})
    assert masked["env"] == [{"name": "TF_LICENSE", "value": "********"},
                             {"name": "LOG_LEVEL", "value": "info"}]


@pytest.mark.parametrize("total,pct,sizes", [
    (4, 100, [4]), (4, 50, [2, 2]), (4, 34, [2, 2, 0]), (10, 20, [2, 2, 2, 2, 2]),
    (2, 30, [1, 1, 0, 0]),  # the operator's docs: 2 nodes at 30 % give four completions
    (5, 30, [2, 2, 1, 0]), (0, 50, [0, 0])])
def test_batches_follow_the_operator_rule(total, pct, sizes):
    assert rollout.batch_sizes(total, pct) == sizes
    assert sum(sizes) == total


def test_the_schedule_has_the_operator_gap_between_batches():
    # The operator does not wait for a batch's nodes to be Ready: the next batch starts one gap later.
    batches, seconds = rollout.pool_schedule(4, 50, 1.0, 9.5)
    assert [(b["start"], b["end"], b["progress"]) for b in batches] == [(0.0, 9.5, 50), (3.0, 12.5, 100)]
    assert seconds == 12.5 + rollout.OPERATOR_REACTION
    _batches, longer = rollout.pool_schedule(4, 50, 30.0, 9.5)
    assert longer == 30.0 + 9.5 + rollout.OPERATOR_REACTION  # batchInterval above the 3 s floor
    _batches, baked = rollout.pool_schedule(4, 50, 1.0, 9.5, bake_seconds=20.0)
    assert baked == 20.0 + 9.5 + rollout.OPERATOR_REACTION
    empty, seconds = rollout.pool_schedule(4, 20, 1.0, 0.5)  # 4 nodes at 20 %: the fifth batch has none
    assert [b["nodes"] for b in empty] == [1, 1, 1, 1, 0] and seconds == 4 * 3.0 + rollout.OPERATOR_REACTION
    assert rollout.pool_schedule(0, 20, 1.0, 5.0) == ([], 0.0)


def test_node_seconds_takes_the_slowest_pod_and_has_a_default():
    assert rollout.node_seconds([2.0, 7.5, None, 3.0]) == 7.5
    assert rollout.node_seconds([None]) == rollout.DEFAULT_NODE_SECONDS
