"""Fixtures of the integration tests that talk to the session lab."""
import uuid

import pytest
from kubernetes import client

from .helpers import wait_for
from .rbac_helpers import service_accounts
from .settle import settle

FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):  # pylint: disable=unused-argument
    outcome = yield
    if outcome.get_result().failed:
        item.stash[FAILED] = True


@pytest.fixture(autouse=True)
def lab_settled_after_a_failure(request):
    """A test that fails may leave the session lab mid-change (a campaign at 20 %, a node not
    Ready). Every test after it would then fail for that reason, slowly, each at its own
    deadline: instead the lab gets time to settle, and if it does not, the session stops here,
    naming the test and what is unsettled."""
    api_client = request.getfixturevalue("api_client") if "lab" in request.fixturenames else None
    yield
    if api_client is None or not request.node.stash.get(FAILED, False):
        return
    try:
        settle(api_client, timeout=240)
    except Exception as exc:  # noqa: BLE001 - unsettled, or the API server itself is gone
        pytest.exit(f"{request.node.nodeid} failed and left the session lab unsettled, so the "
                    f"tests after it cannot be judged: {exc}", returncode=1)


@pytest.fixture(scope="session")
def sa_kubeconfig(lab):
    """(runbook, drop=None, helm_chart=True) -> path of a 0600 kubeconfig for a ServiceAccount bound
    to exactly that runbook's RBAC (roles/rbac/files), minus ``drop``; see rbac_helpers.py."""
    yield from service_accounts(lab)


@pytest.fixture
def ns(api_client):
    """A namespace of the test's own, deleted afterwards; ready for Pods: its default
    ServiceAccount exists (admission refuses Pods until the ServiceAccount controller has made it,
    which takes a while after an API server outage). A test may delete it itself."""
    core = client.CoreV1Api(api_client)
    name = "t-" + uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": name}})
    try:
        wait_for(core.list_namespaced_service_account, lambda sa: sa.metadata.name == "default",
                 namespace=name, timeout=20, what=f"the default ServiceAccount of namespace {name}")
    except AssertionError:
        # Right after an API server outage kube-controller-manager's informers may still be in
        # their back-off (measured: over 60 s in two full runs); the ServiceAccount its
        # ServiceAccount controller would make is made here, as that controller makes it.
        try:
            core.create_namespaced_service_account(name, {"metadata": {"name": "default"}})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    wait_for(core.list_namespaced_service_account, lambda sa: sa.metadata.name == "default",
             namespace=name, what=f"the default ServiceAccount of namespace {name}")
    yield name
    try:
        core.delete_namespace(name)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


@pytest.fixture(scope="module")
def lock_ns(api_client):
    """A namespace of the test module's own for maintenance lock Leases."""
    core = client.CoreV1Api(api_client)
    name = "lock-" + uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
