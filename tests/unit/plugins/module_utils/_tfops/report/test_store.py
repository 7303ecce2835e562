"""The report kept in the cluster: the ConfigMap's name and labels, what fits below the object
limit (plain, gzip, without the HTML page, refused), which old reports are pruned; no Secret value."""
import base64
import gzip
import json
import os
import random
import re

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import record
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import store as report_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

from .test_record import upgrade_params

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def test_the_name_is_a_dns_name_of_the_runbook_host_and_utc_start():
    name = report_store.configmap_name("rotate_secret", "Prod_Cluster.eu", "2026-11-29T03:00:01.123456+01:00")
    assert name == "tfops-report-rotate-secret-prod-cluster-eu-20261129t020001z"
    assert report_store.configmap_name("upgrade", "lab", "2026-11-29T02:00:01.9Z") == \
        report_store.configmap_name("upgrade", "lab", "2026-11-29T02:00:01Z"), "one run, one name"
    long = report_store.configmap_name("upgrade", "h" * 300 + "-", "2026-11-29T02:00:01Z")
    assert len(long) <= 253 and DNS_SUBDOMAIN.match(long) and long.endswith("-20261129t020001z")
    assert DNS_SUBDOMAIN.match(report_store.configmap_name("upgrade", "--", "2026-11-29T02:00:01Z"))


def test_two_runs_started_in_the_same_second_get_two_names_and_folders():
    started = "2026-11-29T02:00:01.5Z"
    one = report_store.configmap_name("upgrade", "lab", started, "k3j2h4g5q1")
    two = report_store.configmap_name("upgrade", "lab", started, "a1b2c3d4e5")
    assert one == "tfops-report-upgrade-lab-20261129t020001z-k3j2h4g5q1" and one != two
    assert DNS_SUBDOMAIN.match(report_store.configmap_name("upgrade", "lab", started, "Run_ID.1"))
    long = report_store.configmap_name("upgrade", "h" * 300, started, "k3j2h4g5q1")
    assert len(long) <= 253 and long.endswith("-20261129t020001z-k3j2h4g5q1")
    run = {"playbook": "upgrade", "host": "lab", "started": started}
    assert report_render.run_folder_name(dict(run, run_id="k3j2h4g5q1")) == "upgrade-lab-20261129T020001Z-k3j2h4g5q1"
    assert report_render.run_folder_name(dict(run, run_id="a1b2c3d4e5")) != \
        report_render.run_folder_name(dict(run, run_id="k3j2h4g5q1"))
    assert report_render.run_folder_name(run) == "upgrade-lab-20261129T020001Z", "no token: as before"


def test_a_configmap_of_another_run_is_never_replaced():
    mine = {"metadata": {"annotations": {report_store.RUN_STARTED: "2026-11-29T02:00:01.5Z",
                                         report_store.RUN_ID: "k3j2h4g5q1"}}}
    assert report_store.same_run(mine, "2026-11-29T02:00:01.5Z", "k3j2h4g5q1")
    assert not report_store.same_run(mine, "2026-11-29T02:00:01.5Z", "a1b2c3d4e5")
    assert not report_store.same_run(mine, "2026-11-29T02:00:01.7Z", "k3j2h4g5q1")
    legacy = {"metadata": {"annotations": {report_store.RUN_STARTED: "2026-11-29T02:00:01.5Z"}}}
    assert report_store.same_run(legacy, "2026-11-29T02:00:01.5Z", None)
    body, _content, _dropped = report_store.configmap_body("ns", "n", "upgrade", "2026-11-29T02:00:01.5Z",
                                                           {"report.json": "{}"}, run_id="k3j2h4g5q1")
    assert body["metadata"]["annotations"][report_store.RUN_ID] == "k3j2h4g5q1"


def test_labels_name_the_runbook_and_refuse_what_cannot_be_a_label():
    assert report_store.report_labels("rotate_secret") == {
        "app.kubernetes.io/managed-by": "tensorfusion.ops", "tensorfusion.ops/report-of": "rotate_secret"}
    assert report_store.label_selector("upgrade") == \
        "app.kubernetes.io/managed-by=tensorfusion.ops,tensorfusion.ops/report-of=upgrade"
    for bad in ("", "-upgrade", "a" * 64, "up grade"):
        with pytest.raises(InvalidInput, match="cannot label"):
            report_store.report_labels(bad)


def _files(html_size=10, json_size=10):
    return {"report.json": '{"x": "%s"}' % ("j" * json_size), "report.md": "# run",
            "report.html": "<p>%s</p>" % ("h" * html_size)}


def _noise(size):
    rnd = random.Random(17)
    return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _i in range(size))


def test_small_reports_stay_plain_text():
    data, binary, content, dropped = report_store.payload(_files(), budget=1000)
    assert (content, binary, dropped) == ("plain", {}, []) and data == _files()


def test_large_reports_are_gzipped_and_decode_back():
    files = _files(html_size=5000, json_size=5000)
    data, binary, content, dropped = report_store.payload(files, budget=2000)
    assert (content, data, dropped) == ("gzip", {}, [])
    assert sorted(binary) == ["report.html.gz", "report.json.gz", "report.md.gz"]
    assert gzip.decompress(base64.b64decode(binary["report.json.gz"])).decode() == files["report.json"]


def test_the_html_page_goes_first_when_even_gzip_is_too_large():
    files = dict(_files(json_size=3000), **{"report.html": _noise(3000)})  # noise does not compress
    data, binary, content, dropped = report_store.payload(files, budget=2000)
    assert (content, dropped) == ("gzip-without-html", ["report.html"])
    assert sorted(binary) == ["report.json.gz", "report.md.gz"]


def test_a_report_whose_compressed_json_is_too_large_is_refused():
    with pytest.raises(InvalidInput, match="too large for a ConfigMap"):
        report_store.payload({"report.json": _noise(3000), "report.md": "", "report.html": ""}, budget=2000)


def test_the_real_limit_leaves_room_below_one_mebibyte():
    assert report_store.DATA_BUDGET < 1024 * 1024


def test_the_body_is_labelled_and_says_how_it_was_packed():
    body, content, dropped = report_store.configmap_body(
        "tf", "tfops-report-upgrade-lab-20261129t020001z", "upgrade", "2026-11-29T02:00:01Z", _files())
    assert body["metadata"]["labels"]["tensorfusion.ops/report-of"] == "upgrade"
    assert body["metadata"]["annotations"] == {"tensorfusion.ops/run-started": "2026-11-29T02:00:01Z",
                                               "tensorfusion.ops/report-content": "plain"}
    assert "binaryData" not in body and body["data"]["report.json"] == _files()["report.json"]
    assert report_store.reference("tf", "n") == "configmap://tf/n"


@pytest.mark.parametrize("changed", [True, False])
def test_a_run_that_took_a_restore_point_says_whether_it_then_changed_the_cluster(changed):
    """What a rollback reads to pass over the restore point of a run that changed nothing."""
    body, _content, _dropped = report_store.configmap_body(
        "tf", "n", "upgrade", "2026-11-29T02:00:01Z", _files(), restore_point=("2026-11-29T02:00:05.1Z", changed))
    meta = body["metadata"]
    assert meta["labels"][report_store.RUN_CHANGED] == ("true" if changed else "false")
    assert meta["annotations"][report_store.RESTORE_POINT_CAPTURED] == "2026-11-29T02:00:05.1Z"
    assert report_store.unchanged_restore_points([body]) == (set() if changed else {"2026-11-29T02:00:05.1Z"})
    # a run that took no restore point (a rotation, check mode) says nothing of one
    plain, _content, _dropped = report_store.configmap_body(
        "tf", "n", "upgrade", "2026-11-29T02:00:01Z", _files(), restore_point=(None, False))
    assert report_store.RUN_CHANGED not in plain["metadata"]["labels"]
    assert report_store.unchanged_restore_points([plain, {"metadata": {}}]) == set()


def test_the_record_names_the_restore_point_the_run_took_and_none_in_check_mode():
    params = upgrade_params()
    taken = record.build_record(params, "2026-11-29T02:10:00Z")["restore_point"]
    assert taken["path"] == params["results"]["snapshot"]["bundle"], taken
    assert record.build_record(dict(params, check_run=True), "2026-11-29T02:10:00Z")["restore_point"] is None


def _meta(name, started=None, created="2026-11-01T00:00:00Z"):
    meta = {"name": name, "creationTimestamp": created}
    if started:
        meta["annotations"] = {report_store.RUN_STARTED: started}
    return {"metadata": meta}


def test_pruning_keeps_the_newest_runs_and_always_this_one():
    items = [_meta("a", "2026-11-01T00:00:00Z"), _meta("z", "2026-11-02T00:00:00Z"),
             _meta("c", "2026-11-03T00:00:00Z"), _meta("b", "2026-11-04T00:00:00Z"),
             _meta("mine", "2026-11-05T00:00:00Z")]
    assert report_store.to_prune(items, 3, "mine") == ["z", "a"], "by the run's start, not the name"
    assert report_store.to_prune(items, 1, "mine") == ["b", "c", "z", "a"]
    assert report_store.to_prune(items, 10, "mine") == []
    # this run's report is kept even when another looks newer (a clock ahead) or the list missed it
    assert "mine" not in report_store.to_prune(items + [_meta("future", "2027-01-01T00:00:00Z")], 1, "mine")
    assert report_store.to_prune([_meta("old", created="2026-01-01T00:00:00Z"), _meta("x", "2026-11-01T00:00:00Z")],
                                 1, "mine") == ["x", "old"]


def test_no_secret_value_reaches_the_configmap():
    params = upgrade_params()
    params["results"]["rotate"] = {"changed": True, "secret": {"name": "creds", "data": {"sk": "s3cr3t-value"}},
                                   "steps": [], "diff": {"after": {"sk": "s3cr3t-value"}}}
    params["results"]["verify"]["secret"] = {"password": "hunter2"}
    rec = record.build_record(params, "2026-11-29T02:02:00Z")
    files = report_render.report_files(rec)
    for budget in (report_store.DATA_BUDGET, 3000):  # plain and compressed
        body, _content, _dropped = report_store.configmap_body("tf", "n", "upgrade", rec["started"], files,
                                                               budget=budget)
        texts = [json.dumps(body)] + [gzip.decompress(base64.b64decode(v)).decode()
                                      for v in (body.get("binaryData") or {}).values()]
        assert not [t for t in texts if "hunter2" in t or "s3cr3t-value" in t]
        assert any("creds" in t for t in texts), "the Secret's name is reported, its content is not"


def test_the_runbooks_bind_the_report_rbac():
    import yaml
    repo = os.path.join(os.path.dirname(os.path.abspath(__file__)), *[os.pardir] * 6)  # the repository
    index = yaml.safe_load(open(os.path.join(repo, "roles", "rbac", "files", "runbooks.yml")))
    assert sorted(index["report"]["runbooks"]) == sorted(index["runbooks"])
    role, = yaml.safe_load(open(os.path.join(repo, "roles", "rbac", "files", index["report"]["file"])))["items"]
    assert role["kind"] == "Role" and role["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "update", "list", "delete"]}]
