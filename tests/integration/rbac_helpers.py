"""ServiceAccounts bound to exactly a runbook's RBAC (the manifests of roles/rbac/files, applied with the
collection's own rbac_access code), with a 0600 kubeconfig for their token, for any test that
wants to run a runbook or a module as AWX would instead of as an administrator.

    def test_x(lab, sa_kubeconfig):       # the fixture lives in tests/integration/conftest.py
        path = sa_kubeconfig("upgrade")                              # exactly the upgrade runbook
        path = sa_kubeconfig("precheck", drop=("Role", "secrets", "list"))  # one permission less

Every ServiceAccount gets its own copies of the roles (named <role>--<sa>), so a test that drops a
rule never weakens another test's ServiceAccount; everything is removed at the end of the session.
"""
import hashlib
import json
import os
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
RBAC_DIR = REPO / "roles" / "rbac" / "files"
NAMESPACE = "tensor-fusion-sys"


def runbook_files(runbook, helm_chart=True):
    """The manifest files a runbook (or a tuple of runbooks) binds, as roles/rbac/files/runbooks.yml
    (and the rbac role, with rbac_report true) say."""
    index = yaml.safe_load((RBAC_DIR / "runbooks.yml").read_text())
    files = []
    for name in (runbook,) if isinstance(runbook, str) else runbook:
        files += [f for f in index["runbooks"][name] if f not in files]
        for part, on in ((index["helm_chart"], helm_chart), (index["report"], True)):
            if on and name in part["runbooks"] and part["file"] not in files:
                files.append(part["file"])
    return files


def runbook_manifests(runbook, helm_chart=True):
    docs = []
    for name in runbook_files(runbook, helm_chart):
        for doc in yaml.safe_load_all((RBAC_DIR / name).read_text()):
            docs += doc["items"] if doc.get("kind") == "List" else [doc]
    return docs


def without(manifests, kind, resource, verb, role=None):
    """The manifests with ``verb`` on ``resource`` taken out of every rule of the ``kind`` roles
    (optionally only the role named ``role``); a rule left without verbs goes. Fails when nothing
    was taken out (a test must remove a rule that exists)."""
    out, removed = [], 0
    for doc in manifests:
        doc = json.loads(json.dumps(doc))
        if doc["kind"] == kind and (role is None or doc["metadata"]["name"] == role):
            rules = []
            for rule in doc.get("rules") or []:
                if resource in rule.get("resources", []) and verb in rule.get("verbs", []):
                    removed += 1
                    others = [r for r in rule["resources"] if r != resource]
                    if others:
                        rules.append(dict(rule, resources=others))
                    verbs = [v for v in rule["verbs"] if v != verb]
                    if verbs:
                        rules.append(dict(rule, resources=[resource], verbs=verbs))
                else:
                    rules.append(rule)
            doc["rules"] = rules
        out.append(doc)
    assert removed, "no %s rule grants %s %s" % (kind, verb, resource)
    return out


def _admin_kube(lab):
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import resolve_auth
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import Kube
    return Kube(resolve_auth({"kubeconfig": lab["kubeconfig"]}, environ={}))


class ServiceAccounts:
    def __init__(self, lab, directory):
        self.lab = lab
        self.directory = directory
        self.made = {}  # key -> (path, objects)

    def __call__(self, runbook, drop=None, helm_chart=True):
        """Path of a 0600 kubeconfig for a ServiceAccount bound to exactly ``runbook``'s roles
        (a tuple of runbooks: all of theirs),
        minus ``drop`` = (kind, resource, verb) or (kind, resource, verb, role name), or a list of them."""
        key = (runbook, repr(drop), helm_chart)
        if key not in self.made:
            self.made[key] = self._make(runbook, drop, helm_chart)
        return self.made[key][0]

    def _make(self, runbook, drop, helm_chart):
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import access
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
        manifests = runbook_manifests(runbook, helm_chart)
        label = runbook if isinstance(runbook, str) else "-".join(runbook)
        name = "tfops-it-%s%s%s" % (label, "" if helm_chart else "-nohelm",
                                    "-" + hashlib.sha1(repr(drop).encode()).hexdigest()[:6] if drop else "")
        for one in (drop if drop and isinstance(drop[0], (tuple, list)) else [drop] if drop else []):
            manifests = without(manifests, *one)
        for doc in manifests:
            doc["metadata"]["name"] = "%s--%s" % (doc["metadata"]["name"], name)
        roles = access.desired_roles(manifests, NAMESPACE)
        secret = access.token_secret(name + "-token", name, NAMESPACE)
        objects = [access.service_account(name, NAMESPACE)] + roles + \
            [access.binding_for(r, name, NAMESPACE) for r in roles] + [secret]
        kube = _admin_kube(self.lab)
        try:
            work = access.Access(kube, check_mode=False)
            for obj in objects:
                work.apply(obj)
            # Right after an API server outage test, kube-controller-manager's token controller may
            # still be in its informers' back-off (CI: over 60 s once, the ns fixture saw the same).
            token, ca_data = work.token(secret, Deadline(timeout=180))
            server = kube.server
        finally:
            kube.close()
        path = os.path.join(self.directory, name + ".kubeconfig")
        access.write_private(path, access.kubeconfig_text(server, ca_data, token, name))
        self._wait_effective(path, roles)
        return path, objects

    @staticmethod
    def _wait_effective(path, roles):
        """RBAC changes reach the authorizer through an informer: wait (bounded) until the
        token holds the first rule of its roles."""
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import access
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import resolve_auth
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import Kube
        checks = access.access_checks(roles)[:1]
        kube = Kube(resolve_auth({"kubeconfig": path}, environ={}))
        try:
            end = time.monotonic() + 20
            while access.missing_access(kube, checks):
                assert time.monotonic() < end, "the ServiceAccount's roles never took effect"
                time.sleep(0.2)
        finally:
            kube.close()

    def token(self, runbook, drop=None, helm_chart=True):
        """The token in a kubeconfig made here (for the secrecy audit's canaries)."""
        data = json.loads(Path(self(runbook, drop, helm_chart)).read_text())
        return data["users"][0]["user"]["token"]

    def remove_all(self):
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import access
        kube = _admin_kube(self.lab)
        try:
            work = access.Access(kube, check_mode=False)
            for _path, objects in self.made.values():
                for obj in reversed(objects):
                    work.remove(obj)
        finally:
            kube.close()


def service_accounts(lab):
    """The body of the session fixture ``sa_kubeconfig`` (tests/integration/conftest.py): a
    function (runbook, drop=None, helm_chart=True) -> kubeconfig path; see the module doc."""
    directory = tempfile.mkdtemp(prefix="tfops-sa-")
    accounts = ServiceAccounts(lab, directory)
    yield accounts
    accounts.remove_all()
    for name in os.listdir(directory):
        os.unlink(os.path.join(directory, name))
    os.rmdir(directory)
