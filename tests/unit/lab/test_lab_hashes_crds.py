"""Hashes change iff the hash-relevant fields change; the committed CRDs match their generator."""
import copy

import yaml

from lab.tensorfusion import crds, hashes

SPEC = {"componentConfig": {"hypervisor": {"image": "hv:1", "portNumber": 8000},
                            "worker": {"image": "wk:1"},
                            "client": {"image": "cl:1", "operatorEndpoint": "http://op:8080"}},
        "nodeManagerConfig": {"defaultIsolationMode": "soft",
                              "nodePoolRollingUpdatePolicy": {"batchPercentage": 20}}}


def changed(path, value):
    spec = copy.deepcopy(SPEC)
    node = spec
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return spec


def test_hashes_are_16_hex_and_pool_differs_from_node():
    pool = hashes.hypervisor_pool_hash(SPEC, "", "2.16.0")
    node = hashes.hypervisor_node_hash(SPEC, "", "2.16.0", "NVIDIA", "soft")
    assert len(pool) == 16 and int(pool, 16) >= 0 and pool != node


def test_hypervisor_hash_follows_image_operator_version_and_revisions_not_policy():
    base = hashes.hypervisor_pool_hash(SPEC, "", "2.16.0")
    assert hashes.hypervisor_pool_hash(changed(["componentConfig", "hypervisor", "image"], "hv:2"),
                                       "", "2.16.0") != base
    assert hashes.hypervisor_pool_hash(SPEC, "", "2.17.0") != base
    assert hashes.hypervisor_pool_hash(SPEC, '{"NVIDIA":"x"}', "2.16.0") != base
    policy_only = changed(["nodeManagerConfig", "nodePoolRollingUpdatePolicy", "batchPercentage"], 50)
    assert hashes.hypervisor_pool_hash(policy_only, "", "2.16.0") == base
    assert hashes.hypervisor_pool_hash(copy.deepcopy(SPEC), "", "2.16.0") == base


def test_client_and_worker_hashes():
    c, w = hashes.client_hash(SPEC), hashes.worker_hash(SPEC)
    port = changed(["componentConfig", "hypervisor", "portNumber"], 9000)
    assert hashes.client_hash(port) == c and hashes.worker_hash(port) != w
    remote = changed(["componentConfig", "client", "remoteModeImage"], "x")
    assert hashes.client_hash(remote) == c
    assert hashes.client_hash(changed(["componentConfig", "client", "image"], "cl:2")) != c
    assert hashes.worker_hash(changed(["componentConfig", "hypervisor", "image"], "hv:9")) == w


def test_committed_crds_match_generator():
    for plural, body in crds.all_crds().items():
        path = crds.CRD_DIR / f"{crds.GROUP}_{plural}.yaml"
        assert yaml.safe_load(path.read_text()) == body, f"regenerate {path}"


def test_crds_stay_within_v1_20():
    text = "".join(p.read_text() for p in crds.CRD_DIR.glob("*.yaml"))
    assert "x-kubernetes-validations" not in text and "default: null" not in text
    pool = crds.all_crds()["gpupools"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    policy = (pool["properties"]["spec"]["properties"]["nodeManagerConfig"]["properties"]
              ["nodePoolRollingUpdatePolicy"]["properties"])
    assert "autoUpdate" not in policy and "default" not in policy["autoUpdateHypervisor"]
    assert policy["batchPercentage"] == {"type": "integer", "format": "int32", "default": 100,
                                         "minimum": 0, "maximum": 100}
