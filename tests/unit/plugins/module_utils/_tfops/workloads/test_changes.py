"""Business workloads' Pod templates changed during a rollout (workloads/changes.py), as pure
functions: what of a template is shown and what only named, the book of a rollout across its
calls, and the gate that warns or pauses."""
import copy
import json

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads import changes

SECRET = "s3cr3t-env-value"


def workload(name="api", namespace="shop", cpu="1", image="shop/api:1", business=True, **annotations):
    labels = {"app": name}
    if business:
        labels["tensor-fusion.ai/enabled"] = "true"
    return {"metadata": {"name": name, "namespace": namespace, "resourceVersion": "1"},
            "spec": {"replicas": 2, "template": {
                "metadata": {"labels": labels, "annotations": dict({"tensor-fusion.ai/vram-request": "4Gi",
                                                                    "team.example.com/owner": "ops"}, **annotations)},
                "spec": {"nodeSelector": {"gpu": "yes"},
                         "containers": [{"name": "app", "image": image,
                                         "env": [{"name": "TOKEN", "value": SECRET}],
                                         "resources": {"requests": {"cpu": cpu, "memory": "1Gi"},
                                                       "limits": {"memory": "2Gi"}}}]}}}}


def edited(obj, edit):
    new = copy.deepcopy(obj)
    edit(new)
    return new


def containers(obj):
    return obj["spec"]["template"]["spec"]["containers"]


SPEC = changes.check_spec({})


def test_only_business_workloads_count_and_the_view_hides_what_may_be_secret():
    assert changes.is_business(workload()) and not changes.is_business(workload(business=False))
    view = changes.template_view(workload())
    assert view["spec.containers[app].image"] == "shop/api:1"
    assert view["spec.containers[app].resources.requests.cpu"] == "1"
    assert view["metadata.annotations[tensor-fusion.ai/vram-request]"] == "4Gi"
    assert isinstance(view["spec.containers[app].env"], changes.Hidden)
    assert isinstance(view["metadata.annotations[team.example.com/owner]"], changes.Hidden)
    assert isinstance(view["spec.nodeSelector"], changes.Hidden)
    assert "replicas" not in json.dumps(sorted(view)), "a replica count (an autoscaler's) is not the template"


def test_a_diff_says_requests_and_images_from_and_to_and_only_names_env_and_other_fields():
    before = workload()

    def edit(obj):
        containers(obj)[0]["resources"]["requests"]["cpu"] = "4"
        containers(obj)[0]["env"][0]["value"] = "an0ther-" + SECRET
        obj["spec"]["template"]["metadata"]["annotations"]["tensor-fusion.ai/vram-request"] = "16Gi"
        obj["spec"]["template"]["spec"]["nodeSelector"] = {"gpu": "a100"}
        obj["spec"]["replicas"] = 5
    fields = changes.view_diff(changes.template_view(before), changes.template_view(edited(before, edit)))
    assert fields == [
        {"field": "metadata.annotations[tensor-fusion.ai/vram-request]", "from": "4Gi", "to": "16Gi"},
        {"field": "spec.containers[app].env", "hidden": True},
        {"field": "spec.containers[app].resources.requests.cpu", "from": "1", "to": "4"},
        {"field": "spec.nodeSelector", "hidden": True}]
    assert SECRET not in json.dumps(fields)
    # A replica change alone is no template change.
    assert changes.view_diff(changes.template_view(before),
                             changes.template_view(edited(before, lambda o: o["spec"].update(replicas=9)))) == []


def test_the_book_of_a_rollout_records_changes_creations_deletions_and_a_workload_that_left():
    log = changes.ChangeLog(SPEC)
    log.listed("Deployment", [workload("api"), workload("web"), workload("plain", business=False)], first=True)
    assert log.total == 2 and log.changed == 0 and not log.reached()
    assert log.seen("Deployment", workload("api")) == [], "a status write: nothing"
    log.seen("Deployment", workload("api", cpu="2"))
    log.seen("Deployment", workload("api", cpu="3"))
    log.seen("Deployment", workload("new", cpu="8"))
    log.seen("Deployment", workload("plain", business=False, cpu="9"))
    log.gone("Deployment/shop/web")
    summary = log.summary()
    by_name = dict((e["name"], e) for e in summary["changes"])
    assert sorted(by_name) == ["api", "new", "web"]
    assert by_name["api"]["change"] == "changed" and by_name["api"]["writes"] == 2
    assert by_name["api"]["fields"] == [
        {"field": "spec.containers[app].resources.requests.cpu", "from": "1", "to": "3"}], "first from, last to"
    assert by_name["new"]["change"] == "created" and \
        {"field": "spec.containers[app].resources.requests.cpu", "from": None, "to": "8"} in by_name["new"]["fields"]
    assert not [f for f in by_name["new"]["fields"] if f.get("hidden")], "a new workload shows only what may be shown"
    assert by_name["web"]["change"] == "deleted"
    assert (summary["business_workloads"], summary["changed"], summary["share"]) == (3, 3, 100)
    assert SECRET not in json.dumps(summary)
    # A workload whose template no longer opts in has left TensorFusion: a change that says so.
    log.seen("Deployment", edited(workload("api", cpu="3"), lambda o: o["spec"]["template"]["metadata"]["labels"].pop(
        "tensor-fusion.ai/enabled")))
    api = [e for e in log.summary()["changes"] if e["name"] == "api"][0]
    assert {"field": "metadata.labels[tensor-fusion.ai/enabled]", "from": "true", "to": None} in api["fields"]


def test_a_change_and_its_revert_count_but_show_no_field():
    log = changes.ChangeLog(SPEC)
    log.listed("StatefulSet", [workload("db")], first=True)
    log.seen("StatefulSet", workload("db", cpu="2"))
    log.seen("StatefulSet", workload("db", cpu="1"))
    entry, = log.summary()["changes"]
    assert entry["fields"] == [] and entry["writes"] == 2
    assert changes.describe_entry(entry) == "StatefulSet shop/db: changed and changed back (2 template writes)"


def test_a_relist_after_a_broken_watch_finds_what_the_watch_missed():
    log = changes.ChangeLog(SPEC)
    log.listed("DaemonSet", [workload("agent"), workload("gone")], first=True)
    log.listed("DaemonSet", [workload("agent", image="shop/agent:2")])
    summary = log.summary()
    assert [(e["name"], e["change"]) for e in summary["changes"]] == [("agent", "changed"), ("gone", "deleted")]
    assert summary["changes"][0]["fields"] == [
        {"field": "spec.containers[app].image", "from": "shop/api:1", "to": "shop/agent:2"}]


def test_a_rollout_followed_batch_by_batch_goes_on_counting_from_its_previous_call():
    """The summary of a call is what the next call resumes from: its changes keep their first
    ``from``, the business workloads at the rollout's start are not counted again."""
    first = changes.ChangeLog(changes.check_spec({"workloads": 2}))
    first.started = "2026-12-01T02:00:00.000000Z"
    first.listed("Deployment", [workload("api"), workload("web")], first=True)
    first.seen("Deployment", workload("api", cpu="2"))
    first.resource_versions["Deployment"] = "100"
    assert not first.reached()
    handed_on = json.loads(json.dumps(first.summary()))  # as Ansible carries it between tasks
    second = changes.ChangeLog(changes.check_spec({"workloads": 2}), since=handed_on)
    assert second.resource_versions == {"Deployment": "100"} and second.started == first.started
    second.listed("Deployment", [workload("api", cpu="2"), workload("web")], first=True)
    assert second.total == 2, "the workloads at the rollout's start are counted once"
    second.seen("Deployment", workload("api", cpu="5"))
    assert not second.reached(), "one workload changed twice is one workload"
    second.seen("Deployment", workload("web", image="shop/web:2"))
    assert second.reached()
    api = [e for e in second.summary()["changes"] if e["name"] == "api"][0]
    assert api["fields"] == [{"field": "spec.containers[app].resources.requests.cpu", "from": "1", "to": "5"}]
    assert api["writes"] == 2


@pytest.mark.parametrize("spec,changed,total,reached", [
    ({}, 0, 10, False),
    ({}, 1, 10, True),  # neither set: the first change
    ({"workloads": 3}, 2, 10, False),
    ({"workloads": 3}, 3, 10, True),
    ({"percent": 25}, 2, 10, False),
    ({"percent": 25}, 3, 10, True),
    ({"percent": 25}, 1, 4, True),
    ({"percent": 25}, 0, 0, False),
    ({"workloads": 5, "percent": 20}, 2, 10, True),  # whichever first
    ({"workloads": 2, "percent": 50}, 2, 10, True),
])
def test_the_gate_acts_at_the_scale_a_team_sets(spec, changed, total, reached):
    assert changes.gate_reached(changes.check_spec(spec), changed, total) is reached


@pytest.mark.parametrize("spec,message", [
    ({"gate": "stop"}, "business_changes.gate: 'stop' is not one of off, warn, pause"),
    ({"workloads": 0}, "business_changes.workloads: 0 is not a whole number of 1 or more"),
    ({"percent": 101}, "business_changes.percent: 101 is not a whole number 1-100"),
    ({"percent": True}, "business_changes.percent: True is not a whole number 1-100"),
])
def test_bad_gate_settings_are_refused_naming_the_option(spec, message):
    with pytest.raises(InvalidInput) as err:
        changes.check_spec(spec)
    assert err.value.msg == message
    assert changes.check_spec({"gate": "pause", "since": {"x": 1}}) == {"gate": "pause", "workloads": None, "percent": None}
    # A runbook's variables are named as the user set them (runbook/inputs.py).
    with pytest.raises(InvalidInput) as err:
        changes.check_spec({"percent": 0}, names={"percent": "tfops_business_change_percent"})
    assert err.value.msg == "tfops_business_change_percent: 0 is not a whole number 1-100"


def test_gate_warn_warns_when_reached_and_again_only_when_more_changed():
    log = changes.ChangeLog(changes.check_spec({"gate": "warn", "workloads": 1}))
    log.listed("Deployment", [workload("api"), workload("web")], first=True)
    assert log.warning("during the rollout of GPUPool p") is None
    log.seen("Deployment", workload("api", cpu="2"))
    text = log.warning("during the rollout of GPUPool p")
    assert text == ("1 of 2 business workloads (50%) changed their Pod template during the rollout, at or above "
                    "the gate's 1 workload during the rollout of GPUPool p: Deployment shop/api: "
                    "spec.containers[app].resources.requests.cpu 1 -> 2")
    assert log.warning("x") is None, "said once"
    log.seen("Deployment", workload("api", cpu="3"))
    assert log.warning("x") is None, "the same workload again: nothing new"
    log.seen("Deployment", workload("web", cpu="3"))
    assert "2 of 2 business workloads (100%)" in log.warning("x")
    assert changes.ChangeLog(changes.check_spec({"gate": "pause"})).warning("x") is None


def test_describe_names_the_first_workloads_and_counts_the_rest():
    log = changes.ChangeLog(SPEC)
    log.listed("Deployment", [workload("w%d" % i) for i in range(7)], first=True)
    for i in range(7):
        log.seen("Deployment", workload("w%d" % i, cpu="2"))
    text = changes.describe(log.summary())
    assert text.count("Deployment shop/") == 5 and text.endswith("; and 2 more")
    assert changes.threshold_text(changes.check_spec({"percent": 10})) == "10% of them"
    assert changes.threshold_text(changes.check_spec({"workloads": 3, "percent": 10})) == "3 workloads or 10% of them"
