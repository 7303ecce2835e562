"""The pure parts of the kubelet stand-in: the knobs read from the ConfigMap
(lab/kwok_stages.parse_knobs) and the kwok Stages rendered for them (what kwok then plays is
tested on a real lab in tests/integration/test_lab.py)."""
import json

import pytest

from lab import kwok_stages as ks


def docs(knobs):
    """The Stages of kwok's configuration file, read back."""
    text = ks.render(knobs)
    parts = [p for p in text.split("---\n") if p.strip()]
    return {d["metadata"]["name"]: d for d in map(json.loads, parts)}


def selector(stage):
    [expression] = stage["spec"]["selector"]["matchExpressions"]
    return expression["jq"]


def template(stage):
    return stage["spec"]["steps"][0]["patch"]["template"]


# ---- knobs -------------------------------------------------------------------------------------

def test_no_configmap_means_the_defaults():
    assert ks.parse_knobs(None, 0.5) == (ks.Knobs(0.5, "", frozenset()), [])
    assert ks.parse_knobs({}, 2.0) == (ks.Knobs(2.0, "", frozenset()), [])


def test_every_knob_is_read():
    knobs, problems = ks.parse_knobs({"readyDelaySeconds": "4", "neverReadyImages": ":broken$",
                                      "deadNodes": " tfops-gpu-2, ,tfops-cpu-0,"}, 0.5)
    assert problems == []
    assert knobs == ks.Knobs(4.0, ":broken$", frozenset({"tfops-gpu-2", "tfops-cpu-0"}))


@pytest.mark.parametrize("value", ["abc", "-1", "nan", "inf", "1e9"])
def test_an_unusable_delay_is_said_and_the_default_kept(value):
    knobs, problems = ks.parse_knobs({"readyDelaySeconds": value, "neverReadyImages": "x"}, 0.5)
    assert knobs.ready_delay == 0.5 and knobs.never_ready == "x"
    assert len(problems) == 1 and problems[0].startswith(f"readyDelaySeconds {value!r}")


@pytest.mark.parametrize("pattern, why", [
    ("broken[", "is not a regular expression"),
    ("(?=x)broken", "Go's RE2 does not have"),
    ("(?<!a)b", "Go's RE2 does not have"),
    (r"(a)\1", "Go's RE2 does not have"),
    ("a++", "Go's RE2 does not have"),
])
def test_a_pattern_kwok_cannot_take_is_said_and_fails_no_image(pattern, why):
    knobs, problems = ks.parse_knobs({"neverReadyImages": pattern, "readyDelaySeconds": "2"}, 0.5)
    assert knobs.never_ready == "" and knobs.ready_delay == 2.0
    assert len(problems) == 1 and why in problems[0] and "no image fails" in problems[0]


@pytest.mark.parametrize("pattern", ["9.9.9-broken", ":broken$", "registry.lab/x:1", "(?i)BROKEN",
                                     r"^a\d+(b|c)?$", "(?P<tag>v1)"])
def test_patterns_both_engines_read_are_taken(pattern):
    assert ks.regex_problem(pattern) is None


# ---- stages ------------------------------------------------------------------------------------

def test_without_a_pattern_no_image_fails_and_no_pull_stage_exists():
    stages = docs(ks.Knobs())
    assert set(stages) == {"tfops-pod-ip-taken", "tfops-pod-delete", "tfops-pod-running",
                           "tfops-pod-succeeded", "tfops-node-ready", "tfops-node-lease"}
    assert "(false | not)" in selector(stages["tfops-pod-running"])["key"]


def test_a_pattern_adds_the_pull_stages_and_keeps_matching_pods_from_starting():
    stages = docs(ks.Knobs(never_ready=":broken$"))
    assert {"tfops-pod-image-pull-failing", "tfops-pod-image-pull-failing-job",
            "tfops-pod-image-pull-retry"} < set(stages)
    literal = json.dumps(":broken$")
    for name in ("tfops-pod-image-pull-failing", "tfops-pod-image-pull-failing-job"):
        key = selector(stages[name])["key"]
        assert f"test({literal})" in key and "ImagePullBackOff" in key
        assert "regexMatch $failing .image" in template(stages[name])
    for name in ("tfops-pod-running", "tfops-pod-succeeded"):
        assert f"test({literal})] | any) catch false) | not)" in selector(stages[name])["key"]


def test_the_pattern_reaches_jq_and_the_template_as_string_literals():
    """Quotes, backslashes and non-ASCII stay one string literal in both languages (a pattern
    that broke out of its literal would break the expression, and every Pod with it)."""
    pattern = r'a"b\d+ü'
    stages = docs(ks.Knobs(never_ready=pattern))
    stage = stages["tfops-pod-image-pull-failing"]
    assert f"test({json.dumps(pattern)})" in selector(stage)["key"]
    [line] = [ln.strip() for ln in template(stage).splitlines() if "$failing :=" in ln]
    assert line == "{{ $failing := " + json.dumps(pattern, ensure_ascii=False) + " }}"


def test_jobs_and_other_pods_go_to_different_stages():
    stages = docs(ks.Knobs(never_ready="x"))
    job = '([.metadata.ownerReferences[]? | select(.kind == "Job")] | length > 0)'
    assert f"{job} | not" in selector(stages["tfops-pod-running"])["key"]
    assert f"and {job} and" in selector(stages["tfops-pod-succeeded"])["key"]
    assert f"{job} | not" in selector(stages["tfops-pod-image-pull-failing"])["key"]
    assert f"and {job} and" in selector(stages["tfops-pod-image-pull-failing-job"])["key"]
    assert "phase: Succeeded" in template(stages["tfops-pod-succeeded"])
    assert "terminated:" in template(stages["tfops-pod-image-pull-failing-job"])
    assert "running:" in template(stages["tfops-pod-image-pull-failing"])


def test_a_stuck_pod_shows_a_pull_attempt_every_two_seconds_while_the_image_matches():
    """Operators look at a stuck Pod again when it changes (a kubelet's pull retries): the
    retry Stage matches Pods already in ImagePullBackOff whose image still matches, and writes
    only the readiness conditions' lastProbeTime."""
    retry = docs(ks.Knobs(never_ready="x"))["tfops-pod-image-pull-retry"]
    key = selector(retry)["key"]
    assert 'test("x")' in key and '"ImagePullBackOff")] | length > 0)' in key
    assert "(.metadata.deletionTimestamp == null)" in key
    assert retry["spec"]["delay"] == {"durationMilliseconds": 2000}
    assert "lastProbeTime: {{ Now | Quote }}" in template(retry)
    assert "status: " not in template(retry).split("status:\n", 1)[1], "no condition changes"


def test_every_write_to_a_pod_carries_its_uid():
    """kwok writes by name; the UID makes the API server refuse a write meant for a Pod that
    was replaced by another of the same name."""
    stages = docs(ks.Knobs(never_ready="x"))
    for name, stage in stages.items():
        if stage["spec"]["resourceRef"]["kind"] != "Pod" or name == "tfops-pod-ip-taken":
            continue
        patch = stage["spec"]["steps"][0]["patch"]
        assert patch["template"].startswith("metadata:\n  uid: {{ .metadata.uid | Quote }}\n"), name
        assert "root" not in patch, name


def test_a_terminating_pod_is_confirmed_then_deleted_once():
    stage = docs(ks.Knobs())["tfops-pod-delete"]
    first, second = stage["spec"]["steps"]
    assert ks.DELETION_CONFIRMED in first["patch"]["template"] and "subresource" not in first["patch"]
    assert second == {"delete": True}
    assert "((.metadata.deletionGracePeriodSeconds // 1) != 0)" in selector(stage)["key"]


def test_pod_stages_wait_the_ready_delay_and_deletion_does_not():
    stages = docs(ks.Knobs(ready_delay=4.25, never_ready="x"))
    for name in ("tfops-pod-running", "tfops-pod-succeeded", "tfops-pod-image-pull-failing",
                 "tfops-pod-image-pull-failing-job"):
        assert stages[name]["spec"]["delay"] == {"durationMilliseconds": 4250}
    assert "delay" not in stages["tfops-pod-delete"]["spec"]
    assert "delay" not in stages["tfops-node-ready"]["spec"]


def test_only_the_ip_stage_is_weightless():
    """kwok plays a weightless Stage only when no other matches: the IP bookkeeping never wins
    over a start."""
    stages = docs(ks.Knobs(never_ready="x"))
    assert {n for n, s in stages.items() if s["spec"]["weight"] == 0} == {"tfops-pod-ip-taken"}
    assert template(stages["tfops-pod-ip-taken"]) == "podIP: {{ .status.podIP | Quote }}\n"


def test_the_lease_stage_renews_live_stand_in_leases_every_ten_seconds():
    stage = docs(ks.Knobs())["tfops-node-lease"]
    lease = stage["spec"]
    assert lease["resourceRef"] == {"apiGroup": "coordination.k8s.io/v1", "kind": "Lease"}
    assert lease["selector"]["matchLabels"] == {ks.STAND_IN_LABEL: "true"}
    key = selector(stage)["key"]
    assert f'.metadata.labels["{ks.DEAD_LABEL}"]' in key and '"kube-node-lease"' in key
    assert lease["delay"]["durationMilliseconds"] == 10000
    assert "fromdateiso8601 + 10" in lease["delay"]["durationFrom"]["jq"]["expression"]
    [step] = lease["steps"]
    assert step["patch"]["type"] == "merge" and step["patch"]["root"] == "spec"
    assert "2006-01-02T15:04:05.000000Z07:00" in step["patch"]["template"]


def test_the_same_knobs_render_the_same_file():
    """kwok is restarted only when the file changes: equal knobs must render equal text."""
    a = ks.parse_knobs({"deadNodes": "b,a", "neverReadyImages": "x"}, 0.5)[0]
    b = ks.parse_knobs({"deadNodes": "a,b", "neverReadyImages": "x"}, 0.5)[0]
    assert ks.render(a) == ks.render(b)
    assert ks.render(ks.Knobs(ready_delay=1)) != ks.render(ks.Knobs(ready_delay=2))


def test_dead_nodes_need_no_new_stages():
    """A dead node is a label (kwok stops managing it): no restart of kwok."""
    assert ks.render(ks.Knobs(dead_nodes=frozenset({"tfops-gpu-1"}))) == ks.render(ks.Knobs())
    assert ks.MANAGED_NODES == f"{ks.STAND_IN_LABEL}=true,{ks.DEAD_LABEL}!=true"
