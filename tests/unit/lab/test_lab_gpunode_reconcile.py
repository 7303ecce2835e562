"""The double's GPUNode reconcile on a cache that is still filling: a restarted double's
listings arrive kind by kind, and a GPUNode seen before its pool must come back by itself (no
other event would: a pool event queues Nodes, and a GPUNode without a Pod gets no Pod events)."""
from lab.tensorfusion import controllers as c
from lab.tensorfusion.kube import Api
from lab.tensorfusion.operator import Knobs
from lab.tensorfusion.store import Store, WorkQueue


def gpunode(name, pool):
    return {"metadata": {"name": name, "uid": "u-" + name, "resourceVersion": "1",
                         "labels": {c.L_OWNER: pool}}, "status": {"phase": "Pending"}}


def test_a_gpunode_whose_pool_is_not_cached_yet_is_reconciled_again():
    store = Store()
    ctl = c.Controllers(store, Api(store), WorkQueue(), Knobs())
    store.put("gpunode", "tfops-gpu-0", gpunode("tfops-gpu-0", "shared"))
    again = ctl.reconcile_gpunode("tfops-gpu-0")
    assert again is not None and 0 < again <= 5, "the key must come back, soon"


def test_a_gone_gpunode_is_not_reconciled_again():
    store = Store()
    ctl = c.Controllers(store, Api(store), WorkQueue(), Knobs())
    assert ctl.reconcile_gpunode("tfops-gpu-0") is None
