"""core/redact.py: which keys are secret, values and manifests masked by their keys (helm_release /
helm_snapshot decisions without a cluster)."""
import pytest
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact


SECRET_DOC = """apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: ns}
stringData: {ak: AKIA-SECRET, sk: SK-SECRET}
"""


DEPLOY_DOC = """apiVersion: apps/v1
kind: Deployment
metadata: {name: ctl, namespace: ns}
spec:
  template:
    spec:
      containers:
        - name: agent
          env:
            - {name: ENROLL_TOKEN, value: tok-SECRET}
            - {name: CLOUD_ENDPOINT, value: wss://x}
          volumeMounts: [{name: creds, mountPath: /tmp/secret}]
      volumes:
        - name: creds
          secret: {secretName: creds, items: [{key: ak, path: ak}]}
"""


@pytest.mark.parametrize("key", ["password", "enrollToken", "accessKey", "secretKey", "licenseKey",
                                 "licence", "apiKey", "token", "key", "clientSecret", "TF_LICENSE"])
def test_secret_looking_keys(key):
    assert redact.looks_secret(key)


@pytest.mark.parametrize("key", ["secretName", "tokenPath", "accessKeyPath", "keyRef", "image",
                                 "agentId", "cloudEndpoint", "monkey", "host", "licenseFile"])
def test_reference_and_plain_keys_are_not_secret(key):
    assert not redact.looks_secret(key)


def test_redact_values_hashes_secret_leaves_only():
    values = {"agent": {"agentId": "", "enrollToken": "tok"}, "greptime": {"password": "pw", "host": "h"},
              "cloudVendorCredentials": {"accessKey": "ak", "secretKey": "sk"},
              "controller": {"admissionWebhooks": {"secretName": "webhook"}}}
    out = redact.redact_values(values)
    assert out["agent"] == {"agentId": "", "enrollToken": redact.value_hash("tok")}
    assert out["greptime"] == {"password": redact.value_hash("pw"), "host": "h"}
    assert out["controller"]["admissionWebhooks"]["secretName"] == "webhook"
    assert redact.redact_values(values, keep_secrets=True) == values
    assert sorted(redact.secret_leaves({"a": {"password": "pw1", "token": "tok1", "x": "y"}})) == ["pw1", "tok1"]


def test_manifest_masking_and_collection():
    text = SECRET_DOC + "---\n" + DEPLOY_DOC
    masked = redact.mask_manifest(text)
    for value in ("AKIA-SECRET", "SK-SECRET", "tok-SECRET"):
        assert value not in masked
    assert "wss://x" in masked and "secretName: creds" in masked
    found = redact.manifest_secret_values(text)
    assert sorted(found) == ["AKIA-SECRET", "SK-SECRET", "tok-SECRET"]
    assert "creds" not in found, "names of Secrets are references, not secrets"


def test_set_expressions_masked_by_their_key():
    assert redact.mask_set_expression("agent.enrollToken=abc") == "agent.enrollToken=********"
    assert redact.mask_set_expression("agent.agentId=") == "agent.agentId="
    assert redact.mask_set_expression("image.tag=v1") == "image.tag=v1"
    assert redact.mask_set_expression("a\\.b.password=x") == "a\\.b.password=********"
