"""helm_release and helm_snapshot on the lab, each test with helm 3 and with helm 4: the documented
upgrade from the lab's chart repository (--repo, the values-cn.yaml URL, agent.agentId=""),
idempotence, check mode that writes nothing, rollback to a snapshot that brings back the exact
values and a hand-made componentConfig, a pending release recovered, a chart version that does not
exist, rollback by revision, and no secret anywhere in results, diffs, output or bundles."""
import base64
import gzip
import hashlib
import json
import subprocess
import uuid
from pathlib import Path

import pytest
from kubernetes import client

from .ansible_runner import run_playbook
from .helpers import NS, gpupool, tfc, wait_for

RELEASE = NS
V1, V2 = "1.8.6", "1.8.7"
HV = "tensorfusion/tensor-fusion-hypervisor"
TINY = str(Path(__file__).resolve().parent / "charts" / "tfops-tiny")
MAJORS = ["3", "4"]


def release(lab, helm, check=False, diff=False, verbose=False, **opts):
    extra = {"lab_kubeconfig": lab["kubeconfig"], "helm_binary": helm}
    extra.update({"hr_" + k: v for k, v in opts.items()})
    args = (["--check"] if check else []) + (["--diff"] if diff else []) + (["-vvv"] if verbose else [])
    run = run_playbook("helm_release.yml", extra, args=args)
    return run, run.task_results("Release")


def snapshot(lab, helm, dest, verbose=False, **opts):
    extra = {"lab_kubeconfig": lab["kubeconfig"], "helm_binary": helm, "hs_dest": str(dest)}
    extra.update({("hsi_" + k[5:] if k.startswith("info_") else "hs_" + k): v for k, v in opts.items()})
    run = run_playbook("helm_snapshot.yml", extra, args=["-vvv"] if verbose else [])
    return run


def helm_json(helm, lab, *args):
    out = subprocess.run([helm, *args, "--kubeconfig", lab["kubeconfig"], "-o", "json"],
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out or "null")


def history(helm, lab, name=RELEASE, ns=NS):
    return helm_json(helm, lab, "history", name, "-n", ns)


def user_values(helm, lab, name=RELEASE, ns=NS):
    return helm_json(helm, lab, "get", "values", name, "-n", ns) or {}


def component_config(api_client):
    return tfc(api_client)["spec"]["gpuPools"][0]["specTemplate"]["componentConfig"]


def set_hypervisor_image(lab, image):
    """A hand-made change of the pool, through gpupool_rollout (and its wait)."""
    run = run_playbook("gpupool_rollout.yml", {
        "lab_kubeconfig": lab["kubeconfig"], "gr_wait_timeout": 300,
        "gr_components": {"hypervisor": {"image": image}},
        "gr_rolling_update": {"auto_update_hypervisor": True}})
    res = run.task_results("Rollout")
    assert run.rc == 0, res
    return res


@pytest.fixture(params=MAJORS, ids=lambda m: "helm" + m)
def helm(request, helm_bins):
    return helm_bins[request.param]


@pytest.fixture
def lab_release_restored(lab, api_client, helm_bins):
    """The session's release and pool as found: the test's own rollback restores them; this
    fixture checks it did and, if the test failed half-way, puts them back."""
    values = user_values(helm_bins["3"], lab)
    last = max(history(helm_bins["3"], lab), key=lambda r: r["revision"])
    image = component_config(api_client)["hypervisor"]["image"]
    yield {"values": values, "chart": last["chart"], "image": image}
    now = max(history(helm_bins["3"], lab), key=lambda r: r["revision"])
    if now["chart"] != last["chart"] or user_values(helm_bins["3"], lab) != values \
            or now["status"] != "deployed":
        release(lab, helm_bins["3"], chart_repo_url=lab["tensorfusion"]["chart_repo"],
                chart_version=last["chart"].rsplit("-", 1)[1], values=values or None)
    if component_config(api_client)["hypervisor"]["image"] != image:
        set_hypervisor_image(lab, image)


def test_upgrade_idempotence_check_mode_and_rollback_to_snapshot(
        lab, api_client, helm, tmp_path, lab_release_restored):
    repo = lab["tensorfusion"]["chart_repo"]
    found = lab_release_restored
    # A hand-made pool change that no Helm revision holds: the snapshot must bring it back.
    hand_image = "%s:2.15.%s" % (HV, uuid.uuid4().int % 1000 + 100)
    set_hypervisor_image(lab, hand_image)
    saved_cc = component_config(api_client)

    run = snapshot(lab, helm, tmp_path / "snaps")
    assert run.rc == 0, run.stdout[-3000:]
    snap = run.task_results("Snapshot")
    bundle = snap["bundle"]
    info = run.task_results("Info")
    assert [b["path"] for b in info["bundles"]] == [bundle] and info["bundles"][0]["usable"]

    # keep_pools off: these upgrades revert the hand-made pool (as helm alone does), so that the
    # rollback to the snapshot has a componentConfig to bring back.
    cn = {"chart_repo_url": repo, "values_files": [repo + "/values-cn.yaml"],
          "set_values": [{"value": "agent.agentId=", "value_type": "string"}], "keep_pools": False}
    # Version 1 with the mainland-China values and local mode.
    run, res = release(lab, helm, chart_version=V1, **cn)
    assert run.rc == 0, res
    assert res["changed"] is True and res["status"] == "deployed"
    set_back = [res]
    assert res["helm_version"].startswith(helm_major(helm))
    values = user_values(helm, lab)
    assert values["controller"]["image"]["repository"].startswith("registry.cn-hangzhou.aliyuncs.com/")
    assert values["agent"]["agentId"] == ""
    [dep] = client.AppsV1Api(api_client).list_namespaced_deployment(
        NS, label_selector="tensor-fusion.ai/component=operator").items
    assert dep.spec.template.spec.containers[0].image == \
        "registry.cn-hangzhou.aliyuncs.com/tensorfusion/tensor-fusion-operator:2.16.0"
    assert "--repo %s" % repo in res["command"] and "values-cn.yaml" in res["command"]

    # Version 2.
    run, res = release(lab, helm, chart_version=V2, atomic=True, **cn)
    assert run.rc == 0, res
    assert res["changed"] is True and res["chart_version"] == V2 and res["app_version"] == "2.17.0"
    assert res["revision_after"] == res["revision_before"] + 1
    assert ("--atomic" if helm_major(helm) == "3" else "--rollback-on-failure") in res["command"]
    upgraded = res["revision_after"]
    # The upgrade that set the hand-made pool back says so, field by field (#45 item 5).
    set_back.append(res)
    resets = [c for r in set_back for reset in r.get("pools_reset") or [] if reset["pool"] == "shared"
              for c in reset["changes"] if c["field"] == "hypervisor.image" and c["from"] == hand_image]
    assert resets and resets[0]["to"] != hand_image, [r.get("pools_reset") for r in set_back]
    assert [w for r in set_back for w in r.get("warnings") or [] if "keep_pools is off: the chart sets pool shared" in w
            and "hypervisor.image %s -> " % hand_image in w], [r.get("warnings") for r in set_back]

    # Again: nothing to do.
    run, res = release(lab, helm, chart_version=V2, **cn)
    assert run.rc == 0, res
    assert res["changed"] is False and res["command"] is None and res["revision_after"] == upgraded

    # Check mode (and diff) towards version 1 without the cn values: history unchanged.
    before = history(helm, lab)
    run, res = release(lab, helm, check=True, diff=True, chart_version=V1, chart_repo_url=repo)
    assert run.rc == 0, res
    assert res["changed"] is True
    assert history(helm, lab) == before
    values_diff, manifest_diff = res["diff"][0], res["diff"][1]
    assert "registry.cn-hangzhou" in values_diff["before"] and "registry.cn-hangzhou" not in values_diff["after"]
    assert "tensor-fusion-operator:2.17.0" in manifest_diff["before"]
    assert "tensor-fusion-operator:2.16.0" in manifest_diff["after"]

    # Back to the snapshot: the exact values, chart and the hand-made componentConfig.
    run, res = release(lab, helm, state="rolled_back", snapshot=bundle, diff=True)
    assert run.rc == 0, res
    assert res["changed"] is True and res["target_revision"] == snap["meta"]["revision"]
    assert user_values(helm, lab) == found["values"]
    last = max(history(helm, lab), key=lambda r: r["revision"])
    assert last["chart"] == "tensor-fusion-" + snap["meta"]["chart_version"] and last["status"] == "deployed"
    assert component_config(api_client) == saved_cc
    assert [c["pool"] for c in res["component_config"]] == ["shared"]
    assert res["component_config"][0]["waited_for"] == ["hypervisor"]
    pool = gpupool(api_client)
    assert pool["status"]["componentStatus"]["hypervisorConfigSynced"] is True
    assert pool["status"]["componentStatus"]["hypervisorUpdateProgress"] == 100

    # Rolling back to what is deployed changes nothing.
    run, res = release(lab, helm, state="rolled_back", snapshot=bundle)
    assert run.rc == 0, res
    assert res["changed"] is False and res["component_config"] == []
    # The session's pool as found (the fixture checks the release).
    set_hypervisor_image(lab, found["image"])


def test_helm_flags_reach_every_command_and_the_rollback_takes_the_snapshots(
        lab, api_client, helm, tmp_path, lab_release_restored):
    """disable_openapi_validation, no_hooks and extra_args reach helm (helm 4: client-side apply
    with disable_openapi_validation); a flag outside the allow-list, the module's own or one this
    helm lacks is refused before any write; the snapshot records the upgrade's flags and the
    rollback to it passes them, unasked."""
    repo = lab["tensorfusion"]["chart_repo"]
    major = helm_major(helm)
    flags = {"disable_openapi_validation": True, "no_hooks": True,
             "extra_args": ["--history-max", "20", "--cleanup-on-fail"]}
    run = snapshot(lab, helm, tmp_path / "snaps", helm_flags=flags)
    assert run.rc == 0, run.stdout[-3000:]
    snap = run.task_results("Snapshot")
    recorded = {"disable_openapi_validation": True, "skip_crds": False, "no_hooks": True,
                "extra_args": ["--history-max=20", "--cleanup-on-fail"]}
    assert snap["meta"]["helm_flags"] == recorded
    assert run.task_results("Info")["bundles"][0]["helm_flags"] == recorded
    before = history(helm, lab)

    # Without the flag a current API server's schema takes the chart: check mode says it would
    # change, and writes nothing.
    run, res = release(lab, helm, check=True, chart_repo_url=repo, chart_version=V2)
    assert run.rc == 0 and res["changed"] is True and "--disable-openapi-validation" not in res["command"], res
    assert history(helm, lab) == before
    # Refused before any write, naming the option and the value.
    bad = [(["--namespace=elsewhere"], "extra_args: '--namespace=elsewhere' is a flag helm_release sets itself"),
           (["--frobnicate"], "extra_args: '--frobnicate' is not a helm upgrade or rollback flag"),
           (["--wait"], "extra_args: '--wait' is a flag helm_release sets itself (from wait)")]
    bad.append((["--recreate-pods"], "exists only in helm 3") if major == "4" else
               (["--force-conflicts"], "exists only in helm 4"))
    for extra, words in bad:
        run, res = release(lab, helm, chart_repo_url=repo, chart_version=V2, apply_crds=True,
                           extra_args=extra)
        assert run.rc != 0 and words in res["msg"], res
    assert history(helm, lab) == before

    # Check mode with the flags: the server dry run takes them; nothing written.
    run, res = release(lab, helm, check=True, chart_repo_url=repo, chart_version=V2, **flags)
    assert run.rc == 0 and res["changed"] is True, res
    assert history(helm, lab) == before
    for arg in ("--disable-openapi-validation", "--no-hooks", "--history-max=20", "--cleanup-on-fail"):
        assert arg in res["command"]
    assert ("--server-side=false" in res["command"]) == (major == "4")
    assert res["helm_flags"] == dict(recorded) and set(res["helm_flags_source"].values()) == {"task", "default"}
    # For real.
    run, res = release(lab, helm, chart_repo_url=repo, chart_version=V2, **flags)
    assert run.rc == 0 and res["changed"] is True and res["chart_version"] == V2, res
    assert "--disable-openapi-validation" in res["command"] and "--no-hooks" in res["command"]
    svc = client.CoreV1Api(api_client).read_namespaced_service("alert-manager", NS)
    assert svc.spec.type == "ClusterIP" and svc.spec.internal_traffic_policy == "Cluster"
    run, res = release(lab, helm, chart_repo_url=repo, chart_version=V2, **flags)
    assert run.rc == 0 and res["changed"] is False and res["command"] is None, res

    # Back to the snapshot, giving no flag: the bundle's are used for the rollback's helm command.
    run, res = release(lab, helm, state="rolled_back", snapshot=snap["bundle"])
    assert run.rc == 0 and res["changed"] is True, res
    assert res["helm_flags"] == recorded
    assert res["helm_flags_source"] == {"disable_openapi_validation": "snapshot", "skip_crds": "snapshot",
                                        "no_hooks": "snapshot", "extra_args": "snapshot"}
    assert "--no-hooks" in res["command"] and "--history-max=20" in res["command"]
    assert "--cleanup-on-fail" in res["command"]
    if res["method"] == "upgrade-to-stored-chart":
        assert "--disable-openapi-validation" in res["command"]
    assert ("--server-side=false" in res["command"]) == (major == "4")
    last = max(history(helm, lab), key=lambda r: r["revision"])
    assert last["chart"] == "tensor-fusion-" + snap["meta"]["chart_version"] and last["status"] == "deployed"
    assert user_values(helm, lab) == lab_release_restored["values"]
    # A task's own value wins over the bundle's.
    run, res = release(lab, helm, state="rolled_back", snapshot=snap["bundle"], no_hooks=False, extra_args=[])
    assert run.rc == 0 and res["changed"] is False, res
    assert res["helm_flags"]["no_hooks"] is False and res["helm_flags_source"]["no_hooks"] == "task"


def forge(bundle, file_name, text):
    """What a forger without the key does: change a file and recompute its checksum in index.json."""
    (bundle / file_name).write_text(text)
    index = json.loads((bundle / "index.json").read_text())
    index["files"][file_name] = hashlib.sha256((bundle / file_name).read_bytes()).hexdigest()
    (bundle / "index.json").write_text(json.dumps(index))


def resource_versions(api_client):
    """The TensorFusionCluster's and the release's Helm storage Secrets' resourceVersions."""
    secrets = client.CoreV1Api(api_client).list_namespaced_secret(
        NS, label_selector="owner=helm,name=%s" % RELEASE).items
    return {"tfc": tfc(api_client)["metadata"]["resourceVersion"],
            "secrets": sorted((s.metadata.name, s.metadata.resource_version) for s in secrets)}


def test_tampered_or_foreign_bundle_is_refused(lab, api_client, helm, tmp_path):
    run = snapshot(lab, helm, tmp_path / "snaps")
    assert run.rc == 0, run.stdout[-3000:]
    snap = run.task_results("Snapshot")
    bundle = Path(snap["bundle"])
    assert oct(bundle.stat().st_mode & 0o777) == "0o700"
    assert all(oct(f.stat().st_mode & 0o777) == "0o600" for f in bundle.iterdir())
    assert not [p for p in (tmp_path / "snaps").iterdir() if p.name.startswith(".tmp-")]
    # The key lives in the cluster, labelled as the collection's; no form of it is in the bundle.
    key_secret = client.CoreV1Api(api_client).read_namespaced_secret("tensorfusion-ops-snapshot-key", NS)
    assert key_secret.metadata.labels["app.kubernetes.io/managed-by"] == "tensorfusion.ops"
    assert snap["signing_key"]["secret"] == NS + "/tensorfusion-ops-snapshot-key"
    raw = base64.b64decode(key_secret.data["key"])
    assert len(raw) == 32
    for path in bundle.iterdir():
        data = path.read_bytes()
        assert raw not in data and key_secret.data["key"].encode() not in data and raw.hex().encode() not in data
    assert key_secret.data["key"] not in run.stdout + json.dumps(run.results)
    assert json.loads((bundle / "index.json").read_text())["signature"]["key_id"] == snap["signing_key"]["key_id"]
    # A forger edits the TensorFusionCluster and recomputes index.json: refused before any write.
    tfcs = json.loads((bundle / "tensorfusionclusters.json").read_text())
    tfcs[0]["spec"]["gpuPools"][0]["specTemplate"]["componentConfig"]["hypervisor"]["image"] = HV + ":forged"
    forge(bundle, "tensorfusionclusters.json", json.dumps(tfcs))
    before, versions = history(helm, lab), resource_versions(api_client)
    run = snapshot(lab, helm, tmp_path / "snaps", skip=True)
    [item] = run.task_results("Info")["bundles"]
    assert (item["usable"], item["signature"]) == (False, "invalid"), item
    run, res = release(lab, helm, state="rolled_back", snapshot=str(bundle))
    assert run.rc != 0 and res["error"] == "UnusableBundle", res
    assert res["refused"] is True and res["changed"] is False
    assert "the index's signature does not verify" in res["msg"]
    assert history(helm, lab) == before and resource_versions(api_client) == versions
    # Tamper with the values, index left: the checksum says so.
    (bundle / "values.json").write_text(json.dumps({"controller": {"image": {"tag": "evil"}}}))
    run = snapshot(lab, helm, tmp_path / "snaps", skip=True)
    [item] = run.task_results("Info")["bundles"]
    assert item["usable"] is False and any("values.json" in p for p in item["problems"])
    # Another cluster's bundle (same files, another kube-system UID) is refused too.
    run = snapshot(lab, helm, tmp_path / "other")
    assert run.rc == 0
    [item] = run.task_results("Info")["bundles"]
    assert (item["usable"], item["signature"]) == (True, "verified"), item
    run = snapshot(lab, helm, tmp_path / "other", skip=True, info_cluster_uid="another-cluster")
    [item] = run.task_results("Info")["bundles"]
    assert item["usable"] is False and "another cluster" in item["problems"][0]
    # A consistent bundle (index rewritten) that says it comes from another cluster.
    other = Path(item["path"])
    meta = json.loads((other / "meta.json").read_text())
    meta["cluster_uid"] = "0000-another-cluster"
    (other / "meta.json").write_text(json.dumps(meta))
    forge(other, "meta.json", json.dumps(meta))
    run = snapshot(lab, helm, tmp_path / "other", skip=True)
    [item] = run.task_results("Info")["bundles"]
    assert item["usable"] is False and item["problems"] == [
        "the index's signature does not verify (the bundle was changed after capture)",
        "captured on another cluster (kube-system UID 0000-another-cluster at %s; this cluster is %s)"
        % (meta["api_server"], run.task_results("Info")["cluster_uid"])]
    run, res = release(lab, helm, state="rolled_back", snapshot=str(other))
    assert run.rc != 0 and "another cluster" in res["msg"]
    assert history(helm, lab) == before


def test_keep_prunes_and_absent_removes(lab, helm, tmp_path):
    dest = tmp_path / "snaps"
    paths = []
    for _attempt in range(3):
        run = snapshot(lab, helm, dest, keep=2)
        assert run.rc == 0, run.stdout[-2000:]
        paths.append(run.task_results("Snapshot")["bundle"])
    assert sorted(str(p) for p in dest.iterdir()) == sorted(paths[1:])
    assert run.task_results("Snapshot")["pruned"] == [paths[0]] or paths[0] not in \
        [str(p) for p in dest.iterdir()]
    run = snapshot(lab, helm, dest, state="absent", bundle=paths[1])
    assert run.rc == 0 and run.task_results("Snapshot")["changed"] is True
    assert [str(p) for p in dest.iterdir()] == [paths[2]]


def test_missing_chart_version_fails_and_leaves_the_release(lab, helm):
    before, values = history(helm, lab), user_values(helm, lab)
    run, res = release(lab, helm, chart_repo_url=lab["tensorfusion"]["chart_repo"], chart_version="9.9.9")
    assert run.rc != 0
    assert "9.9.9" in res["msg"]
    assert history(helm, lab) == before and user_values(helm, lab) == values


def _release_secret(api_client, name, ns, revision):
    return client.CoreV1Api(api_client).read_namespaced_secret(
        "sh.helm.release.v1.%s.v%s" % (name, revision), ns)


def make_pending(api_client, name, ns, status="pending-upgrade"):
    """What an interrupted helm upgrade leaves: a newest revision stuck in ``status``."""
    revisions = [int(s.metadata.labels["version"]) for s in client.CoreV1Api(api_client)
                 .list_namespaced_secret(ns, label_selector="owner=helm,name=%s" % name).items]
    last = _release_secret(api_client, name, ns, max(revisions))
    body = json.loads(gzip.decompress(base64.b64decode(base64.b64decode(last.data["release"]))))
    body["version"] = max(revisions) + 1
    body["info"]["status"] = status
    body["info"]["description"] = "Preparing upgrade"
    data = base64.b64encode(gzip.compress(json.dumps(body).encode())).decode()
    labels = dict(last.metadata.labels, status=status, version=str(body["version"]))
    client.CoreV1Api(api_client).create_namespaced_secret(ns, {
        "metadata": {"name": "sh.helm.release.v1.%s.v%s" % (name, body["version"]), "labels": labels},
        "type": "helm.sh/release.v1", "data": {"release": base64.b64encode(data.encode()).decode()}})
    return body["version"]


def test_pending_release_fails_clearly_then_is_recovered(lab, api_client, helm, ns):
    run, res = release(lab, helm, name="tiny", namespace=ns, chart_ref=TINY, values={"greeting": "one"})
    assert run.rc == 0 and res["changed"] is True, res
    pending = make_pending(api_client, "tiny", ns)
    assert max(history(helm, lab, "tiny", ns), key=lambda r: r["revision"])["status"] == "pending-upgrade"
    before = history(helm, lab, "tiny", ns)
    run, res = release(lab, helm, name="tiny", namespace=ns, chart_ref=TINY, values={"greeting": "two"})
    assert run.rc != 0
    assert "pending-upgrade" in res["msg"] and "recover_pending=rollback" in res["msg"]
    assert res["revision"] == pending and res["last_deployed_revision"] == pending - 1
    assert history(helm, lab, "tiny", ns) == before
    run, res = release(lab, helm, name="tiny", namespace=ns, chart_ref=TINY, values={"greeting": "two"},
                       recover_pending="rollback")
    assert run.rc == 0, res
    assert res["recovered"] == {"from_status": "pending-upgrade", "from_revision": pending,
                                "to_revision": pending - 1}
    last = max(history(helm, lab, "tiny", ns), key=lambda r: r["revision"])
    assert last["status"] == "deployed" and last["revision"] == pending + 2
    cm = client.CoreV1Api(api_client).read_namespaced_config_map("tiny-config", ns)
    assert cm.data["greeting"] == "two"


def test_a_rollback_of_a_pending_release_recovers_it_first_when_told(lab, api_client, helm, ns):
    """#45: a helm write cut off (an API server outage, a killed run) leaves the release
    pending-upgrade; helm rollback then fails with 'another operation is in progress'. A rollback
    refuses clearly by default, and with recover_pending=rollback (what the rollback role passes:
    the runbook holds the maintenance lock) goes back to helm's own last deployed revision first,
    says so, then rolls back as asked."""
    tiny_two_revisions(lab, helm, ns)
    pending = make_pending(api_client, "tiny", ns)
    before = history(helm, lab, "tiny", ns)
    run, res = release(lab, helm, name="tiny", namespace=ns, state="rolled_back", revision=1)
    assert run.rc != 0 and "stuck pending-upgrade" in res["msg"] and "recover_pending=rollback" in res["msg"], res
    assert history(helm, lab, "tiny", ns) == before
    run, res = release(lab, helm, name="tiny", namespace=ns, state="rolled_back", revision=1,
                       recover_pending="rollback")
    assert run.rc == 0 and res["changed"] is True, res
    assert res["recovered"] == {"from_status": "pending-upgrade", "from_revision": pending, "to_revision": pending - 1}
    assert greeting(api_client, ns) == "one"
    last = max(history(helm, lab, "tiny", ns), key=lambda r: r["revision"])
    assert last["status"] == "deployed"


def tiny_two_revisions(lab, helm, ns):
    for greeting in ("one", "two"):
        run, res = release(lab, helm, name="tiny", namespace=ns, chart_ref=TINY,
                           values={"greeting": greeting})
        assert run.rc == 0, res


def greeting(api_client, ns):
    return client.CoreV1Api(api_client).read_namespaced_config_map("tiny-config", ns).data["greeting"]


def test_rollback_to_revision_is_idempotent(lab, api_client, helm, ns):
    tiny_two_revisions(lab, helm, ns)
    run, res = release(lab, helm, name="tiny", namespace=ns, state="rolled_back", revision=1, check=True)
    assert run.rc == 0 and res["changed"] is True
    assert len(history(helm, lab, "tiny", ns)) == 2
    run, res = release(lab, helm, name="tiny", namespace=ns, state="rolled_back", revision=1)
    assert run.rc == 0 and res["changed"] is True, res
    # Revision 1 rendered the kept Secret, revision 2 did not: helm rollback would fail on it.
    assert res["method"] == "upgrade-to-stored-chart"
    assert greeting(api_client, ns) == "one"
    last = max(history(helm, lab, "tiny", ns), key=lambda r: r["revision"])
    assert last["status"] == "deployed" and last["chart"] == "tfops-tiny-0.1.0"
    assert user_values(helm, lab, "tiny", ns) == {"greeting": "one"}
    run, res = release(lab, helm, name="tiny", namespace=ns, state="rolled_back", revision=1)
    assert run.rc == 0 and res["changed"] is False and res["revision_after"] == 3
    run, res = release(lab, helm, name="tiny", namespace=ns, state="rolled_back", revision=2)
    assert run.rc == 0 and res["changed"] is True and res["method"] == "rollback", res
    assert greeting(api_client, ns) == "two"


def test_rollback_after_a_failed_helm_rollback_reverts_everything(lab, api_client, helm, ns):
    tiny_two_revisions(lab, helm, ns)
    # The trap: plain helm rollback fails on the kept Secret and leaves a failed revision whose
    # manifest is revision 1's, from which a second helm rollback would merge (and change nothing).
    proc = subprocess.run([helm, "rollback", "tiny", "1", "-n", ns, "--kubeconfig", lab["kubeconfig"]],
                          capture_output=True, text=True, check=False)
    assert proc.returncode != 0 and "tiny-kept" in proc.stderr
    assert max(history(helm, lab, "tiny", ns), key=lambda r: r["revision"])["status"] == "failed"
    run, res = release(lab, helm, name="tiny", namespace=ns, state="rolled_back", revision=1)
    assert run.rc == 0 and res["changed"] is True, res
    assert res["method"] == "upgrade-to-stored-chart"
    assert greeting(api_client, ns) == "one"
    run, res = release(lab, helm, name="tiny", namespace=ns, state="rolled_back", revision=1)
    assert run.rc == 0 and res["changed"] is False, res


def test_no_secret_in_results_diffs_output_or_bundles(lab, api_client, helm, ns, tmp_path):
    secrets = ["pw-%s" % uuid.uuid4().hex, "enroll-%s" % uuid.uuid4().hex, "tok-%s" % uuid.uuid4().hex]
    values = {"auth": {"password": secrets[0]}, "agent": {"enrollToken": secrets[1]}}
    runs = []
    run, res = release(lab, helm, verbose=True, diff=True, name="tiny", namespace=ns, chart_ref=TINY,
                       values=values, set_values=[{"value": "agent.agentId=", "value_type": "string"}])
    assert run.rc == 0, res
    runs.append(run)
    secret = client.CoreV1Api(api_client).read_namespaced_secret("tiny-auth", ns)
    assert base64.b64decode(secret.data["password"]).decode() == secrets[0], "the chart got the value"
    # A change of a secret-looking --set value, in check mode and for real, with diff and -vvv.
    for check in (True, False):
        run, res = release(lab, helm, verbose=True, diff=True, check=check, name="tiny", namespace=ns,
                           chart_ref=TINY, values=values,
                           set_values=[{"value": "agent.enrollToken=" + secrets[2]}])
        assert run.rc == 0 and res["changed"] is True, res
        assert res["diff"], "diff returned"
        runs.append(run)
    run = snapshot(lab, helm, tmp_path / "snaps", verbose=True, name="tiny", namespace=ns)
    assert run.rc == 0, run.stdout[-2000:]
    runs.append(run)
    bundle = Path(run.task_results("Snapshot")["bundle"])
    record = json.loads((bundle / "secrets.json").read_text())
    assert {"tiny-auth"} <= {s["name"] for s in record}
    for run in runs:
        text = run.stdout + run.stderr + json.dumps(run.results)
        for value in secrets:
            assert value not in text
    for path in bundle.iterdir():
        for value in secrets:
            assert value not in path.read_text()
            assert base64.b64encode(value.encode()).decode() not in path.read_text()


def helm_major(helm):
    out = subprocess.run([helm, "version", "--template", "{{.Version}}"], capture_output=True,
                         text=True, check=True).stdout
    return out.lstrip("v")[0]


CRDS = str(Path(__file__).resolve().parent / "charts" / "tfops-crds")
WIDGETS = "widgets.tfops-test.example.com"


def test_apply_crds_updates_what_helm_does_not(lab, api_client, helm, ns):
    ext = client.ApiextensionsV1Api(api_client)
    old = {"metadata": {"name": WIDGETS, "labels": {"tfops-test/schema": "v1"}},
           "spec": {"group": "tfops-test.example.com", "scope": "Namespaced",
                    "names": {"kind": "Widget", "plural": "widgets", "singular": "widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                        "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                            "type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}}
    ext.create_custom_resource_definition(old)
    try:
        run, res = release(lab, helm, check=True, name="crds", namespace=ns, chart_ref=CRDS, apply_crds=True)
        assert run.rc == 0, res
        assert res["crds"] == {WIDGETS: True} and res["changed"] is True
        assert ext.read_custom_resource_definition(WIDGETS).metadata.labels["tfops-test/schema"] == "v1"
        run, res = release(lab, helm, name="crds", namespace=ns, chart_ref=CRDS, apply_crds=True)
        assert run.rc == 0, res
        assert res["crds"] == {WIDGETS: True}
        crd = ext.read_custom_resource_definition(WIDGETS)
        assert crd.metadata.labels["tfops-test/schema"] == "v2"
        assert "colour" in crd.spec.versions[0].schema.open_apiv3_schema.properties["spec"].properties
        run, res = release(lab, helm, name="crds", namespace=ns, chart_ref=CRDS, apply_crds=True)
        assert run.rc == 0 and res["crds"] == {WIDGETS: False} and res["changed"] is False, res
    finally:
        ext.delete_custom_resource_definition(WIDGETS)
        # A CRD's deletion finishes after its finalizer.
        wait_for(ext.list_custom_resource_definition, lambda crd: crd.metadata.name == WIDGETS, gone=True,
                 what=f"CustomResourceDefinition {WIDGETS} to be deleted")
