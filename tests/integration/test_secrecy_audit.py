"""The secrecy audit: every module with secret-bearing input, then the rotate_secret runbook (for
real) or the upgrade runbook (in check mode, with secret-looking Helm values), each under its own
runbook's ServiceAccount token, at -vvv with diff mode, ANSIBLE_DEBUG off, once for real with a
failure forced in the middle and once in check mode. The whole output, the report files, the
snapshot bundles and the Kubernetes Events created meanwhile must hold none of the canaries (Secret
values, kubeconfig tokens, the client key, secret-looking Helm values), neither in plain text nor
in base64 (also of the canary embedded at any byte offset). Then: everything the collection wrote
has no group or world access, and no temporary file of a run (also of the failed one) is left."""
import base64
import datetime
import glob
import os
import stat
import tempfile
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from .ansible_runner import run_playbook, start_playbook
from .helpers import NS
from .rbac_helpers import RBAC_DIR
from .settle import settle

SECRET = "tfops-audit-credentials"


def canary(tag):
    return "tfopsCANARY%s%s" % (tag, uuid.uuid4().hex)


def fingerprints(value):
    """The value, its base64, and the base64 characters that encode it whatever its byte offset
    inside a longer encoded text (0, 1 or 2 bytes before it in its 3-byte group)."""
    raw = value.encode("utf-8") if isinstance(value, str) else value
    found = {raw.decode("utf-8", "replace") if isinstance(value, str) else None}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode("ascii")
        whole_groups = (offset + len(raw)) // 3
        found.add(encoded[4 if offset else 0:whole_groups * 4])
        if offset == 0:
            found.add(encoded)
    return [f for f in found if f and len(f) >= 12]


def assert_absent(corpus, canaries):
    for label, value in canaries.items():
        for fp in fingerprints(value):
            for where, text in corpus.items():
                assert fp not in text, "%s (%r) found in %s" % (label, fp, where)


def files_text(root):
    out = {}
    for path in Path(root).rglob("*"):
        if path.is_file():
            out[str(path)] = path.read_bytes().decode("utf-8", "replace")
    return out


def events_since(api_client, since):
    out = []
    for event in client.CoreV1Api(api_client).list_event_for_all_namespaces().items:
        when = event.last_timestamp or event.event_time or event.metadata.creation_timestamp
        if when and when >= since:
            out.append("%s %s %s %s" % (event.involved_object.kind, event.involved_object.name,
                                        event.reason, event.message))
    return "\n".join(out)


def private_tree(root):
    """Paths under root that a group or other user may read, write or enter."""
    loose = []
    for path in [Path(root)] + list(Path(root).rglob("*")):
        if stat.S_IMODE(os.lstat(path).st_mode) & 0o077:
            loose.append("%s %o" % (path, stat.S_IMODE(os.lstat(path).st_mode)))
    return loose


@pytest.fixture
def audit_secret(api_client):
    core = client.CoreV1Api(api_client)
    original = canary("orig")
    core.create_namespaced_secret(NS, client.V1Secret(
        metadata=client.V1ObjectMeta(name=SECRET), string_data={"password": original}))
    yield original
    for secret in core.list_namespaced_secret(NS).items:
        if secret.metadata.name.startswith(SECRET):
            core.delete_namespaced_secret(secret.metadata.name, NS)


def test_no_secret_anywhere_and_everything_written_is_private(
        lab, api_client, sa_kubeconfig, helm_bins, audit_secret, tmp_path):
    settle(api_client)
    pki = Path(lab["state_dir"]) / "pki"
    kubeconfig = sa_kubeconfig(("upgrade", "rotate"))
    # the upgrade runbook rolls back on failure: it holds the rollback's rules too (its preflight checks)
    upgrade_kubeconfig = sa_kubeconfig(("upgrade", "rollback"))
    rotate_kubeconfig = sa_kubeconfig("rotate")
    work = tmp_path / "work"
    work.mkdir(mode=0o755)  # the collection must make its own files private, whatever the umask
    emitted = work / "emitted.kubeconfig"
    canaries = {"audit Secret value before": audit_secret,
                "ServiceAccount token": sa_kubeconfig.token(("upgrade", "rotate")),
                "upgrade ServiceAccount token": sa_kubeconfig.token("upgrade"),
                "rotate ServiceAccount token": sa_kubeconfig.token("rotate"),
                "lab admin token": lab["token"],
                "client key": (pki / "admin.key").read_text(),
                "client key body": "".join((pki / "admin.key").read_text().splitlines()[1:-1])}
    values = {"agent": {"enrollToken": canary("enroll")},
              "greptime": {"password": canary("greptime")},
              "extra": {"dbPassword": canary("dbpass"), "apiKey": canary("apikey")}}
    set_values = [{"value": "cloudVendorCredentials.secretKey=" + canary("sk"), "value_type": "string"},
                  {"value": "agent.token=" + canary("settoken")}]
    canaries.update({"helm value %s" % k: v for k, v in _leaves(values)})
    canaries.update({"--set %d" % i: s["value"].split("=", 1)[1] for i, s in enumerate(set_values)})
    chart_version = _release_chart_version(api_client)
    base = {"audit_kubeconfig": kubeconfig, "audit_upgrade_kubeconfig": upgrade_kubeconfig,
            "audit_rotate_kubeconfig": rotate_kubeconfig, "tfops_helm_binary": helm_bins["3"],
            "tfops_chart_repo": lab["tensorfusion"]["chart_repo"], "tfops_timeout": 900,
            "tfops_verify_acceptance_pod": False, "tfops_secret_name": SECRET,
            "audit_secret": SECRET, "audit_chart_version": chart_version,
            "audit_values": values, "audit_set_values": set_values,
            "audit_host": lab["server"], "audit_ca_cert": str(pki / "ca.crt"),
            "audit_client_cert": str(pki / "admin.crt"), "audit_client_key": str(pki / "admin.key"),
            "audit_admin_kubeconfig": lab["kubeconfig"], "audit_rbac_dir": str(RBAC_DIR),
            "audit_emitted_kubeconfig": str(emitted),
            # upgrade.yml (check mode): the values of the chart step
            "tfops_chart_version": chart_version, "tfops_values": values}
    temp_root = Path(tempfile.mkdtemp(prefix="tfops-audit-tmp-"))
    env = {"ANSIBLE_DEBUG": "0", "TMPDIR": str(temp_root), "ANSIBLE_LOCAL_TEMP": str(temp_root / "local"),
           "ANSIBLE_REMOTE_TEMP": str(temp_root / "remote")}
    since = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=2)
    corpus = {}
    try:
        for mode, args in (("real", ["-vvv", "--diff"]), ("check", ["-vvv", "--diff", "--check"])):
            rotated = canary("rot" + mode)
            runbook_rotated = canary("rb" + mode)
            canaries["rotated (%s)" % mode] = rotated
            canaries["rotated by the runbook (%s)" % mode] = runbook_rotated
            run = run_playbook("secrecy_audit.yml", dict(
                base, tfops_artifacts_dir=str(work / ("artifacts-" + mode)),
                tfops_snapshot_dir=str(work / ("snapshots-" + mode)),
                audit_secret_data={"password": rotated},
                tfops_secret_string_data={"password": runbook_rotated}), env=env, args=args, timeout=1500)
            corpus["%s stdout" % mode], corpus["%s stderr" % mode] = run.stdout, run.stderr
            assert "The forced failure happened" in run.stdout, run.stdout[-3000:]
            recap = run.stdout.split("PLAY RECAP")[-1]
            assert "failed=0" in recap, run.stdout[-4000:]
            if mode == "real":
                assert _secret_value(api_client) == runbook_rotated, "the runs really rotated"
                canaries["emitted token"] = _token_of(emitted)
        corpus.update(files_text(work))
        del corpus[str(emitted)]  # the one place the emitted token belongs (checked for 0600 below)
        corpus["events"] = events_since(api_client, since)
        corpus["report ConfigMaps"] = report_configmaps_since(api_client, since)
        assert corpus["report ConfigMaps"], "the runs kept their reports in the cluster"
        assert list(work.glob("snapshots-real/*/")), "a bundle was written"
        corpus["cluster bundles"] = cluster_bundles_since(api_client, since)
        assert corpus["cluster bundles"], "a bundle was written to the cluster"
        assert assert_reports(work)
        assert_absent(corpus, canaries)
        # Permissions: bundles, reports, the emitted kubeconfig; nothing left in the temp folders.
        for root in work.iterdir():
            if root.name != "emitted.kubeconfig":
                assert private_tree(root) == [], root
        assert stat.S_IMODE(os.stat(emitted).st_mode) == 0o600
        left = [p for p in glob.glob(str(temp_root / "**"), recursive=True)
                if os.path.basename(p).startswith(("tfops-", ".tfops-"))]
        assert left == [], "temporary files left behind: %s" % left
    finally:
        run_playbook("rbac.yml", {"lab_kubeconfig": lab["kubeconfig"], "rbac_state": "absent",
                                  "rbac_service_account": "tfops-audit-emitted",
                                  "rbac_kubeconfig_path": str(emitted)})
        for path in sorted(temp_root.rglob("*"), reverse=True):
            path.rmdir() if path.is_dir() else path.unlink()
        temp_root.rmdir()


def report_configmaps_since(api_client, since):
    """The report ConfigMaps (tfops_report_store both) created since ``since``, compressed parts
    decoded."""
    import gzip
    import json
    texts = []
    for cm in client.CoreV1Api(api_client).list_namespaced_config_map(
            NS, label_selector="tensorfusion.ops/report-of").items:
        if cm.metadata.creation_timestamp >= since.replace(microsecond=0):
            texts.append(json.dumps(api_client.sanitize_for_serialization(cm)))
            texts += [gzip.decompress(base64.b64decode(v)).decode("utf-8", "replace")
                      for v in (cm.binary_data or {}).values()]
    return "\n".join(texts)


def cluster_bundles_since(api_client, since):
    """The decoded content of the snapshot bundles stored in the cluster since ``since``."""
    import gzip
    secrets = client.CoreV1Api(api_client).list_namespaced_secret(
        NS, label_selector="app.kubernetes.io/managed-by=tensorfusion.ops,tensorfusion.ops/snapshot-of").items
    blobs = {}
    for secret in sorted(secrets, key=lambda s: int(s.metadata.annotations["tensorfusion.ops/snapshot-part"])):
        if secret.metadata.creation_timestamp >= since.replace(microsecond=0):
            name = secret.metadata.annotations["tensorfusion.ops/snapshot-bundle"]
            blobs[name] = blobs.get(name, b"") + base64.b64decode(secret.data["bundle.gz"])
    return "\n".join(gzip.decompress(blob).decode() for blob in blobs.values())


def assert_reports(work):
    return list(work.glob("artifacts-real/*/report.json"))


def _leaves(values, prefix=""):
    for key, value in values.items():
        if isinstance(value, dict):
            yield from _leaves(value, prefix + key + ".")
        else:
            yield prefix + key, value


def _secret_value(api_client):
    data = client.CoreV1Api(api_client).read_namespaced_secret(SECRET, NS).data
    return base64.b64decode(data["password"]).decode()


def _token_of(path):
    import json
    return json.loads(Path(path).read_text())["users"][0]["user"]["token"]


def _release_chart_version(api_client):
    from .test_rbac import tf_release_chart
    return tf_release_chart(api_client)


def test_fingerprints_find_a_value_embedded_at_any_offset():
    """The audit's matcher itself: a value inside a larger text, base64-encoded as a whole (a
    Secret's data, a kubeconfig's client-key-data), is found whatever its byte offset."""
    value = canary("probe")
    for prefix in ("", "k", "ke", "key=", "password: "):
        for suffix in ("", "\n", "xyz"):
            encoded = base64.b64encode((prefix + value + suffix).encode()).decode()
            assert any(fp in encoded for fp in fingerprints(value)), (prefix, suffix)
    assert not any(fp in base64.b64encode(b"unrelated text of some length").decode()
                   for fp in fingerprints(value))


def test_no_secret_content_in_ansible_tmp_while_a_rotation_runs_nor_after_a_kill(lab, api_client, ns, tmp_path):
    """The rotate_secret runbook pipelines its modules: while secret_rotate waits for its consumer,
    and after a kill -9 of ansible-playbook (which leaves what it wrote), ~/.ansible/tmp holds
    nothing of the new content (a module written there as AnsiballZ_*.py would carry it)."""
    import signal
    import time

    from .test_fence import alive, descendants, force_release, reap
    from .helpers import deployment, wait_for
    core, apps = client.CoreV1Api(api_client), client.AppsV1Api(api_client)
    value = canary("disk")
    core.create_namespaced_secret(ns, {"metadata": {"name": "disk-cred"}, "stringData": {"pw": canary("old")}})
    body = deployment("web", replicas=1)
    body["spec"]["template"]["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "disk-cred"}}]
    apps.create_namespaced_deployment(ns, body)
    wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "web"
             and (d.status.available_replicas or 0) == 1, namespace=ns)
    core.create_namespaced_config_map("kube-system", {"metadata": {"name": "tfops-lab-kubelet"},
                                                      "data": {"readyDelaySeconds": "90"}})
    tmp_root = Path.home() / ".ansible" / "tmp"
    job = start_playbook("tensorfusion.ops.rotate_secret", {
        "tfops_kubeconfig": lab["kubeconfig"], "tfops_artifacts_dir": str(tmp_path / "artifacts"),
        "tfops_secret_name": "disk-cred", "tfops_secret_namespace": ns,
        "tfops_secret_string_data": {"pw": value},
        "tfops_secret_consumers": [{"kind": "Deployment", "name": "web"}]})
    below = []
    try:
        # The restart went out: secret_rotate now waits for the new Pod (90 s to Ready).
        wait_for(apps.list_namespaced_deployment, lambda d: d.metadata.name == "web"
                 and d.metadata.generation >= 2, timeout=180, namespace=ns)
        below = descendants(job.proc.pid)
        assert [p for p in below if alive(p)], "the module runs"
        assert_absent(files_text(tmp_root), {"new Secret content (while the module runs)": value})
        os.kill(job.proc.pid, signal.SIGKILL)
        job.proc.wait(timeout=30)
        time.sleep(1)
        assert_absent(files_text(tmp_root), {"new Secret content (after kill -9)": value})
    finally:
        reap(job, below)
        core.delete_namespaced_config_map("tfops-lab-kubelet", "kube-system")
        force_release(lab, NS, "tensorfusion-ops-maintenance")
    settle(api_client)
