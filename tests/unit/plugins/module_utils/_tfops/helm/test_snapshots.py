"""helm/snapshots.py: bundle writing, verification, selection and pruning, objects and secret
references cleaned."""
import base64
import os
import stat

import pytest
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ..core.test_redact import DEPLOY_DOC, SECRET_DOC  # helpers shared with that file


# ---- bundles ------------------------------------------------------------------------------------
KEY = signing.BundleKey(b"k" * 32)


def write(tmp_path, name="b1", uid="uid-1", captured="2026-11-29T02:00:00Z", release_name="r"):
    meta = {"release": release_name, "namespace": "ns", "revision": 3, "cluster_uid": uid,
            "captured_at": captured, "api_server": "https://k"}
    return snapshots.write_bundle(str(tmp_path), name, {"meta.json": snapshots.dumps(meta),
                                                        "values.json": "{}\n"}, KEY)


def test_bundle_is_private_complete_and_verifiable(tmp_path):
    path = write(tmp_path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert all(stat.S_IMODE(os.stat(os.path.join(path, f)).st_mode) == 0o600 for f in os.listdir(path))
    assert not [n for n in os.listdir(str(tmp_path)) if n.startswith(".tmp-")]
    meta, problems, signature = snapshots.verify_bundle(path, cluster_uid="uid-1", key=KEY)
    assert problems == [] and meta["revision"] == 3 and signature == "verified"
    assert snapshots.verify_bundle(path, cluster_uid="uid-2", key=KEY)[1][0].startswith("captured on another cluster")
    with open(os.path.join(path, "values.json"), "w") as handle:
        handle.write('{"x": 1}\n')
    assert snapshots.verify_bundle(path, key=KEY)[1] == [
        "values.json does not match its checksum (changed after capture)"]
    with open(os.path.join(path, "extra"), "w") as handle:
        handle.write("x")
    assert "files not in the index: extra" in snapshots.verify_bundle(path, key=KEY)[1]
    os.remove(os.path.join(path, "meta.json"))
    assert "meta.json is missing" in snapshots.verify_bundle(path, key=KEY)[1]


def test_a_partial_bundle_is_never_listed(tmp_path):
    write(tmp_path, "good")
    os.makedirs(str(tmp_path / ".tmp-half-xyz"))
    os.makedirs(str(tmp_path / "no-index"))
    assert [os.path.basename(p) for p in snapshots.list_bundles(str(tmp_path))] == ["good"]
    with pytest.raises(InvalidInput):
        snapshots.write_bundle(str(tmp_path), "good", {"meta.json": "{}"}, KEY)


def test_select_and_prune_newest_first(tmp_path):
    items = [snapshots.describe(p, *snapshots.verify_bundle(p, key=KEY)) for p in (
        write(tmp_path, "a", captured="2026-11-29T01:00:00Z"), write(tmp_path, "b", captured="2026-11-29T03:00:00Z"),
        write(tmp_path, "c", captured="2026-11-29T02:00:00Z"), write(tmp_path, "d", release_name="other"))]
    chosen = snapshots.select(items, "r", "ns", "uid-1")
    assert [i["name"] for i in chosen] == ["b", "c", "a"]
    assert [i["name"] for i in snapshots.to_prune(chosen, 2)] == ["a"]
    assert snapshots.to_prune(chosen, None) == []
    with pytest.raises(InvalidInput):
        snapshots.to_prune(chosen, 0)
    with pytest.raises(InvalidInput):
        snapshots.remove_bundle(str(tmp_path))


def test_clean_object_and_secret_references():
    obj = {"apiVersion": "x", "kind": "TensorFusionCluster", "status": {"phase": "Running"},
           "metadata": {"name": "t", "uid": "u", "resourceVersion": "1", "generation": 2,
                        "managedFields": [], "annotations": {"keep": "me"}},
           "spec": {"pods": {"imagePullSecrets": [{"name": "pull"}],
                             "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "s1", "key": "k"}}}]}}}
    assert snapshots.clean_object(obj) == {"apiVersion": "x", "kind": "TensorFusionCluster",
                                           "metadata": {"name": "t", "annotations": {"keep": "me"}},
                                           "spec": obj["spec"]}
    refs = snapshots.secret_references(redact.parse_manifest(DEPLOY_DOC + "---\n" + SECRET_DOC) + [obj], "ns")
    assert refs == [("ns", "creds"), ("ns", "pull"), ("ns", "s1")]
    record = snapshots.secret_record({"metadata": {"name": "s", "namespace": "ns"}, "type": "Opaque",
                                      "data": {"k": base64.b64encode(b"v").decode()}}, KEY)
    assert record == {"namespace": "ns", "name": "s", "type": "Opaque", "keys": ["k"],
                      "fingerprints": {"k": KEY.fingerprint(b"v")}}
    assert record["fingerprints"]["k"].startswith("hmac-sha256:")
