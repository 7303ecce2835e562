"""Shared pytest fixtures: the lab (a real control plane) and clients against it.

The session's lab is started once and stopped at the end. A lab that cannot start is an error
with the reason, never a skip.
"""
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from lab import cluster, paths  # noqa: E402
from lab import tensorfusion as tf  # noqa: E402  (the add-on; also registers it for outages)

# The tests' files (values, charts, kubeconfigs, snapshots) are in temporary folders, and helm and
# the other ansible-core versions' Pythons in the lab's cache: the runbooks' path variables may
# name them as the controller's opt-in allows (runbook/places.py; tests that give the runbook
# another HOME move the home folder away from the cache). The tests of that confinement name
# files elsewhere (/etc) or set their own.
os.environ.setdefault("TFOPS_ALLOWED_PATHS", os.pathsep.join([tempfile.gettempdir(), str(paths.cache_dir())]))

# The collection's code imports as ansible_collections.tensorfusion.ops...
COLLECTIONS_ROOT = paths.collections_link(REPO)
sys.path.insert(0, str(COLLECTIONS_ROOT))
os.environ["ANSIBLE_COLLECTIONS_PATH"] = str(COLLECTIONS_ROOT)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "smoke: the version matrix's smoke set (precheck, the upgrade runbook, a "
                   "rotation, a rollback), run with -m smoke on each minor of TFOPS_TEST_KUBE_VERSION")


def kube_version():
    """The Kubernetes minor the session's labs run: TFOPS_TEST_KUBE_VERSION, else the lab's
    default (tests/run-all.sh runs the smoke set on the oldest and newest minors this way)."""
    return os.environ.get("TFOPS_TEST_KUBE_VERSION") or paths.DEFAULT_KUBE_MINOR


def keep_logs_if_failed(request, state_dir: Path) -> None:
    """A lab about to be stopped after a failed test keeps its logs beside it
    (``<state_dir>.failed-logs``): a test's failure is often explained by what a component did."""
    logs = state_dir / "logs"
    if request.session.testsfailed and logs.is_dir():
        kept = state_dir.with_name(state_dir.name + ".failed-logs")
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(logs, kept)
        print(f"\nthe lab's logs are kept in {kept}", file=sys.stderr)


@pytest.fixture(scope="session")
def lab(tmp_path_factory, request):
    """The session's lab: a dict with server, token, kubeconfig, state_dir, nodes, tensorfusion,
    on Kubernetes ``kube_version()``. TFOPS_TEST_LAB_STATE reuses a running lab (started with
    ``up --tensorfusion --nodes 10``)."""
    state_dir = Path(os.environ.get("TFOPS_TEST_LAB_STATE") or
                     tmp_path_factory.mktemp("lab-state", numbered=True))
    reuse = bool(os.environ.get("TFOPS_TEST_LAB_STATE"))
    # TensorFusion (CRDs, chart v1, operator double, webhook) on 10 GPU nodes: enough for the
    # 20 %-batch examples of docs/operator-behaviour.md 3.3, small enough for 2 cores.
    state = cluster.up(state_dir, nodes=10, cpu_nodes=1, addons=[tf.addon()],
                       kube_version=kube_version())
    yield state
    if not reuse:
        keep_logs_if_failed(request, state_dir)
        cluster.down(state_dir)


@pytest.fixture(scope="session")
def api_client(lab):
    from kubernetes import client, config
    cfg = client.Configuration()
    config.load_kube_config(lab["kubeconfig"], client_configuration=cfg)
    api = client.ApiClient(cfg)
    yield api
    api.close()


@pytest.fixture(scope="session")
def helm_bins():
    return {"3": str(paths.helm_binary("3")), "4": str(paths.helm_binary("4"))}


@pytest.fixture(scope="session")
def kubectl_bin():
    return str(paths.kubectl_binary())
