"""tf_cluster_info's findings as pure functions over a gathered picture."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster import findings
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster.info import (
    slim_cluster,
    selector_matches,
    slim_pool,
)


def healthy():
    comp = {"hash": "h", "progress": 100, "synced": True, "in_progress": "", "auto_update": True}
    return {"namespace": "tensor-fusion-sys",
            "clusters": [{"name": "tf", "phase": "Running"}],
            "pools": [{"name": "tf-shared", "phase": "Running", "ready_nodes": 4,
                       "components": {"hypervisor": dict(comp), "worker": dict(comp, synced=False, auto_update=False),
                                      "client": dict(comp, hash="")}}],
            "gpunodes": [{"name": "n1", "phase": "Running"}],
            "hypervisors": [{"name": "hypervisor-n1", "namespace": "tensor-fusion-sys", "node": "n1",
                             "ready": True, "reason": None}],
            "controller": [{"name": "ctl", "namespace": "tensor-fusion-sys", "replicas": 1, "available": 1}],
            "alert_manager": [{"name": "am", "replicas": 1, "ready": 1}],
            "release": {"name": "tensor-fusion-sys", "revision": 3, "status": "deployed"},
            "warning_events": [],
            "workloads": [{"kind": "Deployment", "namespace": "app", "name": "llm", "replicas": 2,
                           "readiness_probe": True, "pdb": True}]}


def codes(data):
    return sorted((f["code"], f["severity"]) for f in findings.builtin_findings(data))


def test_healthy_has_no_blocking_finding():
    assert codes(healthy()) == []


@pytest.mark.parametrize("mutate,expected", [
    (lambda d: d["clusters"][0].update(phase="Updating"), ("CLUSTER_NOT_RUNNING", "blocking")),
    (lambda d: d["pools"][0].update(phase="Updating"), ("POOL_NOT_RUNNING", "blocking")),
    (lambda d: d["pools"][0]["components"]["hypervisor"].update(synced=False, in_progress="h2", progress=40),
     ("ROLLOUT_IN_PROGRESS", "blocking")),
    (lambda d: d["pools"][0]["components"]["hypervisor"].update(synced=False, progress=0),
     ("COMPONENT_NOT_SYNCED", "blocking")),
    (lambda d: d["pools"][0]["components"]["hypervisor"].update(synced=False, auto_update=False),
     ("COMPONENT_FROZEN", "info")),
    (lambda d: d["gpunodes"][0].update(phase="Pending"), ("GPUNODE_NOT_RUNNING", "blocking")),
    (lambda d: d["hypervisors"][0].update(ready=False, reason="ImagePullBackOff"), ("HYPERVISOR_NOT_READY", "blocking")),
    (lambda d: d["controller"][0].update(available=0), ("CONTROLLER_NOT_READY", "blocking")),
    (lambda d: d.update(controller=[]), ("CONTROLLER_MISSING", "blocking")),
    (lambda d: d["alert_manager"][0].update(ready=0), ("ALERT_MANAGER_NOT_READY", "warning")),
    (lambda d: d["release"].update(status="pending-upgrade"), ("RELEASE_PENDING", "blocking")),
    (lambda d: d["release"].update(status="failed"), ("RELEASE_FAILED", "blocking")),
    (lambda d: d["workloads"][0].update(replicas=1), ("WORKLOAD_SINGLE_REPLICA", "warning")),
    (lambda d: d["workloads"][0].update(readiness_probe=False), ("WORKLOAD_NO_READINESS_PROBE", "warning")),
    (lambda d: d["workloads"][0].update(pdb=False), ("WORKLOAD_NO_PDB", "warning")),
    (lambda d: d.update(warning_events=[{"message": "x"}]), ("WARNING_EVENTS", "info")),
])
def test_each_unhealthy_case_has_its_finding(mutate, expected):
    data = healthy()
    mutate(data)
    assert codes(data) == [expected]


def test_abandoned_campaign_next_to_a_synced_status_is_not_a_rollout():
    data = healthy()
    data["pools"][0]["components"]["hypervisor"]["in_progress"] = "stale"
    assert codes(data) == []


def test_selector_matching():
    labels = {"app": "llm", "tier": "gpu"}
    assert selector_matches({"matchLabels": {"app": "llm"}}, labels)
    assert not selector_matches({"matchLabels": {"app": "web"}}, labels)
    assert selector_matches({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}]}, labels)
    assert not selector_matches({}, labels), "an empty PDB selector selects nothing in policy/v1beta1"


def test_slim_pool_reads_omitted_fields_as_defaults():
    pool = slim_pool({"metadata": {"name": "p"}, "spec": {}, "status": {"phase": "Running"}})
    assert pool["components"]["hypervisor"] == {"hash": "", "progress": 0, "synced": False,
                                                "in_progress": "", "auto_update": False}


def test_cap_per_code_keeps_the_first_and_counts_the_rest_with_their_severity():
    found = ([findings.finding("WORKLOAD_NO_PDB", "warning", "wl/%d" % i, "m") for i in range(5)]
             + [findings.finding("GPUNODE_NOT_RUNNING", "blocking", "n/%d" % i, "m") for i in range(3)]
             + [findings.finding("WARNING_EVENTS", "info", "events", "m")])
    shown, omitted = findings.cap_per_code(found, 2)
    assert omitted == {"WORKLOAD_NO_PDB": 3, "GPUNODE_NOT_RUNNING": 1}
    assert [f["object"] for f in shown if f["code"] == "WORKLOAD_NO_PDB"] == ["wl/0", "wl/1", "3 more"]
    marker = [f for f in shown if f["object"] == "1 more"][0]
    assert marker["severity"] == "blocking" and "GPUNODE_NOT_RUNNING" in marker["message"]
    assert [f for f in shown if f["code"] == "WARNING_EVENTS"] == found[-1:]
    assert findings.cap_per_code(found, 0) == (found, {})


def _lock_data(holder, stale=False):
    return {"lock": {"namespace": "tensor-fusion-sys", "name": "tensorfusion-ops-maintenance",
                     "holder": holder, "stale": stale, "acquire_time": "2026-12-01T02:00:00.000000Z",
                     "expires": "2026-12-01T03:00:00.000000Z"}}


def test_a_lock_held_by_another_run_is_an_info_finding_with_holder_and_expiry():
    found, = findings._lock_findings(_lock_data("bob@laptop pid=7 run=x purpose=upgrade"), "alice@b run=y")
    assert (found["code"], found["severity"]) == ("MAINTENANCE_LOCK_HELD", "info")
    assert "held by bob@laptop pid=7 run=x purpose=upgrade since 2026-12-01T02:00:00" in found["message"]
    assert "expires 2026-12-01T03:00:00" in found["message"]
    stale, = findings._lock_findings(_lock_data("bob", stale=True))
    assert "stopped renewing it" in stale["message"]


def test_no_lock_finding_for_the_runs_own_lock_a_free_lock_or_none():
    assert findings._lock_findings(_lock_data("alice@b run=y"), "alice@b run=y") == []
    assert findings._lock_findings(_lock_data(None)) == []
    assert findings._lock_findings({"lock": None}) == [] == findings._lock_findings({})


def _business(kind, generation=2, observed=2, spec=None, status=None):
    """A business workload as the API server returns it (its Pod template opts in)."""
    return {"metadata": {"name": "llm", "namespace": "app", "generation": generation},
            "spec": dict({"template": {"metadata": {"labels": {"tensor-fusion.ai/enabled": "true"}},
                                       "spec": {"containers": [{"name": "app", "readinessProbe": {"tcpSocket": {"port": 80}}}]}}},
                         **(spec or {})),
            "status": dict({"observedGeneration": observed}, **(status or {}))}


DONE = {"Deployment": {"replicas": 3, "updatedReplicas": 3, "availableReplicas": 3},
        "StatefulSet": {"readyReplicas": 3, "updatedReplicas": 3, "currentRevision": "r1", "updateRevision": "r1"},
        "DaemonSet": {"desiredNumberScheduled": 4, "updatedNumberScheduled": 4, "numberAvailable": 4}}


@pytest.mark.parametrize("kind,obj,detail", [
    ("Deployment", _business("Deployment", generation=3, observed=2, spec={"replicas": 3}, status=DONE["Deployment"]),
     "has not yet seen generation 3"),
    ("Deployment", _business("Deployment", spec={"replicas": 3}, status=dict(DONE["Deployment"], updatedReplicas=1)),
     "1 of 3 replicas updated"),
    ("Deployment", _business("Deployment", spec={"replicas": 3}, status=dict(DONE["Deployment"], conditions=[
        {"type": "Progressing", "reason": "ProgressDeadlineExceeded", "message": "stuck"}])), "exceeded its progress deadline"),
    ("StatefulSet", _business("StatefulSet", spec={"replicas": 3}, status=dict(DONE["StatefulSet"], readyReplicas=2)),
     "2 of 3 replicas ready"),
    ("StatefulSet", _business("StatefulSet", spec={"replicas": 3}, status=dict(DONE["StatefulSet"], updateRevision="r2")),
     "on revision r2"),
    ("DaemonSet", _business("DaemonSet", status=dict(DONE["DaemonSet"], updatedNumberScheduled=1)), "1 of 4 Pods updated"),
])
def test_a_business_workload_in_the_middle_of_its_rollout_is_a_warning(kind, obj, detail):
    """The precheck's picture of a business workload (info.slim_workload) says why its rollout is not
    complete; the finding is a warning, never blocking (a business rollout is the team's own)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster.info import slim_workload
    slim = slim_workload(kind)(obj)
    assert detail in slim["rollout"], slim
    data = healthy()
    data["workloads"] = [dict(slim, pdb=True, replicas=2 if kind != "DaemonSet" else None)]
    found, = findings.builtin_findings(data)
    assert (found["code"], found["severity"], found["object"]) == (
        "WORKLOAD_ROLLOUT_IN_PROGRESS", "warning", "%s/app/llm" % kind.lower())
    assert detail in found["message"] and "let it finish first" in found["message"]
    # Complete: no rollout, no finding.
    finished = _business(kind, spec={"replicas": 3} if kind != "DaemonSet" else None, status=DONE[kind])
    assert slim_workload(kind)(finished)["rollout"] is None


def test_a_daemonset_is_judged_by_its_rollout_only_and_other_workloads_are_not_business():
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.cluster.info import slim_workload
    data = healthy()
    data["workloads"] = [dict(slim_workload("DaemonSet")(_business("DaemonSet", status=DONE["DaemonSet"])),
                              readiness_probe=False)]
    assert data["workloads"][0]["replicas"] is None
    assert codes(data) == [], "no replica, readinessProbe or PDB finding for a Pod per node"
    plain = _business("Deployment", status=DONE["Deployment"])
    plain["spec"]["template"]["metadata"]["labels"] = {"app": "web"}
    assert slim_workload("Deployment")(plain) is None


# A pool that tensorfusion.ops paused at a deadline is a resumable warning, not a blocking rollout.
def picture(paused_annotation=None):
    annotations = {"ops.tensor-fusion.ai/paused": paused_annotation} if paused_annotation else {}
    tfc = {"metadata": {"name": "tf", "annotations": annotations},
           "spec": {"gpuPools": [{"name": "shared"}]}, "status": {"phase": "Updating"}}
    mid = {"hash": "old", "progress": 40, "synced": False, "in_progress": "new", "auto_update": False}
    done = {"hash": "h", "progress": 100, "synced": True, "in_progress": "", "auto_update": True}
    return {"namespace": "tensor-fusion-sys", "clusters": [slim_cluster(tfc)],
            "pools": [{"name": "tf-shared", "phase": "Updating", "ready_nodes": 4,
                       "components": {"hypervisor": mid, "worker": dict(done), "client": dict(done)}}],
            "gpunodes": [], "hypervisors": [], "controller": [{"name": "ctl", "namespace": "x", "replicas": 1,
                                                               "available": 1}],
            "alert_manager": [], "release": {"name": "r", "revision": 1, "status": "deployed"},
            "warning_events": [], "workloads": []}


def test_slim_cluster_reads_the_marker():
    assert picture("shared:hypervisor")["clusters"][0]["paused"] == {"shared": ["hypervisor"]}


def test_a_rollout_paused_by_us_is_a_warning():
    assert codes(picture("shared:hypervisor")) == [("ROLLOUT_PAUSED", "warning")]


def test_a_marker_whose_flag_is_back_on_is_stale_and_ignored():
    data = picture("shared:hypervisor")
    data["pools"][0]["components"]["hypervisor"]["auto_update"] = True
    assert ("ROLLOUT_IN_PROGRESS", "blocking") in codes(data) and ("ROLLOUT_PAUSED", "warning") not in codes(data)


def test_a_rollout_in_progress_without_our_marker_blocks():
    assert ("ROLLOUT_IN_PROGRESS", "blocking") in codes(picture())
    assert ("POOL_NOT_RUNNING", "blocking") in codes(picture())
    assert ("CLUSTER_NOT_RUNNING", "blocking") in codes(picture())


def test_the_nodes_of_a_batch_that_a_pause_caught_are_warnings_of_that_pause():
    """A pause stops the rollout after the batch under way (the warden's pause of an interrupted
    run, #45 item 1): that batch's nodes are Pending for a while; the run that resumes waits them
    out. In any other pool they still block."""
    data = picture("shared:hypervisor")
    data["gpunodes"] = [{"name": "n1", "phase": "Pending", "pool": "tf-shared"},
                        {"name": "n2", "phase": "Pending", "pool": "tf-other"}]
    data["hypervisors"] = [{"name": "hv-n1", "namespace": "tensor-fusion-sys", "node": "n1", "ready": False, "reason": None}]
    found = dict(((f["code"], f["object"]), f) for f in findings.builtin_findings(data))
    assert found[("GPUNODE_NOT_RUNNING", "gpunode/n1")]["severity"] == "warning"
    assert "paused" in found[("GPUNODE_NOT_RUNNING", "gpunode/n1")]["message"]
    assert found[("HYPERVISOR_NOT_READY", "pod/tensor-fusion-sys/hv-n1")]["severity"] == "warning"
    assert found[("GPUNODE_NOT_RUNNING", "gpunode/n2")]["severity"] == "blocking"
    assert found[("GPUNODE_NOT_RUNNING", "gpunode/n2")]["pool"] == "tf-other"
    # without the pause, the same nodes block
    data = picture()
    data["gpunodes"] = [{"name": "n1", "phase": "Pending", "pool": "tf-shared"}]
    assert ("GPUNODE_NOT_RUNNING", "blocking") in codes(data)


@pytest.mark.parametrize("operator, hypervisor, stale", [
    ("static", "dynamic", True), ("Dynamic", "dynamic", False), (None, "dynamic", True), (None, "static", False),
    ("static", None, False),
])
def test_a_hypervisor_on_another_isolation_policy_than_the_operator_s_is_named(operator, hypervisor, stale):
    """#47 (3): upstream's operator recorded a policy switch but its hypervisors kept the old one."""
    data = healthy()
    data["controller"][0]["isolation_policy"] = operator
    data["hypervisors"][0]["isolation_policy"] = hypervisor
    found = [f for f in findings.builtin_findings(data) if f["code"] == "HYPERVISOR_POLICY_STALE"]
    assert bool(found) is stale, found
    if stale:
        assert found[0]["severity"] == "blocking" and "--isolation-policy=%s" % hypervisor in found[0]["message"]
        assert "delete the Pod, one node at a time" in found[0]["message"]


def test_controllers_that_disagree_name_no_policy():
    data = healthy()
    data["controller"] = [dict(data["controller"][0], isolation_policy="static"),
                          dict(data["controller"][0], name="other", isolation_policy="dynamic")]
    assert findings.operator_isolation_policy(data) is None
