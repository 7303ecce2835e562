"""Signed bundle indexes and keyed fingerprints (helm/signing.py, helm/snapshots.py): a bundle whose content
a forger changed and whose index he recomputed is refused, as is one with no signature (unless
allowed), one signed with another key and one whose key is unknown; fingerprints are keyed, never
a bare hash of the value, and the key appears in no file of the bundle."""
import base64
import hashlib
import json
import os

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput


RAW = bytes(range(32))


KEY = signing.BundleKey(RAW)


OTHER = signing.BundleKey(b"x" * 32)


TFC = [{"metadata": {"name": "tensor-fusion"}, "spec": {"gpuPools": [{"name": "shared", "specTemplate": {
    "componentConfig": {"hypervisor": {"image": "hv:1"}}}}]}}]


def bundle(tmp_path, key=KEY, name="b"):
    meta = {"release": "r", "namespace": "ns", "revision": 2, "cluster_uid": "uid", "captured_at": "t"}
    return snapshots.write_bundle(str(tmp_path), name, {
        "meta.json": snapshots.dumps(meta), "tensorfusionclusters.json": snapshots.dumps(TFC)}, key)


def forge(path, file_name, text):
    """What a forger does: change a file, recompute its checksum in the index (keeping the rest)."""
    with open(os.path.join(path, file_name), "w") as handle:
        handle.write(text)
    index = snapshots.read_json(path, snapshots.INDEX)
    index["files"][file_name] = hashlib.sha256(text.encode()).hexdigest()
    with open(os.path.join(path, snapshots.INDEX), "w") as handle:
        json.dump(index, handle)
    return index


def test_a_signed_bundle_verifies_and_holds_no_key(tmp_path):
    path = bundle(tmp_path)
    meta, problems, status = snapshots.verify_bundle(path, cluster_uid="uid", key=KEY)
    assert (problems, status, meta["revision"]) == ([], "verified", 2)
    index = snapshots.read_json(path, snapshots.INDEX)
    assert index["format"] == 2 and index["signature"]["algorithm"] == "hmac-sha256"
    assert index["signature"]["key_id"] == KEY.key_id and len(KEY.key_id) == 16
    for file_name in os.listdir(path):
        with open(os.path.join(path, file_name), "rb") as handle:
            data = handle.read()
        assert RAW not in data and base64.b64encode(RAW) not in data and RAW.hex().encode() not in data
    assert RAW.hex() not in repr(KEY) and KEY.key_id in repr(KEY)
    # The key id is a fingerprint of the key, not the key, and not a plain hash of it.
    assert KEY.key_id not in (hashlib.sha256(RAW).hexdigest(), RAW.hex()[:16])
    # A function of the meta may give the key (helm_snapshot_info: the key of the bundle's namespace).
    assert snapshots.verify_bundle(path, key=lambda meta: KEY if meta["namespace"] == "ns" else None)[2] == "verified"


def test_a_forged_bundle_with_a_recomputed_index_is_refused(tmp_path):
    path = bundle(tmp_path)
    forged = json.loads(json.dumps(TFC))
    forged[0]["spec"]["gpuPools"][0]["specTemplate"]["componentConfig"]["hypervisor"]["image"] = "evil:1"
    forge(path, "tensorfusionclusters.json", snapshots.dumps(forged))
    _meta, problems, status = snapshots.verify_bundle(path, cluster_uid="uid", key=KEY)
    assert status == "invalid"
    assert problems == ["the index's signature does not verify (the bundle was changed after capture)"]
    # allow_unsigned does not accept a bad signature.
    assert snapshots.verify_bundle(path, key=KEY, allow_unsigned=True)[2] == "invalid"


def test_a_forger_who_also_rewrites_the_signature_or_key_id_is_refused(tmp_path):
    path = bundle(tmp_path)
    index = forge(path, "meta.json", snapshots.dumps({"release": "r", "namespace": "ns", "revision": 1,
                                                      "cluster_uid": "uid"}))
    for signature in ({"algorithm": "hmac-sha256", "key_id": KEY.key_id, "value": "0" * 64},
                      signing.signature_of(index["files"], OTHER),
                      {"algorithm": "sha256", "key_id": KEY.key_id,
                       "value": hashlib.sha256(signing.index_payload(index["files"], KEY.key_id)).hexdigest()}):
        index["signature"] = signature
        with open(os.path.join(path, snapshots.INDEX), "w") as handle:
            json.dump(index, handle)
        status = snapshots.verify_bundle(path, key=KEY)[2]
        assert status in ("invalid", "other_key"), signature


def test_unsigned_bundles_are_refused_unless_allowed_and_unknown_keys_refuse(tmp_path):
    path = bundle(tmp_path)
    index = snapshots.read_json(path, snapshots.INDEX)
    del index["signature"]
    with open(os.path.join(path, snapshots.INDEX), "w") as handle:
        json.dump(index, handle)
    _meta, problems, status = snapshots.verify_bundle(path, key=KEY)
    assert status == "unsigned" and "not signed" in problems[0]
    assert snapshots.verify_bundle(path, key=KEY, allow_unsigned=True)[1:] == ([], "unsigned")
    assert snapshots.verify_bundle(path, key=None, allow_unsigned=True)[1:] == ([], "unsigned")
    signed = bundle(tmp_path, name="s")
    _meta, problems, status = snapshots.verify_bundle(signed, key=None)
    assert status == "no_key" and "tensorfusion-ops-snapshot-key" in problems[0]
    _meta, problems, status = snapshots.verify_bundle(signed, key=OTHER)
    assert status == "other_key" and KEY.key_id in problems[0] and OTHER.key_id in problems[0]
    # Listing for pruning does not check signatures.
    assert snapshots.verify_bundle(signed, signed=False)[1:] == ([], None)
    item = snapshots.describe(signed, *snapshots.verify_bundle(signed, key=OTHER))
    assert item["usable"] is False and item["signature"] == "other_key"


def test_keyed_fingerprints():
    value = "hunter2"
    fingerprint = KEY.fingerprint(value)
    assert fingerprint.startswith("hmac-sha256:") and len(fingerprint) == len("hmac-sha256:") + 64
    assert fingerprint == KEY.fingerprint(value.encode()) == signing.BundleKey(RAW).fingerprint(value)
    assert fingerprint != OTHER.fingerprint(value)
    assert fingerprint.split(":", 1)[1] != hashlib.sha256(value.encode()).hexdigest()
    assert signing.matches(fingerprint, value, KEY) and not signing.matches(fingerprint, "hunter3", KEY)
    assert not signing.matches(fingerprint, value, OTHER) and not signing.matches(fingerprint, value, None)
    assert signing.matches(redact.value_hash(value), value, None), "bare sha256 of an older bundle"
    assert signing.is_fingerprint(fingerprint) and signing.is_fingerprint(redact.value_hash(value))
    assert not signing.is_fingerprint("hmac-sha256:xyz")
    # Everything a bundle writes goes through the key's fingerprint.
    values = redact.redact_values({"auth": {"password": value}, "tokens": [value]}, fingerprint=KEY.fingerprint)
    assert values == {"auth": {"password": fingerprint}, "tokens": [fingerprint]}
    manifest = redact.mask_manifest("kind: Secret\nmetadata: {name: s}\ndata: {p: aHVudGVyMg==}\n---\n"
                                    "kind: Pod\nspec: {containers: [{env: [{name: TF_LICENSE, value: hunter2}]}]}\n",
                                    KEY.fingerprint)
    assert "aHVudGVyMg==" not in manifest and value not in manifest
    assert KEY.fingerprint("aHVudGVyMg==") in manifest and fingerprint in manifest
    assert "sha256:" + hashlib.sha256(value.encode()).hexdigest() not in manifest


def test_keys_from_the_option_and_the_secret():
    assert signing.key_from_text("a" * 16).key_id == signing.BundleKey(b"a" * 16).key_id
    with pytest.raises(InvalidInput):
        signing.key_from_text("short")
    secret = signing.key_secret("ns", RAW)
    assert secret["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tensorfusion.ops"
    assert (secret["metadata"]["name"], secret["metadata"]["namespace"]) == ("tensorfusion-ops-snapshot-key", "ns")
    assert signing.key_from_secret(secret).key_id == KEY.key_id
    for data in ({}, {"key": "not base64!"}, {"key": base64.b64encode(b"short").decode()}):
        with pytest.raises(InvalidInput) as err:
            signing.key_from_secret(dict(secret, data=data))
        assert "ns/tensorfusion-ops-snapshot-key" in str(err.value)
