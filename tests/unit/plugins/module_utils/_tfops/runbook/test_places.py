"""runbook/places.py and the runbooks' path variables (#46 item 2): a path is resolved and must lie
in a folder its kind allows; a file outside is refused before it is read."""
import os

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import inputs
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import places as where

HELM = "/usr/bin/helm"


@pytest.fixture
def project(tmp_path):
    """A project folder with a values file, a chart and a kubeconfig, and a folder outside it."""
    root = tmp_path / "project"
    (root / "chart").mkdir(parents=True)
    (root / "chart" / "Chart.yaml").write_text("name: c\nversion: 1.0.0\n")
    (root / "values.yaml").write_text("a: 1\n")
    (root / "kubeconfig").write_text("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: https://k}}]\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secrets.yaml").write_text("token: s3cr3t\n")
    return root


def check(playbook, project, environ=None, **given):
    environ = dict({"PATH": "/usr/bin:/bin"}, **(environ or {}))
    places = inputs.places_for(given, project=[str(project)], environ=environ)
    return inputs.check(playbook, given, helm_on_path=HELM, places=places)[1]


def test_files_in_the_project_pass(project):
    assert check("upgrade", project, tfops_values_files=[str(project / "values.yaml")],
                 tfops_values_cn=str(project / "values.yaml"), tfops_chart=str(project / "chart"),
                 tfops_kubeconfig=str(project / "kubeconfig")) == []


@pytest.mark.parametrize("variable, value, kind", [
    ("tfops_values_files", ["{outside}/secrets.yaml"], "read files from"),
    ("tfops_values_cn", "{project}/../outside/secrets.yaml", "read files from"),
    ("tfops_chart", "{project}/../outside", "read files from"),
    ("tfops_helm_extra_args", "--ca-file={outside}/secrets.yaml", "read files from"),
    ("tfops_helm_extra_args", ["--key-file", "{outside}/secrets.yaml"], "read files from"),
    ("tfops_kubeconfig", "{outside}/secrets.yaml", "read a kubeconfig from"),
    ("tfops_plan", "{outside}/secrets.yaml", "read files from"),
])
def test_a_file_outside_is_refused_by_name_and_never_read(project, variable, value, kind):
    outside = project.parent / "outside"
    value = [v.format(project=project, outside=outside) for v in value] if isinstance(value, list) \
        else value.format(project=project, outside=outside)
    found = check("upgrade", project, **{variable: value})
    assert len(found) == 1 and found[0].startswith(variable) and "is outside the folders a runbook may %s" % kind \
        in found[0] and "TFOPS_ALLOWED_PATHS" in found[0], found
    assert "s3cr3t" not in found[0]
    # The controller's opt-in allows it (the file's own check may still refuse it).
    allowed = check("upgrade", project, environ={"TFOPS_ALLOWED_PATHS": str(outside)}, **{variable: value})
    assert not any("is outside" in p for p in allowed), allowed


def test_a_link_in_the_project_to_a_file_outside_is_refused(project):
    (project / "innocent.yaml").symlink_to(project.parent / "outside" / "secrets.yaml")
    found = check("upgrade", project, tfops_values_files=[str(project / "innocent.yaml")])
    assert len(found) == 1 and "is outside the folders" in found[0] and "outside/secrets.yaml" in found[0], found


def test_a_relative_path_is_the_working_directory_s(project, monkeypatch):
    monkeypatch.chdir(project)
    assert check("upgrade", project, tfops_values_files=["values.yaml"]) == []
    found = check("upgrade", project, tfops_values_files=["../outside/secrets.yaml"])
    assert "is outside" in found[0], found


def test_the_runbook_s_own_folders_are_read_from_once_allowed_themselves(project, tmp_path):
    bundle = project.parent / "outside" / "bundle"
    bundle.mkdir()
    home = os.path.expanduser("~")
    # A snapshot folder outside the home folder and the project is refused, and so not a place to
    # read from: tfops_snapshot_dir=/etc cannot open /etc to the other variables.
    found = check("rollback", project, tfops_snapshot_dir=str(project.parent / "outside"), tfops_snapshot=str(bundle))
    if not str(tmp_path).startswith(home):
        assert any(p.startswith("tfops_snapshot_dir") and "may write to" in p for p in found), found
        assert any(p.startswith("tfops_snapshot:") and "is outside" in p for p in found), found
    inside = project / "snapshots" / "b1"
    inside.mkdir(parents=True)
    assert check("rollback", project, tfops_snapshot_dir=str(project / "snapshots"), tfops_snapshot=str(inside)) == []


def test_root_never_counts(project):
    found = check("upgrade", project, environ={"TFOPS_ALLOWED_PATHS": "/"}, tfops_values_files=["/etc/hostname"])
    assert "is outside" in found[0], found
    assert where.Places([os.sep], {}).folders[where.READ] == [], "the project / is no folder either"


def test_a_program_is_one_on_path_or_in_the_project_and_named_like_what_it_stands_for(project, tmp_path):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    real = tmp_path / "opt-helm"
    real.mkdir()
    (real / "helm").write_text("#!/bin/sh\n")
    (real / "helm").chmod(0o755)
    (bindir / "helm").symlink_to(real / "helm")  # a PATH entry that links to where helm is
    env = {"PATH": str(bindir)}
    assert check("upgrade", project, environ=env, tfops_helm_binary=str(bindir / "helm")) == []
    found = check("upgrade", project, environ=env, tfops_helm_binary="/bin/rm")
    assert found and found[0].startswith("tfops_helm_binary: /bin/rm (") and "run a program from" in found[0], found
    (bindir / "rm").symlink_to("/bin/rm")
    assert check("upgrade", project, environ=env, tfops_helm_binary=str(bindir / "rm")) == [
        "tfops_helm_binary: %s is not helm (its name does not begin with helm)" % (bindir / "rm")]
    assert check("upgrade", project, environ=env, tfops_python_interpreter=str(bindir / "helm")) == [
        "tfops_python_interpreter: %s is not python (its name does not begin with python)" % (bindir / "helm")]


def test_a_kubeconfig_may_be_where_the_environment_names_one(project, tmp_path):
    creds = tmp_path / "awx-private" / "env"
    creds.mkdir(parents=True)
    (creds / "kubeconfig").write_text((project / "kubeconfig").read_text())
    given = str(creds / "kubeconfig")
    assert "is outside" in check("precheck", project, tfops_kubeconfig=given)[0]
    assert check("precheck", project, environ={"K8S_AUTH_KUBECONFIG": given}, tfops_kubeconfig=given) == []


def test_names_and_references_are_not_paths(project):
    assert check("upgrade", project, tfops_chart="tensor-fusion") == []
    assert check("upgrade", project, tfops_values_files=["https://example.com/values.yaml"]) == []
    found = check("rollback", project, tfops_snapshot="secret://tensor-fusion-sys/tfops-snap-1")
    assert not any("outside" in p for p in found), found


def test_every_path_variable_of_every_runbook_is_confined():
    """A variable whose check reads or writes the controller's files has a place (inputs.PATHS)."""
    path_checks = {"existing_file", "executable", "folder", "file_to_write", "values_file", "chart_ref",
                   "kubeconfig", "plan", "snapshot", "helm_args", "url_or_file"}
    for variable in inputs.SPEC:
        check_name = getattr(variable.check, "__name__", "")
        inner = getattr(variable.check, "element", None)
        if check_name in path_checks or getattr(inner, "__name__", "") in path_checks:
            assert variable.name in inputs.PATHS, variable.name
