"""helm_release / helm_snapshot decisions without a cluster: secret redaction, the helm version and
flag mapping, the command shown, pending detection, idempotence, rollback blockers, bundle
writing, verification, pruning and secret restoration from hashes."""
import base64
import gzip
import json
import os
import stat

import re

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import release
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import bundle as snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    HelmError,
    InvalidInput,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.restore import plan_cluster

SECRET_DOC = """apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: ns}
stringData: {ak: AKIA-SECRET, sk: SK-SECRET}
"""
DEPLOY_DOC = """apiVersion: apps/v1
kind: Deployment
metadata: {name: ctl, namespace: ns}
spec:
  template:
    spec:
      containers:
        - name: agent
          env:
            - {name: ENROLL_TOKEN, value: tok-SECRET}
            - {name: CLOUD_ENDPOINT, value: wss://x}
          volumeMounts: [{name: creds, mountPath: /tmp/secret}]
      volumes:
        - name: creds
          secret: {secretName: creds, items: [{key: ak, path: ak}]}
"""
KEPT_DOC = """apiVersion: v1
kind: Secret
metadata:
  name: tf-cloud-vendor-credentials
  annotations: {helm.sh/resource-policy: keep}
stringData: {ak: dummy}
"""


@pytest.mark.parametrize("key", ["password", "enrollToken", "accessKey", "secretKey", "licenseKey",
                                 "licence", "apiKey", "token", "key", "clientSecret", "TF_LICENSE"])
def test_secret_looking_keys(key):
    assert redact.looks_secret(key)


@pytest.mark.parametrize("key", ["secretName", "tokenPath", "accessKeyPath", "keyRef", "image",
                                 "agentId", "cloudEndpoint", "monkey", "host", "licenseFile"])
def test_reference_and_plain_keys_are_not_secret(key):
    assert not redact.looks_secret(key)


def test_redact_values_hashes_secret_leaves_only():
    values = {"agent": {"agentId": "", "enrollToken": "tok"}, "greptime": {"password": "pw", "host": "h"},
              "cloudVendorCredentials": {"accessKey": "ak", "secretKey": "sk"},
              "controller": {"admissionWebhooks": {"secretName": "webhook"}}}
    out = redact.redact_values(values)
    assert out["agent"] == {"agentId": "", "enrollToken": redact.value_hash("tok")}
    assert out["greptime"] == {"password": redact.value_hash("pw"), "host": "h"}
    assert out["controller"]["admissionWebhooks"]["secretName"] == "webhook"
    assert redact.redact_values(values, keep_secrets=True) == values
    assert sorted(redact.secret_leaves({"a": {"password": "pw1", "token": "tok1", "x": "y"}})) == ["pw1", "tok1"]


def test_manifest_masking_and_collection():
    text = SECRET_DOC + "---\n" + DEPLOY_DOC
    masked = redact.mask_manifest(text)
    for value in ("AKIA-SECRET", "SK-SECRET", "tok-SECRET"):
        assert value not in masked
    assert "wss://x" in masked and "secretName: creds" in masked
    found = redact.manifest_secret_values(text)
    assert sorted(found) == ["AKIA-SECRET", "SK-SECRET", "tok-SECRET"]
    assert "creds" not in found, "names of Secrets are references, not secrets"


def test_set_expressions_masked_by_their_key():
    assert redact.mask_set_expression("agent.enrollToken=abc") == "agent.enrollToken=********"
    assert redact.mask_set_expression("agent.agentId=") == "agent.agentId="
    assert redact.mask_set_expression("image.tag=v1") == "image.tag=v1"
    assert redact.mask_set_expression("a\\.b.password=x") == "a\\.b.password=********"


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


def rev(manifest, values=None, chart_version="1.8.7", status="deployed"):
    return {"chart": "tensor-fusion", "chart_version": chart_version, "status": status,
            "values": values or {}, "manifest": manifest}


def test_changes_compare_chart_values_and_objects():
    base = rev(DEPLOY_DOC + "---\n" + SECRET_DOC)
    reordered = rev(SECRET_DOC + "---\n" + DEPLOY_DOC)
    assert release.changes(base, reordered) == []
    assert release.changes(None, base) == ["the release does not exist"]
    assert "values differ" in release.changes(base, rev(base["manifest"], {"a": 1}))
    assert release.changes(base, rev(base["manifest"], chart_version="1.8.6"))[0].startswith("chart ")
    assert "its last revision is failed" in release.changes(rev(base["manifest"], status="failed"), base)
    assert "rendered manifest differs" in release.changes(base, rev(DEPLOY_DOC.replace("wss://x", "wss://y")))


def test_a_kept_object_rendered_on_one_side_counts_only_when_absent_from_the_cluster():
    with_kept, without = rev(DEPLOY_DOC + "---\n" + KEPT_DOC), rev(DEPLOY_DOC)
    assert release.changes(with_kept, without, exists=lambda key: True) == []
    assert release.changes(with_kept, without, exists=lambda key: False) == ["rendered manifest differs"]
    blockers = release.rollback_blockers(DEPLOY_DOC, DEPLOY_DOC + "---\n" + KEPT_DOC, lambda k: True)
    assert [(k[1], k[3]) for k in blockers] == [("Secret", "tf-cloud-vendor-credentials")]
    assert release.rollback_blockers(DEPLOY_DOC, DEPLOY_DOC + "---\n" + KEPT_DOC, lambda k: False) == []


def test_diff_and_secrets_of_a_revision_never_show_values():
    before = rev(SECRET_DOC, {"agent": {"enrollToken": "tok-SECRET"}})
    after = rev(SECRET_DOC.replace("SK-SECRET", "SK2-SECRET"), {"agent": {"enrollToken": "tok2-SECRET"}})
    text = json.dumps(release.diff_of(before, after, "x"))
    assert "SECRET" not in text.replace("SECRET_", "")
    assert set(release.secrets_in(after)) == {"tok2-SECRET", "AKIA-SECRET", "SK2-SECRET"}
    assert release.params_secrets({"values": {"auth": {"password": "pw-1"}},
                                   "set_values": [{"value": "a.token=tok-1"}, {"value": "a.b=plain"}]}) \
        == ["pw-1", "tok-1"]


def test_decode_release_and_write_its_chart(tmp_path):
    body = {"chart": {"metadata": {"name": "c", "version": "0.1.0", "apiVersion": "v2"},
                      "values": {"a": 1},
                      "templates": [{"name": "templates/cm.yaml", "data": base64.b64encode(b"kind: X").decode()}],
                      "files": [{"name": "crds/crd.yaml", "data": base64.b64encode(b"kind: CRD").decode()}]}}
    stored = base64.b64encode(base64.b64encode(gzip.compress(json.dumps(body).encode()))).decode()
    assert helmcli.decode_release(stored) == body
    folder = helmcli.write_stored_chart(str(tmp_path / "chart"), body)
    assert json.loads((tmp_path / "chart" / "Chart.yaml").read_text())["name"] == "c"
    assert (tmp_path / "chart" / "templates" / "cm.yaml").read_text() == "kind: X"
    assert (tmp_path / "chart" / "crds" / "crd.yaml").read_text() == "kind: CRD"
    assert folder == str(tmp_path / "chart")
    evil = {"chart": dict(body["chart"], templates=[{"name": "../../escape", "data": ""}])}
    with pytest.raises(HelmError):
        helmcli.write_stored_chart(str(tmp_path / "chart2"), evil)


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


def pool_tfc(env_value, image="hv:1"):
    return {"metadata": {"name": "tensor-fusion"}, "spec": {"gpuPools": [{"name": "shared", "specTemplate": {
        "componentConfig": {"hypervisor": {"image": image},
                            "worker": {"podTemplate": {"template": {"spec": {"containers": [
                                {"name": "w", "env": [{"name": "TF_LICENSE", "value": env_value}]}]}}}}},
        "nodeManagerConfig": {"nodePoolRollingUpdatePolicy": {"autoUpdateHypervisor": True}}}}]}}


def test_restore_plan_takes_masked_secrets_from_the_cluster_or_refuses():
    saved = snapshots.mask_cluster(pool_tfc("LIC-1", "hv:old"), KEY)
    assert "LIC-1" not in json.dumps(saved)
    assert redact.value_hash("LIC-1") not in json.dumps(saved), "keyed, not a bare hash"
    [(pool, _before, after, changed, gpupool)] = plan_cluster(saved, pool_tfc("LIC-1", "hv:new"), KEY)
    assert (pool, changed, gpupool) == ("shared", ["hypervisor"], "tensor-fusion-shared")
    assert after["componentConfig"]["hypervisor"]["image"] == "hv:old"
    assert after["componentConfig"]["worker"]["podTemplate"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "LIC-1"
    assert plan_cluster(saved, pool_tfc("LIC-1", "hv:old"), KEY) == []
    with pytest.raises(InvalidInput):
        plan_cluster(saved, pool_tfc("LIC-2", "hv:new"), KEY)
    with pytest.raises(InvalidInput):  # another key's fingerprint matches nothing
        plan_cluster(saved, pool_tfc("LIC-1", "hv:new"), signing.BundleKey(b"o" * 32))
    # A bundle taken before keyed fingerprints (bare sha256, allow_unsigned) still restores.
    legacy = redact.mask_object(snapshots.clean_object(pool_tfc("LIC-1", "hv:old")))
    [(_pool, _before, after, _changed, _gp)] = plan_cluster(legacy, pool_tfc("LIC-1", "hv:new"))
    assert after["componentConfig"]["worker"]["podTemplate"]["template"]["spec"]["containers"][0]["env"][0]["value"] == "LIC-1"
