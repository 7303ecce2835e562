"""rbac_access's pure parts: which roles and bindings, what changed, the access checks, the
kubeconfig and the private file."""
import json
import os
import stat

import pytest
import yaml

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import access
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), *[os.pardir] * 6))  # tests/unit/plugins/module_utils/_tfops/cluster
RBAC = os.path.join(REPO, "roles", "rbac", "files")


def docs(name):
    with open(os.path.join(RBAC, name)) as handle:
        return access.expand_lists([d for d in yaml.safe_load_all(handle) if d])


def test_every_manifest_is_a_commented_role_with_rules():
    index = yaml.safe_load(open(os.path.join(RBAC, "runbooks.yml")))
    files = set(f for fs in index["runbooks"].values() for f in fs)
    files |= {index["helm_chart"]["file"], index["report"]["file"]}
    for name in files:
        text = open(os.path.join(RBAC, name)).read()
        for doc in docs(name):
            assert doc["kind"] in ("ClusterRole", "Role") and doc["rules"]
        # every rule is preceded by a comment line saying which module step needs it
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.strip().startswith("- apiGroups:"):
                assert lines[i - 1].strip().startswith("#"), "%s:%d has no comment" % (name, i + 1)


def test_precheck_is_read_only():
    for doc in docs("precheck.yml"):
        for rule in doc["rules"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule


def test_roles_move_to_the_release_namespace_but_others_stay_and_duplicates_merge():
    manifests = docs("precheck.yml") + docs("helm-chart.yml") + docs("precheck.yml")
    roles = access.desired_roles(manifests, "tf")
    where = sorted((r["kind"], r["metadata"].get("namespace")) for r in roles)
    assert ("Role", "tf") in where and ("Role", "greptimedb") in where
    assert ("Role", "tensor-fusion-sys") not in where
    assert len(roles) == 5
    assert all(r["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "tensorfusion.ops" for r in roles)


def test_bad_manifests_are_refused():
    with pytest.raises(InvalidInput, match="only ClusterRole and Role"):
        access.desired_roles([{"kind": "Secret", "metadata": {"name": "x"}}])
    with pytest.raises(InvalidInput, match="no namespace"):
        access.desired_roles([{"kind": "Role", "metadata": {"name": "x"}, "rules": []}])
    a = {"kind": "ClusterRole", "metadata": {"name": "x"}, "rules": [{"verbs": ["get"]}]}
    b = {"kind": "ClusterRole", "metadata": {"name": "x"}, "rules": [{"verbs": ["list"]}]}
    with pytest.raises(InvalidInput, match="twice"):
        access.desired_roles([a, b])


def test_binding_and_plan():
    [role] = access.desired_roles([{"kind": "Role", "metadata": {"name": "r", "namespace": "n"},
                                    "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]}])
    binding = access.binding_for(role, "sa", "ns")
    assert binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] == "n"
    assert binding["metadata"]["name"] == "r.ns.sa", "a binding per ServiceAccount"
    assert len(access.binding_name("r", "s" * 300, "ns")) <= 253
    assert access.binding_name("r", "s" * 300, "ns") != access.binding_name("r", "t" * 300, "ns")
    assert access.is_legacy_binding_of({"subjects": [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]},
                                       "sa", "ns")
    assert not access.is_legacy_binding_of({"subjects": [{"kind": "ServiceAccount", "name": "other", "namespace": "ns"}]},
                                           "sa", "ns")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}]
    assert access.plan(None, binding) == "create"
    served = json.loads(json.dumps(binding))
    served["metadata"].update(resourceVersion="7", uid="u", labels=dict(binding["metadata"]["labels"], other="x"))
    assert access.plan(served, binding) == "none"
    served["subjects"][0]["name"] = "other"
    assert access.plan(served, binding) == "update"
    served["roleRef"]["name"] = "other"
    assert access.plan(served, binding) == "recreate"
    served_role = json.loads(json.dumps(role))
    served_role["rules"][0]["resourceNames"] = None  # what the server may return
    assert access.plan(served_role, role) == "none"


def test_access_checks_one_per_verb_resource_and_name():
    roles = access.desired_roles(docs("upgrade.yml"))
    checks = [c["attributes"] for c in access.access_checks(roles)]
    lease_update = {"verb": "update", "group": "coordination.k8s.io", "resource": "leases",
                    "subresource": None, "name": "tensorfusion-ops-maintenance",
                    "namespace": "tensor-fusion-sys"}
    assert lease_update in checks
    assert access.check_text(lease_update) == \
        "update leases.coordination.k8s.io/tensorfusion-ops-maintenance in tensor-fusion-sys"
    kube_system = [c for c in checks if c["resource"] == "namespaces"][0]
    assert access.check_text(kube_system) == "get namespaces/kube-system (cluster-wide)"
    assert len(checks) == len(set(json.dumps(c, sort_keys=True) for c in checks))


def test_kubeconfig_text_and_private_file(tmp_path):
    text = access.kubeconfig_text("https://h:6443", "Q0E=", "tok", "sa")
    data = json.loads(text)
    assert data["users"][0]["user"] == {"token": "tok"}
    assert data["clusters"][0]["cluster"]["certificate-authority-data"] == "Q0E="
    path = tmp_path / "kc"
    os.umask(0o022)
    assert access.write_private(str(path), text) is True
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert access.write_private(str(path), text) is False
    os.chmod(path, 0o644)
    assert access.write_private(str(path), text, check_mode=True) is True
    assert access.write_private(str(path), text) is True and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert os.listdir(tmp_path) == ["kc"], "no temporary file left"
    assert access.remove_file(str(path)) is True and access.remove_file(str(path)) is False
