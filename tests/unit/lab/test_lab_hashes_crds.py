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


HV_SPEC = ["componentConfig", "hypervisor", "podTemplate", "template", "spec"]
HV_META = ["componentConfig", "hypervisor", "podTemplate", "template", "metadata"]


def both_hypervisor_hashes(spec, revisions="", version="2.16.0", policy="dynamic", mode="soft"):
    return (hashes.hypervisor_pool_hash(spec, revisions, version, policy),
            hashes.hypervisor_node_hash(spec, revisions, version, "NVIDIA", mode))


def test_hypervisor_hash_covers_the_rendered_pod_spec():
    base = both_hypervisor_hashes(SPEC)
    for path, value in ((["componentConfig", "hypervisor", "image"], "hv:2"),
                        (["componentConfig", "hypervisor", "portNumber"], 9000),
                        (["componentConfig", "hypervisor", "enableVector"], True),
                        (HV_SPEC, {"containers": [{"name": "h", "env": [{"name": "A",
                                                                          "value": "1"}]}]})):
        moved = both_hypervisor_hashes(changed(path, value))
        assert moved[0] != base[0] and moved[1] != base[1], path


def test_template_metadata_moves_no_hash():
    meta = {"labels": {"team": "gpu"}, "annotations": {"rotated": "2"}}
    assert both_hypervisor_hashes(changed(HV_META, meta)) == both_hypervisor_hashes(SPEC)
    wk_meta = ["componentConfig", "worker", "podTemplate", "template", "metadata"]
    assert hashes.worker_hash(changed(wk_meta, meta)) == hashes.worker_hash(SPEC)


def test_vector_image_counts_only_with_enable_vector():
    vec = ["componentConfig", "hypervisor", "vectorImage"]
    assert both_hypervisor_hashes(changed(vec, "vector:2")) == both_hypervisor_hashes(SPEC)
    on = changed(["componentConfig", "hypervisor", "enableVector"], True)
    on_new = copy.deepcopy(on)
    on_new["componentConfig"]["hypervisor"]["vectorImage"] = "vector:2"
    assert both_hypervisor_hashes(on_new)[0] != both_hypervisor_hashes(on)[0]


def test_provider_revisions_and_operator_version_move_the_hypervisor_hash():
    base = both_hypervisor_hashes(SPEC)
    assert both_hypervisor_hashes(SPEC, revisions='{"nvidia":"x"}')[0] != base[0]
    assert both_hypervisor_hashes(SPEC, version="2.17.0") != base
    # The per-node hash takes only the node's own vendor revision; keys are case-insensitive.
    assert both_hypervisor_hashes(SPEC, revisions='{"amd":"y"}')[1] == base[1]
    assert both_hypervisor_hashes(SPEC, revisions='{"NVIDIA":"x"}')[1] == \
        both_hypervisor_hashes(SPEC, revisions='{"nvidia":"x"}')[1] != base[1]


def test_isolation_policy_is_hashed_only_outside_the_dynamic_policy():
    hard = changed(["nodeManagerConfig", "defaultIsolationMode"], "hard")
    rules = changed(["nodeManagerConfig", "isolationModeRules"],
                    [{"mode": "hard", "selector": {"matchLabels": {"a": "b"}}}])
    for spec in (hard, rules):
        assert hashes.hypervisor_pool_hash(spec, "", "v", "dynamic") == \
            hashes.hypervisor_pool_hash(SPEC, "", "v", "dynamic")
        assert hashes.hypervisor_pool_hash(spec, "", "v", "static") != \
            hashes.hypervisor_pool_hash(SPEC, "", "v", "static")
    # Per node, only the node's resolved mode counts.
    assert both_hypervisor_hashes(SPEC, mode="hard")[1] != both_hypervisor_hashes(SPEC)[1]


def test_rolling_policy_moves_no_hash():
    policy_only = changed(["nodeManagerConfig", "nodePoolRollingUpdatePolicy", "batchPercentage"],
                          50)
    assert both_hypervisor_hashes(policy_only) == both_hypervisor_hashes(SPEC)
    assert hashes.worker_hash(policy_only) == hashes.worker_hash(SPEC)
    assert hashes.client_hash(policy_only) == hashes.client_hash(SPEC)


def test_resolve_isolation_mode_first_matching_rule_wins():
    spec = changed(["nodeManagerConfig", "isolationModeRules"], [
        {"mode": "hard", "selector": {"matchLabels": {"tier": "a"}}},
        {"mode": "shared", "selector": {"matchExpressions": [
            {"key": "tier", "operator": "In", "values": ["a", "b"]}]}}])
    assert hashes.resolve_isolation_mode(spec, {"tier": "a"}) == "hard"
    assert hashes.resolve_isolation_mode(spec, {"tier": "b"}) == "shared"
    assert hashes.resolve_isolation_mode(spec, {"tier": "c"}) == "soft"


def test_worker_hash_is_its_pod_spec_image_and_the_hypervisor_port_only():
    w = hashes.worker_hash(SPEC)
    wk_spec = ["componentConfig", "worker", "podTemplate", "template", "spec"]
    assert hashes.worker_hash(changed(wk_spec, {"imagePullSecrets": [{"name": "r"}]})) != w
    assert hashes.worker_hash(changed(["componentConfig", "worker", "image"], "wk:2")) != w
    assert hashes.worker_hash(changed(["componentConfig", "hypervisor", "portNumber"], 9)) != w
    assert hashes.worker_hash(changed(["componentConfig", "hypervisor", "image"], "hv:9")) == w
    assert hashes.worker_hash(changed(HV_SPEC, {"containers": [{"name": "x"}]})) == w


def test_client_hash_is_the_injection_spec():
    c = hashes.client_hash(SPEC)
    assert hashes.client_hash(changed(["componentConfig", "hypervisor", "portNumber"], 9)) == c
    assert hashes.client_hash(changed(["componentConfig", "client", "remoteModeImage"], "x")) == c
    assert hashes.client_hash(changed(["componentConfig", "client", "image"], "cl:2")) != c
    assert hashes.client_hash(changed(["componentConfig", "client", "patchToPod"],
                                      {"spec": {"x": 1}})) != c


def test_committed_crds_match_generator():
    for plural, body in crds.all_crds().items():
        path = crds.CRD_DIR / f"{crds.GROUP}_{plural}.yaml"
        assert yaml.safe_load(path.read_text()) == body, f"regenerate {path}"


def test_the_pool_policy_has_upstreams_defaults_and_no_autoupdate():
    pool = crds.all_crds()["gpupools"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    policy = (pool["properties"]["spec"]["properties"]["nodeManagerConfig"]["properties"]
              ["nodePoolRollingUpdatePolicy"]["properties"])
    assert "autoUpdate" not in policy and "default" not in policy["autoUpdateHypervisor"]
    assert policy["batchPercentage"] == {"type": "integer", "format": "int32", "default": 100,
                                         "minimum": 0, "maximum": 100}


def with_hypervisor_template(containers, enable_vector=False, **spec_fields):
    spec = copy.deepcopy(SPEC)
    hv = spec["componentConfig"]["hypervisor"]
    hv["enableVector"] = enable_vector
    hv["podTemplate"] = {"template": {"spec": {"containers": containers, **spec_fields}}}
    return spec


HV_ONE = [{"name": "tensor-fusion-hypervisor", "env": [{"name": "TF_LOG_LEVEL", "value": "info"}]}]
VERSION_ENV = {"name": "TFOPS_SECRET_VERSION_X", "value": "uid-1:2"}


def with_env(containers, env):
    return [dict(c, env=list(c.get("env") or []) + [env]) for c in containers]


def test_a_template_whose_container_count_fits_enable_vector_is_hashed_with_its_containers():
    base = both_hypervisor_hashes(with_hypervisor_template(HV_ONE))
    assert both_hypervisor_hashes(with_hypervisor_template(with_env(HV_ONE, VERSION_ENV))) != base
    two = HV_ONE + [{"name": "vector", "env": []}]
    base = both_hypervisor_hashes(with_hypervisor_template(two, enable_vector=True))
    moved = with_hypervisor_template(with_env(two, VERSION_ENV), enable_vector=True)
    assert both_hypervisor_hashes(moved) != base


def test_containers_are_dropped_when_their_count_does_not_fit_enable_vector():
    """With the vector sidecar the operator wants two containers, without it one; another
    number and it builds the list itself: the template's env (a licence, a rotation's Secret
    version) is then neither in the Pods nor in the hash."""
    for containers, vector in ((HV_ONE, True), (HV_ONE * 2, False), ([], False), ([], True)):
        base = both_hypervisor_hashes(with_hypervisor_template(containers, vector))
        marked = with_hypervisor_template(with_env(containers, VERSION_ENV), vector)
        assert both_hypervisor_hashes(marked) == base, (len(containers), vector)
        # The rest of the spec still counts.
        pulled = with_hypervisor_template(containers, vector, imagePullSecrets=[{"name": "r2"}])
        assert both_hypervisor_hashes(pulled)[0] != base[0]
        assert both_hypervisor_hashes(pulled)[1] != base[1]
    # Switching enableVector on over a one-container template drops that container too.
    assert hashes.hypervisor_containers(with_hypervisor_template(HV_ONE, True)[
        "componentConfig"]["hypervisor"]) == [{"name": "tensorfusion-hypervisor"}, {"name": "vector"}]
    assert hashes.hypervisor_containers(with_hypervisor_template([], False)[
        "componentConfig"]["hypervisor"]) == [{"name": "tensorfusion-hypervisor"}]


def test_a_template_without_containers_hashes_as_the_code_default_list():
    """No podTemplate at all and a template with an empty spec render the same Pod."""
    bare = copy.deepcopy(SPEC)
    assert both_hypervisor_hashes(bare) == both_hypervisor_hashes(with_hypervisor_template([]))


def test_a_quantity_written_another_way_moves_no_hash_as_upstream():
    """Upstream hashes the template after Go reads it: cpu 1000m and "1" are one hash (#47)."""
    def with_cpu(comp, cpu):
        return changed(["componentConfig", comp, "podTemplate", "template", "spec"],
                       {"containers": [{"name": "tensorfusion-%s" % comp, "resources": {"requests": {"cpu": cpu}}}]})
    assert both_hypervisor_hashes(with_cpu("hypervisor", "1000m")) == both_hypervisor_hashes(with_cpu("hypervisor", "1"))
    assert both_hypervisor_hashes(with_cpu("hypervisor", "1000m")) != both_hypervisor_hashes(with_cpu("hypervisor", "2"))
    assert hashes.worker_hash(with_cpu("worker", "1000m")) == hashes.worker_hash(with_cpu("worker", 1))
    assert hashes.worker_hash(with_cpu("worker", "1000m")) != hashes.worker_hash(with_cpu("worker", "1500m"))
