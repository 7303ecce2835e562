"""Fixtures of the integration tests that talk to the session lab."""
import uuid

import pytest
from kubernetes import client

from .rbac_helpers import service_accounts


@pytest.fixture(scope="session")
def sa_kubeconfig(lab):
    """(runbook, drop=None, helm_chart=True) -> path of a 0600 kubeconfig for a ServiceAccount bound
    to exactly that runbook's RBAC (docs/rbac), minus ``drop``; see rbac_helpers.py."""
    yield from service_accounts(lab)


@pytest.fixture
def ns(api_client):
    """A namespace of the test's own, deleted afterwards; ready for Pods: its default
    ServiceAccount has its token (v1.20's admission refuses Pods until then, which takes a while
    after an API server outage, while the token controller catches up)."""
    from .test_lab import wait_for
    core = client.CoreV1Api(api_client)
    name = "t-" + uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": name}})
    wait_for(core.list_namespaced_service_account,
             lambda sa: sa.metadata.name == "default" and sa.secrets, namespace=name)
    yield name
    core.delete_namespace(name)


@pytest.fixture(scope="module")
def lock_ns(api_client):
    """A namespace of the test module's own for maintenance lock Leases."""
    core = client.CoreV1Api(api_client)
    name = "lock-" + uuid.uuid4().hex[:6]
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_namespace(name)
