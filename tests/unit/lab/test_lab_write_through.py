"""A write-through copy that carries someone else's newer spec is that spec's watch event: the
double must reconcile it, although the real watch event then looks older than the cache."""
from lab.tensorfusion.operator import Operator


def tfc(rv, generation, image):
    return {"apiVersion": "tensor-fusion.ai/v1", "kind": "TensorFusionCluster",
            "metadata": {"name": "tf", "uid": "u1", "resourceVersion": str(rv),
                         "generation": generation},
            "spec": {"gpuPools": [{"name": "p", "specTemplate": {"componentConfig": {
                "hypervisor": {"image": image}}}}]}}


def drain(queue):
    keys = []
    while len(queue):
        key = queue.get()
        keys.append(key)
        queue.done(key)
    return keys


def test_newer_generation_in_a_status_write_response_is_reconciled():
    op = Operator(workers=0, gpus_per_node=1)
    op.on_event("tfc", {"type": "ADDED", "object": tfc(1, 1, "hv:a")})
    assert drain(op.queue) == [("tfc", "tf")]
    # Our status patch lands after a user's spec edit (rv 2): its response is rv 3, generation 2.
    op.api._keep("tfc", tfc(3, 2, "hv:b"))
    # The user's own event (rv 2) is older than the cache now and is dropped...
    op.on_event("tfc", {"type": "MODIFIED", "object": tfc(2, 2, "hv:b")})
    # ...and our status write's event (rv 3) shows no generation change against the cache.
    op.on_event("tfc", {"type": "MODIFIED", "object": tfc(3, 2, "hv:b")})
    assert ("tfc", "tf") in drain(op.queue)


def test_own_status_write_alone_does_not_requeue_the_cluster():
    op = Operator(workers=0, gpus_per_node=1)
    op.on_event("tfc", {"type": "ADDED", "object": tfc(1, 1, "hv:a")})
    drain(op.queue)
    op.api._keep("tfc", tfc(2, 1, "hv:a"))
    op.on_event("tfc", {"type": "MODIFIED", "object": tfc(2, 1, "hv:a")})
    assert drain(op.queue) == []   # GenerationChangedPredicate: a status write is no spec change
