"""The retry policy without a cluster: what may be sent again, the backoff, the outage record."""
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import kube
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import retry


def test_reads_heal_writes_only_when_never_applied():
    assert retry.retriable("get", status=503) and retry.retriable("list", status=500)
    assert retry.retriable("watch", unreachable=True)
    assert not retry.retriable("get", status=404) and not retry.retriable("list", status=403)
    assert retry.retriable("replace", status=429) and retry.retriable("patch", status=503)
    assert not retry.retriable("replace", status=500), "a 500 may come after the write was applied"
    assert not retry.retriable("create", unreachable=True), "a reset connection may have carried it"
    assert retry.retriable("create", unreachable=True, refused=True)
    assert not retry.retriable("update", status=409) and not retry.retriable("create", status=422)


def test_backoff_is_capped_exponential_with_jitter():
    backoff = retry.Backoff(base=0.5, cap=5.0, rand=lambda: 1.0)
    assert [backoff.next() for attempt in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    low = retry.Backoff(base=0.5, cap=5.0, rand=lambda: 0.0)
    assert low.next() == 0.25
    backoff.reset()
    assert backoff.next() == 0.5


def test_outages_become_one_warning_each():
    now = [100.0]
    outages = retry.Outages(clock=lambda: now[0])
    outages.failed("refused")
    now[0] = 105.0
    outages.failed("refused again")
    outages.recovered()
    assert outages.warnings() == ["the API server could not be used for 5s (2 failed requests, retried; "
                                  "last: refused again)"]


def test_401_and_403_are_retried_only_right_after_the_api_server_could_not_be_reached():
    now = [100.0]
    outages = retry.Outages(clock=lambda: now[0])
    assert not retry.retriable("list", status=403, just_back=outages.just_back())
    outages.failed("cannot reach the API server", unreachable=True)
    outages.recovered()
    now[0] += 5  # a restarted API server whose RBAC caches have not synced yet
    assert retry.retriable("list", status=403, just_back=outages.just_back())
    assert retry.retriable("update", status=401, just_back=outages.just_back()), "refused: not applied"
    outages.failed("forbidden")  # a 403 does not move the time the server was last unreachable
    now[0] += retry.AUTH_SETTLE_SECONDS
    assert not retry.retriable("list", status=403, just_back=outages.just_back())
    assert not retry.retriable("get", status=404, just_back=True) and not retry.retriable("patch", status=422, just_back=True)


def test_a_404_from_the_router_is_retried_only_right_after_an_outage_a_missing_object_never():
    from kubernetes.client.rest import ApiException

    def answer(status, body):
        exc = ApiException(status=status, reason="Not Found")
        exc.body = body
        return exc

    router = answer(404, "404 page not found\n")  # before the CRD routes are registered
    missing = answer(404, '{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}')
    assert kube.route_missing(router) and not kube.route_missing(missing)
    assert not kube.route_missing(answer(500, "boom")), "only a 404 is the router's"
    typed = kube.api_error(router, "watch", "gpupools")
    assert kube.route_missing(typed) and not kube.route_missing(kube.api_error(missing, "get", "gpupools"))
    assert not kube.route_missing(kube.ApiError("the API server serves no GPUPool", status=404))
    for verb in ("watch", "update"):  # a router's 404 was not applied: a write is safe to resend
        assert retry.retriable(verb, status=404, just_back=True, route_missing=True)
        assert not retry.retriable(verb, status=404, just_back=False, route_missing=True)
        assert not retry.retriable(verb, status=404, just_back=True, route_missing=False)


def test_reads_the_api_server_kept_waiting_are_said_in_one_warning():
    """etcd away: kube-apiserver answers a list only once etcd is back (measured on the lab: 17 s of
    a 20 s outage) - no failure for the retries to see, but the wait is said."""
    outages = retry.Outages()
    outages.answered(0.2, "list pods")
    assert outages.warnings() == []
    outages.answered(17.4, "list pods in tensor-fusion-sys")
    outages.answered(6.0, "get gpupools/x")
    assert outages.warnings() == [
        "the API server kept 2 reads waiting for 23s in all, the longest 17s (list pods in tensor-fusion-sys): "
        "its storage, etcd, was away or it was overloaded"]
