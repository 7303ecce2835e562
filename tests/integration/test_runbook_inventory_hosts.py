"""Every runbook runs for an inventory host (``-e tfops_hosts=<host>``, the fleet playbook for its
inventory) whose interpreter nobody set: interpreter discovery would pick the system Python, which
lacks the collection's libraries; the runbooks must run their modules with the controller's
Python. precheck runs in full; the runbooks that change things stop at a maintenance window that
is never open (a cron window shorter than its safety margin): their preflight and lock modules
must have run for the window module to be reached at all."""
import subprocess
import sys
from pathlib import Path

import pytest

from .ansible_runner import run_playbook
from .settle import settle

HOST = "cluster1"
# Discovery searches PATH: the system's bin folders first, where python3 has no kubernetes (the
# test itself checks that), and ansible-playbook's own folder last so that it is still found.
DISCOVERY_ENV = {"ANSIBLE_PYTHON_INTERPRETER": "auto_silent",
                 "PATH": f"/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:{Path(sys.executable).parent}"}
NEVER_OPEN = {"tfops_window_cron": "0 0 1 1 *", "tfops_window_duration": "1m"}


@pytest.fixture(scope="module")
def inventory(lab, api_client, helm_bins, tmp_path_factory):
    """(inventory file, base variables): one host, a local connection and no interpreter."""
    tmp = tmp_path_factory.mktemp("inventory-hosts")
    path = tmp / "clusters.ini"
    path.write_text(f"{HOST} ansible_connection=local\n")
    settle(api_client)
    base = {"tfops_kubeconfig": lab["kubeconfig"], "tfops_helm_binary": helm_bins["3"],
            "tfops_artifacts_dir": str(tmp / "artifacts"), "tfops_snapshot_dir": str(tmp / "snapshots"),
            "tfops_verify_acceptance_pod": False}
    return path, base


def test_the_system_python_lacks_the_collections_libraries():
    """What makes the runs below able to fail: the interpreter discovery would pick."""
    proc = subprocess.run(["/usr/bin/python3", "-c", "import kubernetes"], capture_output=True, check=False)
    assert proc.returncode != 0


def _run(playbook, inventory, extra):
    path, base = inventory
    return run_playbook(playbook, dict(base, **extra), env=DISCOVERY_ENV, args=("-i", str(path)), timeout=300)


def test_precheck_runs_for_an_inventory_host(inventory):
    run = _run("tensorfusion.ops.precheck", inventory, {"tfops_hosts": HOST})
    info = run.task_results("Gather the health picture of TensorFusion", host=HOST)
    assert not info.get("failed"), info.get("msg")
    assert run.rc == 0, run.stdout[-3000:]


@pytest.mark.parametrize("playbook, extra", [
    ("tensorfusion.ops.upgrade", {"tfops_hosts": HOST, "tfops_chart_version": "1.8.7"}),
    ("tensorfusion.ops.rollback", {"tfops_hosts": HOST}),
    # Inputs its preflight accepts (#36: every variable is checked before the lock): a Secret that exists.
    ("tensorfusion.ops.rotate_secret", {"tfops_hosts": HOST, "tfops_secret_name": "tf-cloud-vendor-credentials",
                                        "tfops_secret_string_data": {"token": "never-written"}}),
    ("tensorfusion.ops.fleet_upgrade", {"tfops_fleet_hosts": HOST, "tfops_chart_version": "1.8.7"}),
])
def test_a_changing_runbook_reaches_its_window_for_an_inventory_host(inventory, playbook, extra):
    run = _run(playbook, inventory, dict(extra, **NEVER_OPEN))
    window = run.task_results("Evaluate the maintenance window", host=HOST)
    assert window.get("error") == "OutsideWindow", window.get("msg")
    assert run.rc != 0
