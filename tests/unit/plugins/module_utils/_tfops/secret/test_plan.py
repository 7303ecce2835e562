"""secret_rotate's pure decisions: input checks, versions, what goes, what a result may show."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import plan
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput


def params(**over):
    base = {"name": "regcred", "data": None, "string_data": {"token": "x"}, "strategy": "in_place",
            "delete_old": False, "wait": True, "keep": 0, "consumers": None, "unrolled_grace": 60}
    base.update(over)
    return base


@pytest.mark.parametrize("over,message", [
    ({"name": "Not_A_Name"}, "not a valid Secret name"),
    ({"string_data": None}, "data or string_data"),
    ({"string_data": {"a b": "x"}}, "invalid Secret key name(s): a b"),
    ({"string_data": None, "data": {"k": "%%%"}}, "data.k is not base64"),
    ({"strategy": "versioned", "name": "a" * 243}, "too long for a versioned Secret"),
    ({"delete_old": True, "wait": False}, "delete_old needs wait"),
    ({"keep": -1}, "keep must be 0 or more"),
    ({"consumers": [{"kind": "Deployment"}]}, "consumers[0]: a Deployment consumer needs name"),
    ({"consumers": [{"kind": "TensorFusionCluster", "pool": "p", "component": "client"}]},
     "component must be one of hypervisor, worker"),
    ({"consumers": [{"kind": "Job", "name": "x"}]}, "kind must be one of"),
    # #36: content that replaced a Secret's before - text (Ansible would have read dG9rZW4= as
    # {"dG9rZW4": ""}), the empty value that reading leaves, a nested mapping (stored as its repr).
    ({"string_data": None, "data": "dG9rZW4="}, "data: a string, not a mapping of Secret keys to base64 values"),
    ({"string_data": None, "data": {"dG9rZW4": ""}}, "data.dG9rZW4 is empty: a rotation sets new content"),
    ({"string_data": {"token": {"nested": "x"}}}, "string_data.token: a mapping, not text"),
    ({"string_data": {"token": ["a"]}}, "string_data.token: a list, not text"),
    ({"string_data": {"token": True}}, "string_data.token: a boolean, not text"),
    ({"string_data": {"token": None}}, "string_data.token: null, not text"),
    ({"string_data": ["token=x"]}, "string_data: a list, not a mapping of Secret keys to values"),
    ({"consumers": ["Deployment/x"]}, "consumers[0]: a string, not a consumer"),
])
def test_bad_input(over, message):
    with pytest.raises(InvalidInput) as err:
        plan.validate(params(**over))
    assert message in err.value.msg


def test_a_refusal_never_shows_the_value():
    with pytest.raises(InvalidInput) as err:
        plan.validate(params(string_data={"token": {"nested": "s3cr3t-value"}}))
    assert "s3cr3t" not in err.value.msg
    with pytest.raises(InvalidInput) as err:
        plan.validate(params(string_data="s3cr3t-value"))
    assert "s3cr3t" not in err.value.msg


def test_a_runbook_names_its_own_variables():
    with pytest.raises(InvalidInput, match=r"^tfops_secret_data: a string"):
        plan.check_content("abc=", "tfops_secret_data", encoded=True)
    with pytest.raises(InvalidInput, match=r"^tfops_secret_consumers\[1\]: a Deployment consumer needs name"):
        plan.validate_consumer({"kind": "Deployment"}, 1, "tfops_secret_consumers")


def test_good_input_passes():
    plan.validate(params(data={"k": "eA=="}, consumers=[
        {"kind": "StatefulSet", "name": "db"},
        {"kind": "TensorFusionCluster", "pool": "shared", "component": "hypervisor"}]))


def test_content_view_has_keys_and_digest_never_values():
    view = plan.content_view("s", {"ak": "c2VjcmV0"}, "Opaque")
    assert view["keys"] == ["ak"] and len(view["digest"]) == 10
    assert "c2VjcmV0" not in str(view)


def test_family_label_fits_a_label_value():
    assert plan.family_label("short") == "short"
    long = plan.family_label("x" * 100)
    assert len(long) <= 63 and long != plan.family_label("x" * 99 + "y")


def _secret(name, created, family=None):
    annotations = {plan.FAMILY_ANNOTATION: family} if family else {}
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations}}


def test_family_members_newest_first_and_previous_to_delete_keeps_n_and_used():
    members = plan.family_members([
        _secret("reg", "2026-01-01T00:00:00Z"), _secret("reg-a", "2026-02-01T00:00:00Z", "reg"),
        _secret("reg-b", "2026-03-01T00:00:00Z", "reg"), _secret("other", "2026-04-01T00:00:00Z")], "reg")
    assert [m["metadata"]["name"] for m in members] == ["reg-b", "reg-a", "reg"]
    assert plan.previous_to_delete(members, "reg-b", 0, set()) == ["reg-a", "reg"]
    assert plan.previous_to_delete(members, "reg-b", 1, set()) == ["reg"]
    assert plan.previous_to_delete(members, "reg-b", 0, {"reg"}) == ["reg-a"]


def test_repoint_and_annotate_templates_leave_the_input_alone():
    template = {"template": {"spec": {"imagePullSecrets": [{"name": "old"}], "containers": [
        {"name": "c", "envFrom": [{"secretRef": {"name": "old"}}]}]}}}
    moved = plan.repoint_template(template, "old", "new")
    assert moved["template"]["spec"]["imagePullSecrets"] == [{"name": "new"}]
    assert moved["template"]["spec"]["containers"][0]["envFrom"][0]["secretRef"]["name"] == "new"
    assert template["template"]["spec"]["imagePullSecrets"] == [{"name": "old"}]
    key = "secret.ops.tensor-fusion.ai/registry-creds.v2"
    marked = plan.mark_template_env(template, key, "uid:42", "tensor-fusion-hypervisor")
    # In the Pod spec, the part the operator hashes; never in template metadata.
    env = marked["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "TFOPS_SECRET_VERSION_REGISTRY_CREDS_V2", "value": "uid:42"}]
    assert "metadata" not in marked["template"] and "env" not in template["template"]["spec"][
        "containers"][0]
    assert plan.template_env_mark(marked, key) == "uid:42"
    assert plan.template_env_mark(template, key) is None
    again = plan.mark_template_env(marked, key, "uid:43", "x")
    assert again["template"]["spec"]["containers"][0]["env"] == [
        {"name": "TFOPS_SECRET_VERSION_REGISTRY_CREDS_V2", "value": "uid:43"}]


def test_mark_template_env_on_a_template_without_containers_names_the_components_container():
    marked = plan.mark_template_env({}, "secret.ops.tensor-fusion.ai/lic", "v1", "tensor-fusion-worker")
    assert marked["template"]["spec"]["containers"] == [
        {"name": "tensor-fusion-worker", "env": [{"name": "TFOPS_SECRET_VERSION_LIC", "value": "v1"}]}]


def test_helm_values_references_and_repoint_only_under_the_key():
    values = {"imagePullSecrets": [{"name": "old"}], "other": {"name": "old"}}
    assert plan.values_references(values, "imagePullSecrets", "old")
    assert not plan.values_references(values, "imagePullSecrets", "new")
    assert not plan.values_references(values, "missing.key", "old")
    moved = plan.repoint_values(values, "imagePullSecrets", "old", "new")
    assert moved == {"imagePullSecrets": [{"name": "new"}], "other": {"name": "old"}}
    assert values["imagePullSecrets"] == [{"name": "old"}]
    nested = {"controller": {"admissionWebhooks": {"secretName": "old"}}}
    assert plan.repoint_values(nested, "controller.admissionWebhooks.secretName", "old", "n2") == {
        "controller": {"admissionWebhooks": {"secretName": "n2"}}}
    assert plan.repoint_values(values, "absent", "old", "new") is values


@pytest.mark.parametrize("consumer,message", [
    ({"kind": "HelmRelease", "name": "r"}, "needs name (the release) and values_key"),
    ({"kind": "HelmRelease", "name": "r", "values_key": "a..b"}, "is not a dotted key path"),
])
def test_helm_consumer_input(consumer, message):
    with pytest.raises(InvalidInput) as err:
        plan.validate(params(consumers=[consumer]))
    assert message in err.value.msg


def test_what_a_failed_rotation_created_modified_and_put_back():
    steps = [{"step": "create", "status": "ok", "detail": "db-1a2b"},
             {"step": "repoint", "status": "ok", "consumer": "Deployment ns/web", "changed": True},
             {"step": "repoint", "status": "ok", "consumer": "Deployment ns/api", "changed": False},
             {"step": "roll", "status": "failed", "consumer": "Deployment ns/web"},
             {"step": "restore", "status": "ok", "detail": "Deployment ns/web points at db again"},
             {"step": "restore", "status": "failed", "detail": "Deployment ns/x points at db again"}]
    assert plan.what_changed(steps) == {"created": ["db-1a2b"], "modified": ["Deployment ns/web"],
                                        "put_back": ["Deployment ns/web points at db again"],
                                        "not_put_back": ["Deployment ns/x points at db again"]}
    in_place = [{"step": "backup", "status": "ok", "detail": "db-9f8e"},
                {"step": "update", "status": "ok", "detail": "db"}]
    assert plan.what_changed(in_place) == {"created": ["db-9f8e"], "modified": ["Secret db"], "put_back": [],
                                           "not_put_back": []}


def test_a_step_that_wrote_and_then_failed_modified_its_consumer():
    """A pool component's repoint writes the TensorFusionCluster, then waits: a failure of its
    wait leaves the component modified (#37 item 1)."""
    steps = [{"step": "create", "status": "ok", "detail": "db-1a2b"},
             {"step": "repoint", "status": "failed", "consumer": "TensorFusionCluster tf pool shared hypervisor",
              "changed": True},
             {"step": "repoint", "status": "failed", "consumer": "Deployment ns/never-written"},
             {"step": "restore", "status": "ok", "detail": "TensorFusionCluster tf pool shared hypervisor points at db again"}]
    changes = plan.what_changed(steps)
    assert changes["modified"] == ["TensorFusionCluster tf pool shared hypervisor"]
    assert changes["put_back"] == ["TensorFusionCluster tf pool shared hypervisor points at db again"]


def test_the_outcome_of_a_failure_never_says_nothing_changed_after_a_write():
    nothing = {"created": [], "modified": [], "stuck": []}
    assert plan.outcome([], nothing, False) == "nothing had changed yet"
    created = dict(nothing, created=["db-1a2b"])
    assert plan.outcome([], created, False) == \
        "no consumer and no Secret in use had changed yet (created, unreferenced, kept: db-1a2b)"
    modified = dict(created, modified=["Deployment ns/web"])
    assert plan.outcome([], modified, False) == "nothing was put back, changed: Deployment ns/web"
    assert plan.outcome(["Deployment ns/web points at db again"], modified, False) == \
        "put back: Deployment ns/web points at db again"
    assert plan.outcome([], modified, True).startswith("the rotation was verified before this step and stays")
    stuck = dict(modified, stuck=["Deployment ns/web is stuck mid-rollout; to do: fix it"])
    assert plan.outcome(["Secret db has its previous content again"], stuck, False) == (
        "put back: Secret db has its previous content again; "
        "STUCK: Deployment ns/web is stuck mid-rollout; to do: fix it")


def test_a_stuck_put_back_says_what_is_stuck_and_what_to_do():
    report = plan.stuck_report("Deployment ns/web", "Deployment ns/web cannot finish its rollout: ...",
                               ["web-7c9 app: ImagePullBackOff (Back-off pulling image) for 30s"], [],
                               "Secret db as rotated")
    assert report["consumer"] == "Deployment ns/web" and report["ready_on_rotated"] == []
    assert report["action"] == (
        "fix what keeps its new Pods from starting (web-7c9 app: ImagePullBackOff (Back-off pulling "
        "image) for 30s); its rollout finishes by itself, on the previous content, and nothing else "
        "is left to put back")
    pool = plan.stuck_report("TensorFusionCluster tf pool shared hypervisor", "rollout of GPUPool ...",
                             ["hypervisor-gpu-3 hypervisor: ImagePullBackOff"], ["hypervisor-gpu-0"],
                             "Secret db-1a2b", pool=True)
    assert "the operator finishes the component's campaign by itself" in pool["action"]
    assert pool["action"].endswith("; until then Pods hypervisor-gpu-0 run on the rotated content "
                                   "(Secret db-1a2b): delete them if it must not be used")
    assert plan.stuck_line(pool).startswith(
        "TensorFusionCluster tf pool shared hypervisor is stuck mid-rollout; to do: fix what keeps")


@pytest.mark.parametrize("current, wanted, message", [
    (None, None, "Secret regcred does not exist in namespace ns: in_place updates an existing Secret"),
    ({"type": "Opaque", "immutable": True}, None, "Secret regcred is immutable: use strategy versioned"),
    ({"type": "Opaque"}, "kubernetes.io/dockerconfigjson",
     "type: Secret regcred is of type Opaque, and a Secret's type cannot change (the API server refuses it): "
     "use strategy versioned, which creates a Secret of type kubernetes.io/dockerconfigjson"),
    ({}, "kubernetes.io/tls", "Secret regcred is of type Opaque, and a Secret's type cannot change"),
])
def test_an_in_place_update_the_api_server_would_refuse_is_refused_first(current, wanted, message):
    with pytest.raises(InvalidInput, match=None) as exc:
        plan.check_in_place(current, "regcred", "ns", wanted)
    assert message in exc.value.msg


@pytest.mark.parametrize("current, wanted", [({"type": "Opaque"}, None), ({"type": "Opaque"}, "Opaque"), ({}, "Opaque")])
def test_an_in_place_update_of_the_same_type_passes(current, wanted):
    plan.check_in_place(current, "regcred", "ns", wanted)
