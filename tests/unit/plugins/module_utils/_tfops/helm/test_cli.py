"""helm/cli.py without a cluster: the helm version and flag mapping, extra arguments, pending
detection and the kubeconfig."""
import base64

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    HelmError,
    InvalidInput,
)


def test_version_and_flag_mapping():
    assert helmcli.parse_version("v3.17.2+gcc0bbbd") == (3, 17, 2)
    assert helmcli.parse_version("v4.1.4") == (4, 1, 4)
    with pytest.raises(HelmError):
        helmcli.parse_version("garbage")
    assert helmcli.atomic_flag((3, 17, 2)) == "--atomic"
    assert helmcli.atomic_flag((4, 1, 4)) == "--rollback-on-failure"
    with pytest.raises(InvalidInput):
        helmcli.require_server_dry_run((3, 12, 0))
    helmcli.require_server_dry_run((3, 13, 0))
    helmcli.require_server_dry_run((4, 0, 0))


H3, H4 = (3, 17, 2), (4, 1, 4)


HELP_SAMPLE = """Flags:
      --cleanup-on-fail        allow deletion of new resources
  -h, --help                   help for upgrade
      --history-max int        limit the maximum number of revisions
  -o, --output format          prints the output
Global Flags:
      --qps float32            queries per second
"""


def test_extra_args_are_normalised_and_checked_against_the_allow_list():
    assert helmcli.parse_extra_args(["--history-max", "20", "--cleanup-on-fail", "--qps=50",
                                     "--wait-for-jobs=true", "--take-ownership=false", "-l", "a=b"]) == \
        ["--history-max=20", "--cleanup-on-fail", "--qps=50", "--wait-for-jobs", "--labels=a=b"]
    assert helmcli.parse_extra_args(None) == [] and helmcli.parse_extra_args([]) == []
    cases = {
        "--namespace=other": "from namespace", "-n": "from namespace", "--kubeconfig=/x": "authentication",
        "--dry-run=server": "check mode", "--wait": "from wait", "--install": "from state",
        "--skip-crds": "skip_crds", "--no-hooks": "no_hooks",
        "--disable-openapi-validation": "disable_openapi_validation", "--set=a=b": "set_values",
        "--debug": "not accepted", "--password=x": "not accepted", "--post-renderer=./x": "not accepted",
        "--frobnicate": "not a helm upgrade or rollback flag", "history-max=3": "not a helm flag",
        "--history-max": "needs a value", "--history-max=lots": "needs a number",
        "--server-side=yes": "must be one of", "--cleanup-on-fail=1": "takes no value",
    }
    for arg, words in cases.items():
        with pytest.raises(InvalidInput) as err:
            helmcli.parse_extra_args([arg])
        assert words in err.value.msg and "extra_args" in err.value.msg and repr(arg) in err.value.msg, err.value.msg
    with pytest.raises(InvalidInput) as err:
        helmcli.parse_extra_args(["--history-max", "--force"])
    assert "needs a value" in err.value.msg


def test_flags_per_helm_command_and_major():
    flags = {"disable_openapi_validation": True, "skip_crds": True, "no_hooks": True,
             "extra_args": ["--history-max=20", "--force", "--take-ownership", "--ca-file=/ca"]}
    assert helmcli.flag_args(flags, helmcli.UPGRADE, H3) == [
        "--disable-openapi-validation", "--skip-crds", "--no-hooks", "--history-max=20", "--force",
        "--take-ownership", "--ca-file=/ca"]
    # helm 4: the same meaning under its names, and client-side apply with the validation flag.
    assert helmcli.flag_args(flags, helmcli.UPGRADE, H4) == [
        "--disable-openapi-validation", "--skip-crds", "--no-hooks", "--server-side=false",
        "--history-max=20", "--force-replace", "--take-ownership", "--ca-file=/ca"]
    # helm rollback has neither --disable-openapi-validation nor --skip-crds.
    assert helmcli.flag_args(flags, helmcli.ROLLBACK, H3) == ["--no-hooks", "--history-max=20", "--force"]
    assert helmcli.flag_args(flags, helmcli.ROLLBACK, H4) == [
        "--no-hooks", "--server-side=false", "--history-max=20", "--force-replace"]
    assert helmcli.flag_args(flags, helmcli.SHOW, H4) == ["--ca-file=/ca"]
    # An explicit --server-side wins; on helm 3, false and auto are what it does anyway.
    chosen = dict(flags, extra_args=["--server-side=true", "--force-conflicts"])
    assert helmcli.flag_args(chosen, helmcli.UPGRADE, H4)[-2:] == ["--server-side=true", "--force-conflicts"]
    assert "--server-side=false" not in helmcli.flag_args(chosen, helmcli.UPGRADE, H4)
    assert helmcli.flag_args({"extra_args": ["--server-side=false"]}, helmcli.UPGRADE, H3) == []
    assert helmcli.flag_args({"disable_openapi_validation": False}, helmcli.UPGRADE, H4) == []
    for extra, major, words in ((["--server-side=true"], H3, "only in helm 4"),
                                (["--force-conflicts"], H3, "only in helm 4"),
                                (["--recreate-pods"], H4, "only in helm 3")):
        with pytest.raises(InvalidInput) as err:
            helmcli.check_flags({"extra_args": extra}, major)
        assert words in err.value.msg and extra[0] in err.value.msg
    helmcli.check_flags({"extra_args": ["--recreate-pods"]}, H3)


def test_flags_this_helm_binary_does_not_list_are_refused():
    known = helmcli.help_flags(HELP_SAMPLE)
    assert known == {"--cleanup-on-fail", "--help", "--history-max", "--output", "--qps"}
    helmcli.check_flags({"extra_args": ["--history-max=3", "--qps=5"]}, H3, {helmcli.UPGRADE: known})
    with pytest.raises(InvalidInput) as err:
        helmcli.check_flags({"extra_args": ["--take-ownership"]}, (3, 14, 0), {helmcli.UPGRADE: known})
    assert "'--take-ownership' is not a flag of this helm's upgrade (helm 3.14.0)" in err.value.msg


def test_stored_chart_upgrade_skips_the_openapi_check(monkeypatch, tmp_path):
    body = {"chart": {"metadata": {"name": "c", "version": "0.1.0", "apiVersion": "v2"}, "values": {},
                      "templates": []}, "config": {"a": 1}}
    monkeypatch.setattr(helmcli, "stored_release", lambda *a: body)

    class FakeHelm:
        temp_dir = str(tmp_path)

        @staticmethod
        def write_file(name, content):
            (tmp_path / name).write_text(content)
            return str(tmp_path / name)
    args = helmcli.stored_chart_upgrade(FakeHelm, None, "rel", "ns", 3, None, "why")
    assert args[:2] == ["upgrade", "rel"] and "--disable-openapi-validation" in args
    assert "--install" not in args and "--reset-values" in args


def test_pending_and_last_deployed():
    hist = [{"revision": 1, "status": "superseded"}, {"revision": 2, "status": "deployed"},
            {"revision": 3, "status": "pending-upgrade"}]
    assert helmcli.pending_state(hist) == ("pending-upgrade", 3)
    assert helmcli.last_deployed_revision(hist) == 2
    assert helmcli.pending_state(hist[:2]) is None
    assert helmcli.last_deployed_revision([{"revision": 1, "status": "pending-install"}]) is None
    assert helmcli.chart_version_of("tensor-fusion-1.8.7") == ("tensor-fusion", "1.8.7")


def test_kubeconfig_from_a_configuration(tmp_path):
    class Cfg:
        host = "https://k:6443"
        ssl_ca_cert = str(tmp_path / "ca")
        verify_ssl = True
        proxy = None
        api_key = {"authorization": "Bearer tok-123"}
        api_key_prefix = {}
        cert_file = key_file = username = password = None
    (tmp_path / "ca").write_bytes(b"CA")
    config = helmcli.kubeconfig_from_configuration(Cfg(), "alice", ["ops"])
    cluster, user = config["clusters"][0]["cluster"], config["users"][0]["user"]
    assert cluster == {"server": "https://k:6443", "certificate-authority-data": base64.b64encode(b"CA").decode()}
    assert user == {"token": "tok-123", "as": "alice", "as-groups": ["ops"]}
