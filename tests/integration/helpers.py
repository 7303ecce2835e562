"""What the integration tests share: TensorFusion's API group and the session lab's names, the
TensorFusionCluster and its GPUPool as dicts, and one way to wait: ``wait_for``, a watch with a
deadline whose failure says what it waited for."""
import time

from kubernetes import client, watch
from kubernetes.client.rest import ApiException

GROUP, VERSION = "tensor-fusion.ai", "v1"
NS = "tensor-fusion-sys"  # the TensorFusion release's namespace (and its Helm release's name)
TFC = "tensor-fusion"  # the session lab's TensorFusionCluster
POOL = "tensor-fusion-shared"  # its GPUPool


def service_account_token(api_client, namespace, name, create=True):
    """A token of ServiceAccount ``name`` (created first when ``create``) from the TokenRequest
    API, as kubectl create token does: since Kubernetes 1.24 no Secret holds one by itself."""
    core = client.CoreV1Api(api_client)
    if create:
        core.create_namespaced_service_account(namespace, {"metadata": {"name": name}})
    review = core.create_namespaced_service_account_token(
        name, namespace, {"spec": {"expirationSeconds": 3600}})
    return review.status.token


def tfc(api_client, name=TFC):
    """The TensorFusionCluster, as a dict."""
    return client.CustomObjectsApi(api_client).get_cluster_custom_object(GROUP, VERSION, "tensorfusionclusters", name)


def gpupool(api_client, name=POOL):
    """The GPUPool, as a dict."""
    return client.CustomObjectsApi(api_client).get_cluster_custom_object(GROUP, VERSION, "gpupools", name)


def deployment(name, image="registry.lab/app:1", replicas=2):
    """A Deployment's body: ``replicas`` Pods of ``image``, labelled app=<name>."""
    labels = {"app": name}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": image}]}}}}


def _key(obj):
    """(namespace, name) of a typed object of the client or of a custom object (a dict)."""
    if isinstance(obj, dict):
        return obj["metadata"].get("namespace"), obj["metadata"]["name"]
    return obj.metadata.namespace, obj.metadata.name


def _listed(listing):
    if isinstance(listing, dict):
        return listing["items"], listing["metadata"]["resourceVersion"]
    return listing.items, listing.metadata.resource_version


def _condition(predicate):
    """A predicate in words: its ``what`` attribute, or where it is written."""
    if getattr(predicate, "what", None):
        return predicate.what
    code = getattr(predicate, "__code__", None)
    return "the condition at %s:%s" % (code.co_filename.rsplit("/", 1)[-1], code.co_firstlineno) if code \
        else repr(predicate)


def _what(list_fn, predicate, args, kwargs, gone):
    call = "%s(%s)" % (getattr(list_fn, "__name__", list_fn),
                       ", ".join([repr(a) for a in args] + ["%s=%r" % kv for kv in kwargs.items()]))
    return "%s of %s with %s" % ("no object" if gone else "an object", call, _condition(predicate))


def wait_for(list_fn, predicate, *args, timeout=60, what=None, gone=False, every=None, **kwargs):
    """Until predicate(obj) holds for an object that ``list_fn(*args, **kwargs)`` lists (a list call
    of the kubernetes client: typed objects, or custom objects as dicts), and return that object;
    with ``gone``, until it holds for none of them (returns None: deleted, or changed).

    One listing, then a watch from its resourceVersion: every event is looked at as it comes.
    Bounded: after ``timeout`` seconds an AssertionError says what was waited for: ``what``
    (text, or a callable asked at that moment, e.g. for what is still missing), by default the
    list call and the predicate (its ``what`` attribute, or where it is written). ``every``: list
    again at least this often, for a predicate that looks at more than the object it is given."""
    deadline = time.monotonic() + timeout
    while True:
        items, rv = _listed(list_fn(*args, **kwargs))
        matching = set()  # with gone: the objects the predicate still holds for
        if gone:
            matching = {_key(o) for o in items if predicate(o)}
            if not matching:
                return None
        else:
            found = next((o for o in items if predicate(o)), None)
            if found is not None:
                return found
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        w = watch.Watch()
        try:
            for event in w.stream(list_fn, *args, resource_version=rv,
                                  timeout_seconds=max(1, int(min(remaining, every or remaining))), **kwargs):
                obj = event["object"]
                if gone:
                    key = _key(obj)
                    if event["type"] != "DELETED" and predicate(obj):
                        matching.add(key)
                    else:
                        matching.discard(key)
                    if not matching:
                        w.stop()
                        return None
                elif event["type"] != "DELETED" and predicate(obj):
                    w.stop()
                    return obj
                if time.monotonic() >= deadline:
                    w.stop()
        except ApiException as exc:
            if exc.status != 410:  # 410: the resourceVersion is too old to watch from; list again
                raise
    text = what() if callable(what) else what or _what(list_fn, predicate, args, kwargs, gone)
    raise AssertionError(f"waited {timeout}s in vain for {text}")


def pool_progress_at_least(pct):
    """A predicate of the GPUPool: its hypervisor campaign at ``pct`` % or more, not finished."""
    def check(pool):
        status = ((pool.get("status") or {}).get("componentStatus") or {})
        return int(status.get("hypervisorUpdateProgress") or 0) >= pct and \
            not status.get("hypervisorConfigSynced")
    check.what = f"its hypervisor campaign at {pct}% or more and not finished"
    return check


def wait_pool(api_client, predicate, timeout=120, name=POOL):
    """Watch the GPUPool until predicate(pool dict) holds; return it."""
    return wait_for(client.CustomObjectsApi(api_client).list_cluster_custom_object,
                    lambda pool: pool["metadata"]["name"] == name and predicate(pool),
                    GROUP, VERSION, "gpupools", timeout=timeout, what=f"GPUPool {name} with {_condition(predicate)}")


def files_holding(root, values):
    """The files under ``root`` that hold any of ``values`` (text) plainly or in base64."""
    import base64
    from pathlib import Path
    needles = [v.encode() for v in values] + [base64.b64encode(v.encode()) for v in values]
    found = set()
    for path in Path(root).rglob("*"):
        try:
            data = path.read_bytes() if path.is_file() else b""
        except OSError:  # removed between the listing and the read
            continue
        if any(needle in data for needle in needles):
            found.add(str(path))
    return found


def run_watching_temp_files(start, tmp_root, values, timeout=900):
    """``start(env)`` (a start_playbook) with every temporary directory of the run under
    ``tmp_root`` (TMPDIR, Ansible's local and remote tmp), looked into every 0.2 s while it runs
    and once after: (the run, the files that held any of ``values`` at any time)."""
    import os
    tmp_root.mkdir(parents=True, exist_ok=True)
    env = {"TMPDIR": str(tmp_root), "ANSIBLE_LOCAL_TEMP": os.path.join(str(tmp_root), "local"),
           "ANSIBLE_REMOTE_TEMP": os.path.join(str(tmp_root), "remote")}
    running, found = start(env), set()
    deadline = time.monotonic() + timeout
    while running.proc.poll() is None and time.monotonic() < deadline:
        found |= files_holding(tmp_root, values)
        time.sleep(0.2)
    run = running.finish(timeout=max(1, deadline - time.monotonic()))
    return run, found | files_holding(tmp_root, values)
