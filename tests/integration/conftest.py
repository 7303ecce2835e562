"""Fixtures of the integration tests that talk to the session lab."""
import pytest

from .rbac_helpers import service_accounts


@pytest.fixture(scope="session")
def sa_kubeconfig(lab):
    """(runbook, drop=None, helm_chart=True) -> path of a 0600 kubeconfig for a ServiceAccount bound
    to exactly that runbook's RBAC (docs/rbac), minus ``drop``; see rbac_helpers.py."""
    yield from service_accounts(lab)
