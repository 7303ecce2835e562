"""The double's informer cache: a late write-through copy must not bring a deleted object back."""
from lab.tensorfusion.store import Store


def obj(uid, rv, **meta):
    return {"metadata": dict({"name": "p", "uid": uid, "resourceVersion": str(rv)}, **meta)}


def test_newer_wins_and_older_is_refused():
    store = Store()
    assert store.put("pool", "p", obj("a", 2)) == {}
    assert store.put("pool", "p", obj("a", 1)) is None
    assert store.get("pool", "p")["metadata"]["resourceVersion"] == "2"


def test_late_write_through_after_delete_is_refused():
    store = Store()
    store.put("pool", "p", obj("a", 2))
    store.remove("pool", "p", obj("a", 3))          # the watch's DELETED event
    assert store.put("pool", "p", obj("a", 3, deletionTimestamp="t")) is None  # the late response
    assert store.get("pool", "p") is None


def test_object_without_finalizers_and_deleting_is_gone():
    store = Store()
    store.put("pool", "p", obj("a", 2))
    assert store.put("pool", "p", obj("a", 3, deletionTimestamp="t", finalizers=[])) is None
    assert store.get("pool", "p") is None


def test_deleting_object_with_finalizers_is_kept():
    store = Store()
    assert store.put("pool", "p", obj("a", 3, deletionTimestamp="t", finalizers=["f"])) == {}
    assert store.get("pool", "p")["metadata"]["finalizers"] == ["f"]


def test_delete_of_an_old_object_keeps_the_one_recreated_under_its_name():
    store = Store()
    store.put("pod", "ns/p", obj("new", 9))
    store.remove("pod", "ns/p", obj("old", 5))
    assert store.get("pod", "ns/p")["metadata"]["uid"] == "new"
    store.remove("pod", "ns/p", obj("new", 10))
    assert store.get("pod", "ns/p") is None
