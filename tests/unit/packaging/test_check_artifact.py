"""tests/check_artifact.py, the galaxy build step's check of what the artifact ships, on small
artifacts built here: each rule must be able to fail."""
import importlib.util
import io
import subprocess
import tarfile

import pytest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "check_artifact.py"
SPEC = importlib.util.spec_from_file_location("check_artifact", SCRIPT)
check_artifact = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(check_artifact)


def action(module):
    return 'from x import module_action\n\nActionModule = module_action("%s")\n' % module


class Link(str):
    """A symbolic link in an artifact: its target."""


MINIMAL = {"MANIFEST.json": "{}", "FILES.json": "{}", "COPYING": "GPL", "meta/runtime.yml": "---",
           "plugins/modules/m.py": "", "plugins/action/m.py": action("m"), "roles/rbac/files/precheck.yml": "---",
           "playbooks/precheck.yml": "---", "docs/rbac/README.md": "rules"}


def artifact(tmp_path, files):
    path = tmp_path / "tensorfusion-ops-0.1.0.tar.gz"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            info = tarfile.TarInfo(name)
            if isinstance(text, Link):
                info.type, info.linkname = tarfile.SYMTYPE, str(text)
                tar.addfile(info)
                continue
            data = text.encode()
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return path


def source_tree(tmp_path, top_level=("lab", "tests", "docs", "roles", "playbooks", "plugins")):
    tree = tmp_path / "src"
    for name in top_level:
        (tree / name).mkdir(parents=True)
        (tree / name / "x").write_text("")
    subprocess.run(["git", "init", "-q", str(tree)], check=True)
    subprocess.run(["git", "-C", str(tree), "add", "."], check=True)
    return tree


def test_a_clean_artifact_passes(tmp_path):
    readme = ("See [the runbooks](playbooks/precheck.yml), `roles/rbac/files/`, "
              "https://example.org/tests/x and group/tensorfusion.ops.tfops.\n"
              "From the source tree: `demo/run.sh` and `tests/run-all.sh`.\n")
    page = "The files: [here](../../roles/rbac/files/precheck.yml), `plugins/modules/`.\n"
    path = artifact(tmp_path, dict(MINIMAL, **{"README.md": readme, "docs/rbac/README.md": page}))
    assert check_artifact.check(path, source_tree(tmp_path)) == []


def test_unlisted_and_missing_top_level_entries_are_named(tmp_path):
    files = dict(MINIMAL, **{"README.md": "`demo/run.sh`, `tests/run-all.sh`",
                             ".ansible/collections/x": "", "lab/up.py": ""})
    del files["COPYING"]
    problems = check_artifact.check(artifact(tmp_path, files), source_tree(tmp_path))
    assert problems == [
        "top-level entry '.ansible' is not in the allow-list of tests/check_artifact.py",
        "top-level entry 'lab' is not in the allow-list of tests/check_artifact.py",
        "required top-level entry 'COPYING' is missing",
    ]


def test_references_to_what_is_not_shipped_are_named(tmp_path):
    readme = ("[design](../shared/docs/design.md) [demo](demo/run.sh)\n"
              "Run `tests/run-all.sh`; the design is in `../shared/docs/design.md`.\n"
              "```bash\nsource tests/env.sh\npython -m lab up\n```\n")
    page = ("[the tests](../tests/x) [fine](../playbooks/precheck.yml) `playbooks/missing.yml`\n"
            "Only README.md may name `tests/run-all.sh`.\n")
    path = artifact(tmp_path, dict(MINIMAL, **{"README.md": readme, "docs/guide.md": page}))
    assert check_artifact.check(path, source_tree(tmp_path)) == [
        "README.md does not name the source tree's command demo/run.sh",
        "README.md links to ../shared/docs/design.md, which the artifact does not ship",
        "README.md links to demo/run.sh, which the artifact does not ship",
        "README.md refers to ../shared/docs/design.md, which the artifact does not ship",
        "README.md refers to tests/env.sh, which the artifact does not ship",
        "docs/guide.md links to ../tests/x, which the artifact does not ship",
        "docs/guide.md refers to playbooks/missing.yml, which the artifact does not ship",
        "docs/guide.md refers to tests/run-all.sh, which the artifact does not ship",
    ]


def test_pages_outside_readme_and_docs_are_not_checked(tmp_path):
    readme = "`demo/run.sh`, `tests/run-all.sh`"
    files = dict(MINIMAL, **{"README.md": readme, "roles/rbac/README.md": "`tests/x`"})
    assert check_artifact.check(artifact(tmp_path, files), source_tree(tmp_path)) == []


KUBECONFIG_YAML = ("apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster: {server: https://x}\n"
                   "users:\n- name: admin\n  user: {token: abc}\n")


@pytest.mark.parametrize("name, text, problem", [
    ("lab-state/.tfops-lab-state", "created by python -m lab up", "a lab state folder is shipped"),
    ("lab-state/pki/ca.key", "-----BEGIN PRIVATE KEY-----\nMIIE\n-----END PRIVATE KEY-----\n", "holds a private key"),
    ("roles/x/files/sa.key", "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n", "holds a private key"),
    ("lab-state/tokens.csv", "abc,admin,uid,system:masters\n", "a token or kubeconfig file is shipped"),
    ("lab-state/kubeconfig", KUBECONFIG_YAML, "a token or kubeconfig file is shipped"),
    ("playbooks/files/prod.yml", KUBECONFIG_YAML, "is a kubeconfig"),
    ("extensions/x.json", '{"apiVersion": "v1", "kind": "Config", "clusters": [], "users": []}', "is a kubeconfig"),
    ("docs/x.md", "token: eyJhbGciOiJSUzI1NiIsImtpZCI6.eyJpc3MiOiJrdWJlcm5ldGVzL3NlcnZp.c2lnbmF0dXJlLXBhcnQ", "holds a token (a JWT)"),
])
def test_credentials_in_the_artifact_are_named(tmp_path, name, text, problem):
    """#36: a lab started with its state inside the tree shipped its keys and token file."""
    path = artifact(tmp_path, dict(MINIMAL, **{"README.md": "", name: text}))
    found = check_artifact.check(path, source_tree(tmp_path))
    assert any(name in p and problem in p for p in found), found


def test_code_that_builds_a_kubeconfig_is_no_kubeconfig(tmp_path):
    code = 'CONFIG = {"apiVersion": "v1", "kind": "Config", "clusters": [], "users": []}\n'
    path = artifact(tmp_path, dict(MINIMAL, **{"README.md": "", "plugins/module_utils/k.py": code}))
    assert not [p for p in check_artifact.check(path, source_tree(tmp_path)) if "k.py" in p]


def test_action_plugins_that_do_not_run_their_own_module_or_are_links_are_named(tmp_path):
    """#40: every module's action plugin but runbook_inputs' is the one line naming its module;
    none is a link (antsibull-docs reads an action link as the module being an alias)."""
    files = dict(MINIMAL, **{
        "README.md": "`demo/run.sh`, `tests/run-all.sh`",
        "plugins/modules/other.py": "", "plugins/action/other.py": action("m"),
        "plugins/modules/linked.py": "", "plugins/action/linked.py": Link("m.py"),
        "plugins/modules/own.py": "", "plugins/action/own.py": "class ActionModule: pass\n",
        "plugins/modules/runbook_inputs.py": "", "plugins/action/runbook_inputs.py": "class ActionModule: pass\n",
        "plugins/modules/bare.py": "",
    })
    assert check_artifact.check(artifact(tmp_path, files), source_tree(tmp_path)) == [
        "module bare has no action plugin (plugins/action/bare.py)",
        "plugins/action/linked.py is a link (to m.py): antsibull-docs would document its module as an alias",
        'plugins/action/other.py is not ActionModule = module_action("other")',
        'plugins/action/own.py is not ActionModule = module_action("own")',
    ]
