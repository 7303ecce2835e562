"""Cluster-stored snapshot bundles (helm/store.py): encoded, chunked into Secrets and read back
to exactly what a local bundle of the same capture holds; a changed, missing or foreign part is
refused as a changed file is; references; the newest usable bundle across both stores."""
import base64
import gzip
import hashlib
import json

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store as snapshot_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

KEY = signing.BundleKey(bytes(range(32)))
OTHER = signing.BundleKey(b"x" * 32)
META = {"release": "rel", "namespace": "ns", "revision": 3, "cluster_uid": "uid-1",
        "captured_at": "2026-11-29T02:00:01.123456Z"}


def files(size=0):
    # Random-looking text does not compress: ``size`` bytes of it need that many bytes of chunks.
    noise = "".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(size // 64 + 1))[:size]
    return {"meta.json": snapshots.dumps(META), "tensorfusionclusters.json": snapshots.dumps([]),
            "manifest.yaml": "kind: ConfigMap # é\n" + noise}


def bodies(chunk=snapshot_store.CHUNK_BYTES, content=None):
    name = snapshot_store.secret_name("rel", META["captured_at"], 3)
    return snapshot_store.secrets_for("ns", name, "rel", "uid-1",
                                      snapshot_store.pack(content or files(), KEY), chunk)


def verified(parts, **kwargs):
    return snapshot_store.verify_parts(parts, **dict({"cluster_uid": "uid-1", "key": KEY}, **kwargs))


def test_a_bundle_round_trips_to_the_contents_of_the_same_local_bundle(tmp_path):
    parts = bodies()
    assert len(parts) == 1
    secret = parts[0]
    assert secret["type"] == "tensorfusion.ops/snapshot"
    assert secret["metadata"]["name"] == "tfops-snapshot.rel.20261129t020001123456z.rev3"
    assert secret["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "tensorfusion.ops",
                                            "tensorfusion.ops/snapshot-of": "rel",
                                            "tensorfusion.ops/cluster-uid": "uid-1"}
    # gzip-compressed, and the key is nowhere in it
    blob = base64.b64decode(secret["data"]["bundle.gz"])
    assert blob[:2] == b"\x1f\x8b" and bytes(range(32)) not in gzip.decompress(blob)
    contents, meta, problems, status = verified(parts)
    assert (meta, problems, status) == (META, [], "verified")
    local = snapshots.read_folder(snapshots.write_bundle(str(tmp_path), "b", files(), KEY))
    assert contents == local


def test_a_big_bundle_is_cut_into_chunks_and_reassembled():
    content = files(5000)
    parts = bodies(chunk=1024, content=content)
    assert len(parts) > 3
    names = [p["metadata"]["name"] for p in parts]
    assert names[1:] == ["%s.part-%d" % (names[0], n) for n in range(2, len(parts) + 1)]
    assert all(len(base64.b64decode(p["data"]["bundle.gz"])) <= 1024 for p in parts)
    assert {p["metadata"]["annotations"]["tensorfusion.ops/snapshot-parts"] for p in parts} == {str(len(parts))}
    grouped = snapshot_store.group(list(reversed(parts)) + [{"type": "Opaque", "metadata": {"name": "x"}}])
    assert list(grouped) == [("ns", names[0])]
    contents, meta, problems, _status = verified(grouped[("ns", names[0])])
    assert problems == [] and contents["manifest.yaml"].decode() == content["manifest.yaml"]
    # Removal goes first part first: a removal cut short never leaves a complete-looking bundle.
    assert snapshot_store.names_of(list(reversed(parts))) == names


def test_the_default_chunk_stays_well_below_the_object_limit():
    parts = bodies(content=files(2 * 1024 * 1024))  # hex text: about 1 MiB compressed
    assert len(parts) == 2
    assert all(len(json.dumps(p)) < 1000 * 1024 for p in parts)


def test_a_missing_or_doubled_part_is_an_incomplete_bundle():
    parts = bodies(chunk=1024, content=files(5000))
    _c, meta, problems, status = verified(parts[:1] + parts[2:])
    assert meta is None and status == "invalid" and problems[0].startswith("incomplete: part(s) 2 of")
    assert "stored twice" in verified(parts + parts[-1:])[2][0]
    other = json.loads(json.dumps(parts))
    other[0]["metadata"]["annotations"]["tensorfusion.ops/snapshot-parts"] = "99"
    assert "disagree" in verified(other)[2][0]


def _rewrite(parts, change):
    """What someone who may edit Secrets does: decode, change the document, store it again."""
    blob = b"".join(base64.b64decode(p["data"]["bundle.gz"]) for p in parts)
    document = json.loads(gzip.decompress(blob))
    change(document)
    edited = json.loads(json.dumps(parts[:1]))
    edited[0]["metadata"]["annotations"]["tensorfusion.ops/snapshot-parts"] = "1"
    edited[0]["data"]["bundle.gz"] = base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()
    return edited


def test_a_changed_secret_is_refused_as_a_changed_file():
    parts = bodies()

    def edit_meta(document):
        document["meta.json"] = document["meta.json"].replace('"revision": 3', '"revision": 1')
    problems = verified(_rewrite(parts, edit_meta))[2]
    assert "meta.json does not match its checksum (changed after capture)" in problems

    def forge(document):  # the checksum recomputed too: only the signature catches it
        edit_meta(document)
        index = json.loads(document["index.json"])
        index["files"]["meta.json"] = hashlib.sha256(document["meta.json"].encode()).hexdigest()
        document["index.json"] = json.dumps(index)
    _c, _m, problems, status = verified(_rewrite(parts, forge))
    assert status == "invalid" and "signature does not verify" in problems[0]

    def add(document):
        document["extra.json"] = "{}"
    assert "files not in the index: extra.json" in verified(_rewrite(parts, add))[2]
    assert verified(parts, key=OTHER)[3] == "other_key"
    assert verified(parts, cluster_uid="uid-2")[2][0].startswith("captured on another cluster")


def test_data_that_is_not_a_bundle_is_refused():
    parts = bodies()
    broken = json.loads(json.dumps(parts))
    broken[0]["data"]["bundle.gz"] = base64.b64encode(b"not gzip").decode()
    assert verified(broken)[2][0].startswith("not a readable bundle")
    broken[0]["data"]["bundle.gz"] = "%%%"
    assert "does not hold base64" in verified(broken)[2][0]
    assert verified(parts, signed=False)[2:] == ([], None)


def test_references():
    ref = snapshot_store.reference("ns", "tfops-snapshot.rel.1.rev3")
    assert ref == "secret://ns/tfops-snapshot.rel.1.rev3"
    assert snapshot_store.parse_reference(ref) == ("ns", "tfops-snapshot.rel.1.rev3")
    for bad in ("secret://ns", "secret://ns/a/b", "secret://NS/x", "/tmp/x", "secret:///x"):
        with pytest.raises(InvalidInput):
            snapshot_store.parse_reference(bad)
    assert snapshot_store.is_reference(ref) and not snapshot_store.is_reference("/tmp/secret://x")
    assert snapshot_store.selector("rel") == \
        "app.kubernetes.io/managed-by=tensorfusion.ops,tensorfusion.ops/snapshot-of=rel"
    assert snapshot_store.selector() == "app.kubernetes.io/managed-by=tensorfusion.ops,tensorfusion.ops/snapshot-of"


def _item(location, store, captured_at, usable=True, release="rel"):
    return dict(snapshots.describe(location, dict(META, captured_at=captured_at, release=release),
                                   [] if usable else ["changed"], "verified", store))


def test_the_newest_usable_bundle_of_either_store_comes_first():
    items = [_item("/snaps/old", "local", "2026-01-01T00:00:00Z"),
             _item("secret://ns/newest-broken", "cluster", "2026-03-01T00:00:00Z", usable=False),
             _item("/snaps/both", "local", "2026-02-01T00:00:00Z"),
             _item("secret://ns/both", "cluster", "2026-02-01T00:00:00Z"),
             _item("secret://ns/other", "cluster", "2026-04-01T00:00:00Z", release="other")]
    chosen = snapshots.select(items, "rel", "ns", "uid-1")
    assert [i["location"] for i in chosen if i["usable"]] == ["secret://ns/both", "/snaps/both", "/snaps/old"]
    assert chosen[0]["location"] == "secret://ns/newest-broken" and chosen[0]["store"] == "cluster"
    assert snapshots.to_prune(chosen, 2) == chosen[2:]


def test_only_the_collections_own_restore_points_are_recognised_as_such():
    """#46: helm_snapshot state=absent with bundle=secret://NS/NAME removes nothing that is not a
    restore point of the collection (an application's token, the webhook's TLS Secret)."""
    parts = bodies(chunk=1024, content=files(4000))
    name = parts[0]["metadata"]["name"]
    assert len(parts) > 1 and snapshot_store.not_a_restore_point(parts, name) is None
    app_token = {"type": "Opaque", "metadata": {"name": "app-cred", "labels": {}}}
    assert "of type Opaque" in snapshot_store.not_a_restore_point([app_token], "app-cred")
    forged = {"type": snapshot_store.SECRET_TYPE, "metadata": {"name": "x", "labels": {}}}
    assert "lacks the labels" in snapshot_store.not_a_restore_point([forged], "x")
    other = [dict(p, metadata=dict(p["metadata"], annotations={snapshot_store.ANNOTATION_BUNDLE: "other"}))
             for p in parts[:1]]
    assert "not a part of bundle %s" % name in snapshot_store.not_a_restore_point(other, name)
    assert snapshot_store.not_a_restore_point([], name) == "there is no such Secret"
