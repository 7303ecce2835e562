"""helm/release.py without a cluster: the upgrade's arguments and the command shown, input
validation, the flags a rollback takes from its snapshot."""
import re

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import release
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

from .test_cli import H4  # helpers shared with that file


def params(**over):
    base = dict(name="tensor-fusion-sys", namespace="tensor-fusion-sys", state="present",
                chart_ref="tensor-fusion", chart_repo_url="https://repo", chart_version="1.8.7",
                values_files=["https://repo/values-cn.yaml"], create_namespace=True,
                set_values=[{"value": "agent.agentId=", "value_type": "string"},
                            {"value": "agent.enrollToken=tok", "value_type": "raw"}],
                reset_values=True, reuse_values=False, reset_then_reuse_values=False,
                atomic=True, wait=True, skip_crds=False, revision=None, snapshot=None)
    base.update(over)
    return base


def test_upgrade_arguments_and_the_command_shown():
    args = release.upgrade_args(params(), (4, 1, 4), "/tmp/x/values.json")
    assert args[:6] == ["upgrade", "--install", "tensor-fusion-sys", "tensor-fusion", "--namespace",
                        "tensor-fusion-sys"]
    assert args[args.index("--repo") + 1] == "https://repo"
    assert ["-f", "https://repo/values-cn.yaml", "-f", "/tmp/x/values.json"] == \
        args[args.index("-f"):args.index("-f") + 4]
    assert "--set-string" in args and "agent.agentId=" in args and "--reset-values" in args
    full = args + release.write_args(params(), (4, 1, 4), 600)
    assert "--rollback-on-failure" in full and "--wait" in full and "600s" in full
    assert "--atomic" in release.write_args(params(), (3, 17, 2), 600)
    shown = helmcli.masked_command(["helm"] + full + ["--kubeconfig", "/tmp/x/kubeconfig"], "/tmp/x")
    assert "agent.enrollToken=tok" not in shown
    assert "agent.enrollToken=********" in shown and "<tmp>/kubeconfig" in shown
    assert "/tmp/x" not in shown and "agent.agentId=" in shown
    assert "--reuse-values" in release.upgrade_args(params(reuse_values=True), (3, 17, 2))
    with pytest.raises(InvalidInput):
        release.upgrade_args(params(reuse_values=False, reset_then_reuse_values=True), (3, 13, 0))
    # The task's helm flags, mapped to the major.
    flagged = params(disable_openapi_validation=True, no_hooks=True, extra_args=["--history-max=5"])
    assert release.upgrade_args(flagged, (3, 17, 2))[-3:] == [
        "--disable-openapi-validation", "--no-hooks", "--history-max=5"]
    assert release.upgrade_args(flagged, (4, 1, 4))[-4:] == [
        "--disable-openapi-validation", "--no-hooks", "--server-side=false", "--history-max=5"]
    assert "--skip-crds" in release.upgrade_args(params(skip_crds=True), (3, 17, 2))


def test_validate_refuses_bad_input():
    with pytest.raises(InvalidInput):
        release.validate(params(state="rolled_back"))
    with pytest.raises(InvalidInput):
        release.validate(params(state="rolled_back", revision=2, snapshot="/x"))
    with pytest.raises(InvalidInput):
        release.validate(params(set_values=[{"value": "novalue"}]))
    with pytest.raises(InvalidInput):
        release.validate(params(reuse_values=True, reset_then_reuse_values=True))
    release.validate(params(state="rolled_back", revision=2))
    checked = params(extra_args=["--history-max", "7"])
    release.validate(checked)
    assert checked["extra_args"] == ["--history-max=7"]
    with pytest.raises(InvalidInput) as err:
        release.validate(params(extra_args=["--kube-context=prod"]))
    assert "extra_args: '--kube-context=prod'" in err.value.msg


@pytest.mark.parametrize("over, message", [
    # #36: what was written (a revision) or ignored before.
    (dict(reuse_values=True), "reset_values and reuse_values are mutually exclusive"),
    (dict(reset_then_reuse_values=True), "reset_values and reset_then_reuse_values are mutually exclusive"),
    (dict(snapshot="secret://tensor-fusion-sys/x"), "snapshot goes with state: rolled_back; state: present would ignore it"),
    (dict(revision=3), "revision goes with state: rolled_back"),
    (dict(state="rolled_back", revision=2, signing_key="k" * 20), "signing_key goes with snapshot"),
    (dict(allow_unsigned=True), "allow_unsigned goes with snapshot"),
    (dict(chart_repo_url="not a url"), "chart_repo_url: 'not a url' is not an http:// or https:// URL"),
    (dict(chart_repo_url="ftp://repo.example"), "is not an http:// or https:// URL"),
    (dict(chart_repo_url="https://"), "is not an http:// or https:// URL"),
])
def test_validate_refuses_what_it_would_ignore_or_misread(over, message):
    with pytest.raises(InvalidInput, match=re.escape(message)):
        release.validate(params(**over))


def test_reset_values_unset_resets_unless_values_are_reused():
    assert "--reset-values" in release.upgrade_args(params(reset_values=None), (3, 17, 2))
    reused = params(reset_values=None, reuse_values=True)
    release.validate(reused)
    args = release.upgrade_args(reused, (3, 17, 2))
    assert "--reuse-values" in args and "--reset-values" not in args
    assert "--reset-values" not in release.upgrade_args(params(reset_values=False), (3, 17, 2))


def test_a_rollback_to_a_snapshot_uses_the_flags_the_upgrade_recorded():
    recorded = {"disable_openapi_validation": True, "skip_crds": False, "no_hooks": True,
                "extra_args": ["--history-max=20"]}
    unset = dict.fromkeys(helmcli.FLAG_OPTIONS)
    flags, sources = release.effective_flags(unset, recorded)
    assert flags == recorded and set(sources.values()) == {"snapshot"}
    # What the task sets wins, false and [] included; what neither sets is off.
    flags, sources = release.effective_flags(dict(unset, no_hooks=False, extra_args=[]), recorded)
    assert flags == dict(recorded, no_hooks=False, extra_args=[])
    assert sources == {"disable_openapi_validation": "snapshot", "skip_crds": "snapshot",
                       "no_hooks": "task", "extra_args": "task"}
    flags, sources = release.effective_flags(unset, None)  # an older bundle records none
    assert flags == {"disable_openapi_validation": False, "skip_crds": False, "no_hooks": False,
                     "extra_args": []} and set(sources.values()) == {"default"}
    # What a snapshot records: complete and normalised; a bad flag is refused at capture.
    assert release.recorded_flags({"disable_openapi_validation": True, "extra_args": ["--history-max", "5"]}) == \
        {"disable_openapi_validation": True, "skip_crds": False, "no_hooks": False, "extra_args": ["--history-max=5"]}
    assert release.recorded_flags(None) is None
    with pytest.raises(InvalidInput) as err:
        release.recorded_flags({"extra_args": ["--namespace=x"]})
    assert "helm_flags.extra_args" in err.value.msg
    # And the rollback's commands carry them.
    assert helmcli.flag_args(release.effective_flags(unset, recorded)[0], helmcli.ROLLBACK, H4) == \
        ["--no-hooks", "--server-side=false", "--history-max=20"]


def test_a_values_file_is_a_yaml_mapping_and_its_content_is_never_shown(tmp_path):
    """#46: any file's lines became the release's values (../../etc/shadow)."""
    good = tmp_path / "values.yaml"
    good.write_text("controller:\n  image: x\n")
    release.check_values_file(str(good))
    (tmp_path / "empty.yaml").write_text("")
    release.check_values_file(str(tmp_path / "empty.yaml"))
    release.check_values_file("https://example.com/values.yaml")  # helm's to fetch
    shadow = tmp_path / "shadow"
    shadow.write_text("root:$6$secrethash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n")
    with pytest.raises(InvalidInput) as caught:
        release.check_values_file(str(shadow), "tfops_values_files[0]")
    assert caught.value.msg == ("tfops_values_files[0]: %s is not a values file: none of its 2 keys has a value "
                                "(its content is not shown)" % shadow)
    passwd = tmp_path / "passwd"
    passwd.write_text("root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(InvalidInput, match="is not a mapping of Helm values but a YAML str"):
        release.check_values_file(str(passwd))
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: 1\nsecret-key: [unclosed\n")
    with pytest.raises(InvalidInput, match=r"is not YAML \(line \d+, column \d+\) \(its content is not shown\)") as caught:
        release.check_values_file(str(broken))
    assert "unclosed" not in caught.value.msg
    with pytest.raises(InvalidInput, match="is not a file on the controller"):
        release.check_values_file(str(tmp_path))
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: " + b"x" * (yamldoc.MAX_FILE_BYTES + 1))
    with pytest.raises(InvalidInput, match="not a values file"):
        release.check_values_file(str(big))


def test_a_chart_reference_that_names_a_local_path_is_a_chart(tmp_path):
    chart = tmp_path / "mychart"
    chart.mkdir()
    (chart / "Chart.yaml").write_text("name: mychart\n")
    for ok in (str(chart), "tensor-fusion", "repo/tensor-fusion", "oci://registry/charts/tf"):
        release.check_chart_ref(ok)
    with pytest.raises(InvalidInput, match="is a folder without Chart.yaml: not a chart"):
        release.check_chart_ref(str(tmp_path))
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(InvalidInput, match="is a file but not a packaged chart"):
        release.check_chart_ref(str(tmp_path / "notes.txt"))
    with pytest.raises(InvalidInput, match="does not exist on the controller"):
        release.check_chart_ref("./nosuch")
    with pytest.raises(InvalidInput, match="a chart reference is needed"):
        release.check_chart_ref("  ")
