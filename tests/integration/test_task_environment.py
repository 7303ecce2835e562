"""A task acts on the cluster it names (#36): a task's environment: (K8S_AUTH_KUBECONFIG,
KUBECONFIG) is applied in ansible-playbook's worker exactly as for a module process. Two labs:
the session's, named by the process's environment, and a second one named by the tasks'; each
write must land in the second, and nothing may move in the first."""
import uuid

import pytest
from kubernetes import client, config

from lab import cluster

from .ansible_runner import run_playbook


@pytest.fixture(scope="module")
def second_lab(tmp_path_factory):
    """A bare second lab, its state folder outside the repository."""
    state_dir = tmp_path_factory.mktemp("second-lab") / "state"
    state = cluster.up(state_dir, nodes=1, cpu_nodes=0)
    cfg = client.Configuration()
    config.load_kube_config(state["kubeconfig"], client_configuration=cfg)
    api = client.ApiClient(cfg)
    yield state, api
    api.close()
    cluster.down(state_dir)


def leases(api_client):
    """{name: resourceVersion} of the Leases in namespace default."""
    return {lease.metadata.name: lease.metadata.resource_version
            for lease in client.CoordinationV1Api(api_client).list_namespaced_lease("default").items}


@pytest.mark.parametrize("way, extra", [("in_process", {}), ("module_process", {"tfops_in_process": False})])
def test_a_tasks_environment_names_the_cluster_it_writes_to(lab, api_client, second_lab, way, extra):
    second, second_api = second_lab
    lease = "te-%s-%s" % (way.replace("_", "-"), uuid.uuid4().hex[:6])
    first_before, second_before = leases(api_client), leases(second_api)
    run = run_playbook("task_environment.yml", dict(extra, te_lease=lease, te_second=second["kubeconfig"]),
                       env={"K8S_AUTH_KUBECONFIG": lab["kubeconfig"]}, args=["-vvv"])
    assert run.rc == 0, run.stdout[-3000:]
    ran = "runs in ansible-playbook's worker" if way == "in_process" else "runs as a module process"
    assert "tensorfusion.ops.maintenance_lock %s" % ran in run.stdout
    # The task without an environment wrote to the process's cluster: the setup can tell them apart.
    assert run.task_results("Without environment - the process's own cluster")["api_server"] == lab["server"]
    for task, name in (("With K8S_AUTH_KUBECONFIG in its environment - the second cluster", lease),
                       ("With KUBECONFIG in its environment - the second cluster", lease + "-kubeconfig")):
        result = run.task_results(task)
        assert result["api_server"] == second["server"], (task, result)
        assert client.CoordinationV1Api(second_api).read_namespaced_lease(name, "default").spec.holder_identity \
            == "task-environment"
    first_after, second_after = leases(api_client), leases(second_api)
    # In the first lab only the Lease of the task without an environment is new; nothing else moved.
    assert {k: v for k, v in first_after.items() if k != lease + "-own"} == first_before
    assert lease + "-own" in first_after and lease not in first_after and lease + "-kubeconfig" not in first_after
    assert set(second_after) - set(second_before) == {lease, lease + "-kubeconfig"}
