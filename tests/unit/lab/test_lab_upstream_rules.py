"""Rules of upstream's GPUNode, Node and TensorFusionCluster controllers that the double follows
(docs/operator-behaviour.md 2 and 4.1, and its list of differences), checked on the double's
reconcilers with a recording API instead of a cluster."""
import copy
import itertools
import json

from lab.tensorfusion import controllers as c
from lab.tensorfusion import hashes
from lab.tensorfusion.operator import Knobs
from lab.tensorfusion.store import Store, WorkQueue

NS = "tensor-fusion-sys"
POOL = "tf-shared"
_rv = itertools.count(100)


def merge(base, patch):
    if not isinstance(patch, dict) or not isinstance(base, dict):
        return copy.deepcopy(patch)
    out = dict(base)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge(base.get(k), v)
    return out


class RecordingApi:
    """The double's Api without a cluster: writes are recorded and reach the cache."""

    def __init__(self, store):
        self.store, self.calls = store, []

    def _put(self, kind, obj):
        obj["metadata"]["resourceVersion"] = str(next(_rv))
        key = c.meta(obj)["name"]
        if c.meta(obj).get("namespace"):
            key = f"{c.meta(obj)['namespace']}/{key}"
        self.store.put(kind, key, obj)
        return obj

    def create(self, kind, body):
        self.calls.append(("create", kind, c.meta(body)["name"]))
        body = copy.deepcopy(body)
        body["metadata"].setdefault("uid", "uid-" + c.meta(body)["name"])
        return self._put(kind, body)

    def patch(self, kind, key, body, status=False):
        self.calls.append(("patch", kind, key, body))
        cur = self.store.get(kind, key)
        if cur is None or isinstance(body, list):
            return cur
        return self._put(kind, merge(cur, body))

    def delete(self, kind, key, uid=None):
        self.calls.append(("delete", kind, key))

    def deleted(self, kind):
        return [call[2] for call in self.calls if call[0] == "delete" and call[1] == kind]


def pool_obj(enable_vector=False, containers=None, rules=None, default_mode="soft",
             vendor="NVIDIA", status=None):
    hv = {"image": "hv:1", "portNumber": 8000, "enableVector": enable_vector,
          "vectorImage": "vector:1", "podTemplate": {"template": {"spec": {
              "containers": containers if containers is not None else [
                  {"name": "tensor-fusion-hypervisor",
                   "env": [{"name": "TF_LOG_LEVEL", "value": "info"}]}]}}}}
    return {"metadata": {"name": POOL, "uid": "uid-pool", "resourceVersion": "1",
                         "annotations": {}},
            "spec": {"componentConfig": {"hypervisor": hv, "worker": {"image": "wk:1"},
                                         "client": {"image": "cl:1"}},
                     "nodeManagerConfig": {"defaultVendor": vendor,
                                           "defaultIsolationMode": default_mode,
                                           "isolationModeRules": rules or []}},
            "status": status or {}}


def node_obj(name, ready=True, labels=None, unschedulable=False):
    return {"metadata": {"name": name, "uid": "uid-" + name, "resourceVersion": "1",
                         "labels": labels or {}},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "Unknown"}]}}


def gpunode_obj(name, phase="Running", labels=None):
    return {"metadata": {"name": name, "uid": "uid-gn-" + name, "resourceVersion": "1",
                         "labels": {c.L_OWNER: POOL, c.pool_label(POOL): "true", **(labels or {})}},
            "status": {"phase": phase}}


def gpu_obj(node):
    return {"metadata": {"name": f"{node}-gpu-0", "uid": f"uid-{node}-gpu", "resourceVersion": "1",
                         "labels": {c.L_OWNER: node, c.L_POOL: POOL}},
            "status": {"phase": "Running", "uuid": "GPU-1"}}


def setup(pool, nodes=(), gpunodes=(), policy="dynamic"):
    store = Store()
    api = RecordingApi(store)
    ctl = c.Controllers(store, api, WorkQueue(), Knobs(), namespace=NS)
    ctl.operator_version, ctl.isolation_policy = "2.17.0", policy
    store.put("pool", POOL, pool)
    for n in nodes:
        store.put("node", c.meta(n)["name"], n)
    for g in gpunodes:
        store.put("gpunode", c.meta(g)["name"], g)
        store.put("gpu", f"{c.meta(g)['name']}-gpu-0", gpu_obj(c.meta(g)["name"]))
    return store, api, ctl


def running_pod(pod, ready=True):
    pod = copy.deepcopy(pod)
    pod["metadata"].update(uid="uid-pod", resourceVersion="5")
    pod["status"] = {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}
    return pod


def test_the_pod_is_built_from_bare_containers_when_their_count_does_not_fit_enable_vector():
    store, api, ctl = setup(pool_obj(enable_vector=True), [node_obj("n1")],
                            [gpunode_obj("n1", phase="Pending")])
    ctl.reconcile_gpunode("n1")
    pod = store.get("pod", f"{NS}/hypervisor-n1")
    names = [ctr["name"] for ctr in pod["spec"]["containers"]]
    assert names == ["tensorfusion-hypervisor", "vector"]
    assert "env" not in pod["spec"]["containers"][0], "the template's env is dropped"
    assert pod["spec"]["containers"][0]["image"] == "hv:1"
    assert pod["spec"]["containers"][1]["image"] == "vector:1"
    assert pod["metadata"]["labels"][c.L_HASH] == ctl.node_hash(store.get("pool", POOL),
                                                                store.get("gpunode", "n1"))


def test_under_the_dynamic_policy_every_hypervisor_runs_soft_and_rules_roll_nothing():
    hard_rule = [{"mode": "hard", "selector": {"matchLabels": {"tier": "a"}}}]
    nodes = [node_obj("n1", labels={"tier": "a"})]
    for policy, mode in (("dynamic", "soft"), ("static", "hard")):
        store, api, ctl = setup(pool_obj(rules=hard_rule), nodes,
                                [gpunode_obj("n1", phase="Pending")], policy=policy)
        ctl.reconcile_gpunode("n1")
        args = store.get("pod", f"{NS}/hypervisor-n1")["spec"]["containers"][0]["args"]
        assert args == [f"--isolation-mode={mode}", f"--isolation-policy={policy}"]
    # Per node, the dynamic policy hashes every node as soft: a rule change moves no node hash.
    store, _, ctl = setup(pool_obj(), nodes, [gpunode_obj("n1")])
    before = ctl.node_hash(store.get("pool", POOL), store.get("gpunode", "n1"))
    store.put("pool", POOL, pool_obj(rules=hard_rule))
    assert ctl.node_hash(store.get("pool", POOL), store.get("gpunode", "n1")) == before


def test_a_pod_with_outdated_isolation_args_waits_on_a_running_node_while_a_rollout_is_due():
    stale_args = ["--isolation-mode=soft", "--isolation-policy=static"]
    for phase, expect_deleted in (("Running", False), ("Pending", True)):
        store, api, ctl = setup(pool_obj(), [node_obj("n1")], [gpunode_obj("n1", phase=phase)])
        pod = running_pod(ctl.hypervisor_pod(store.get("pool", POOL), store.get("gpunode", "n1"),
                                             store.get("node", "n1"), "x"))
        pod["spec"]["containers"][0]["args"] = stale_args
        store.put("pod", f"{NS}/hypervisor-n1", pod)
        ctl.reconcile_gpunode("n1")   # dynamic: a policy rollout is always due
        assert (api.deleted("pod") == [f"{NS}/hypervisor-n1"]) is expect_deleted, phase
    # Static and synced at the static hash: nothing is due, so even a Running node's Pod goes.
    store, api, ctl = setup(pool_obj(), [node_obj("n1")], [gpunode_obj("n1")], policy="static")
    pool = store.get("pool", POOL)
    pool["status"] = {"componentStatus": {"hypervisor": ctl.pool_hash(pool, "hypervisor"),
                                          "hypervisorConfigSynced": True}}
    pod = running_pod(ctl.hypervisor_pod(pool, store.get("gpunode", "n1"), store.get("node", "n1"),
                                         ctl.node_hash(pool, store.get("gpunode", "n1"))))
    pod["spec"]["containers"][0]["args"] = ["--isolation-mode=soft", "--isolation-policy=dynamic"]
    store.put("pod", f"{NS}/hypervisor-n1", pod)
    ctl.reconcile_gpunode("n1")
    assert api.deleted("pod") == [f"{NS}/hypervisor-n1"]


def test_a_not_ready_node_keeps_its_gpunode_phase_and_only_a_never_running_pod_is_removed():
    store, api, ctl = setup(pool_obj(), [node_obj("n1", ready=False)], [gpunode_obj("n1")])
    pool, gn = store.get("pool", POOL), store.get("gpunode", "n1")
    pod = running_pod(ctl.hypervisor_pod(pool, gn, store.get("node", "n1"), ctl.node_hash(pool, gn)),
                      ready=False)   # the node controller marked it not Ready
    store.put("pod", f"{NS}/hypervisor-n1", pod)
    assert ctl.reconcile_gpunode("n1") is None
    assert api.calls == [], "no phase change, no deletion: the GPUNode stays Running"
    pod["status"]["phase"] = "Pending"
    store.put("pod", f"{NS}/hypervisor-n1", dict(pod, metadata=dict(pod["metadata"], resourceVersion="9")))
    ctl.reconcile_gpunode("n1")
    assert api.deleted("pod") == [f"{NS}/hypervisor-n1"]
    assert not [call for call in api.calls if call[1] == "gpunode"]


def test_a_single_vendor_pool_hashes_its_nodes_with_its_own_vendor():
    revisions = json.dumps({"nvidia": "r1", "amd": "r2"})
    pool = pool_obj()
    pool["metadata"]["annotations"][c.A_REVISIONS] = revisions
    store, _, ctl = setup(pool, [node_obj("n1"), node_obj("n2")],
                          [gpunode_obj("n1", labels={c.L_VENDOR: "AMD"}), gpunode_obj("n2")])
    pool = store.get("pool", POOL)
    assert ctl.node_hash(pool, store.get("gpunode", "n1")) == \
        ctl.node_hash(pool, store.get("gpunode", "n2")), "a stale vendor label counts for nothing"
    multi = copy.deepcopy(pool)
    multi["spec"]["nodeManagerConfig"]["multiVendorNodeSelector"] = {"AMD": {}, "NVIDIA": {}}
    assert ctl.node_hash(multi, store.get("gpunode", "n1")) != \
        ctl.node_hash(multi, store.get("gpunode", "n2"))
    assert c.node_vendor(multi["spec"], store.get("gpunode", "n1")) == "AMD"


def test_a_cordoned_node_gets_no_gpunode_and_a_new_one_carries_the_vendor_label():
    pool = pool_obj()
    pool["spec"]["nodeManagerConfig"]["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "gpu", "operator": "In", "values": ["true"]}]}]}
    store, api, ctl = setup(pool, [node_obj("n1", labels={"gpu": "true"}, unschedulable=True),
                                   node_obj("n2", labels={"gpu": "true", c.L_VENDOR: "NVIDIA"})])
    ctl.reconcile_node("n1")
    ctl.reconcile_node("n2")
    assert [call[2] for call in api.calls if call[0] == "create"] == ["n2"]
    assert store.get("gpunode", "n2")["metadata"]["labels"][c.L_VENDOR] == "NVIDIA"


def test_a_gpunode_being_deleted_is_destroying_and_keeps_its_pool_updating():
    store, api, ctl = setup(pool_obj(), [node_obj("n1"), node_obj("n2")],
                            [gpunode_obj("n1"), gpunode_obj("n2")])
    gone = store.get("gpunode", "n2")
    gone["metadata"].update(deletionTimestamp="2027-01-01T00:00:00Z", finalizers=[c.FINALIZER])
    store.put("pod", f"{NS}/hypervisor-n2", running_pod({"metadata": {"name": "hypervisor-n2",
                                                                      "namespace": NS}}))
    ctl.reconcile_gpunode("n2")
    assert store.get("gpunode", "n2")["status"]["phase"] == "Destroying"
    ctl.reconcile_pool(POOL)
    status = store.get("pool", POOL)["status"]
    assert (status["phase"], status["totalNodes"], status["readyNodes"]) == ("Updating", 2, 1)


def test_cluster_conditions_are_set_by_type_with_upstreams_reasons_and_no_message():
    store, api, ctl = setup(pool_obj())
    tfc = {"metadata": {"name": "tf", "uid": "uid-tf", "resourceVersion": "1",
                        "finalizers": [c.FINALIZER]},
           "spec": {"gpuPools": [{"name": "shared", "specTemplate": {}}]},
           "status": {"phase": "Running", "conditions": [
               {"type": "CloudVendorConnectionReady", "status": "True", "reason": "OK",
                "message": "", "lastTransitionTime": "2027-01-01T00:00:00Z"},
               {"type": "Ready", "status": "False", "reason": "ResourcesUpdated", "message": "",
                "lastTransitionTime": "2027-01-01T00:00:00Z"}]}}
    store.put("tfc", "tf", tfc)
    pool = store.get("pool", POOL)
    pool["metadata"]["labels"] = {c.L_OWNER: "tf"}
    pool["metadata"]["ownerReferences"] = [{"kind": "TensorFusionCluster", "name": "tf"}]
    pool["metadata"]["annotations"][c.A_DEFAULT_POOL] = "false"
    pool["status"] = {"phase": "Updating"}
    pool["spec"] = {}
    ctl.reconcile_tfc("tf")
    conds = {cd["type"]: cd for cd in store.get("tfc", "tf")["status"]["conditions"]}
    assert {t: (cd["status"], cd["reason"], cd["message"]) for t, cd in conds.items()} == {
        "CloudVendorConnectionReady": ("True", "OK", ""),
        "Ready": ("False", "ResourcesUpdated", ""),
        "GPUPoolReady": ("False", "StillChecking", ""),
        "TimeSeriesDatabaseReady": ("True", "StillChecking", "")}
    assert conds["Ready"]["lastTransitionTime"] == "2027-01-01T00:00:00Z", "status unchanged"
    assert hashes.DYNAMIC == "dynamic"
