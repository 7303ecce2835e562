"""Secret references in Pod specs and repointing them (secret_rotate's groundwork)."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import refs as secretrefs

SPEC = {
    "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "creds"}}]}],
    "containers": [{"name": "app", "env": [
        {"name": "PASSWORD", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "password"}}},
        {"name": "OTHER", "valueFrom": {"secretKeyRef": {"name": "other", "key": "x"}}},
        {"name": "PLAIN", "value": "creds"}]}],
    "volumes": [{"name": "s", "secret": {"secretName": "creds"}},
                {"name": "p", "projected": {"sources": [{"secret": {"name": "creds"}}]}},
                {"name": "cm", "configMap": {"name": "creds"}}],
    "imagePullSecrets": [{"name": "creds"}, {"name": "regcred"}],
}


def test_references_finds_every_kind_of_use():
    assert secretrefs.references(SPEC, "creds") == [
        "initContainers[init].envFrom[0]", "containers[app].env[PASSWORD]",
        "volumes[s]", "volumes[p].projected", "imagePullSecrets"]
    assert secretrefs.references(SPEC, "nothing") == []


def test_repoint_changes_only_that_secret():
    new = secretrefs.repoint(SPEC, "creds", "creds-2")
    assert secretrefs.references(new, "creds") == []
    assert len(secretrefs.references(new, "creds-2")) == 5
    assert new["containers"][0]["env"][1]["valueFrom"]["secretKeyRef"]["name"] == "other"
    assert new["containers"][0]["env"][2]["value"] == "creds", "a plain value is not a reference"
    assert new["volumes"][2]["configMap"]["name"] == "creds", "a ConfigMap is not a Secret"
    assert SPEC["imagePullSecrets"][0]["name"] == "creds", "the input is not modified"


def test_versioned_names_follow_content():
    one = secretrefs.encoded_data(string_data={"password": "a"})
    two = secretrefs.encoded_data(string_data={"password": "b"})
    assert one == {"password": "YQ=="}
    assert secretrefs.versioned_name("creds", one) == secretrefs.versioned_name("creds", dict(one))
    assert secretrefs.versioned_name("creds", one) != secretrefs.versioned_name("creds", two)
    assert secretrefs.versioned_name("creds", one).startswith("creds-")
