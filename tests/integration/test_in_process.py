"""The modules run in ansible-playbook's worker (plugin_utils/in_process.py) give what they give
as module processes: the same tasks, both ways, against the lab; -vvv says which way each ran."""
import uuid

from .ansible_runner import run_playbook

TASKS = ["Window", "Health picture", "Take the lock", "Give it back", "A TTL of 0 is refused",
         "A namespace that does not exist"]
# Fields that differ run to run whichever way the module ran (times, resource versions).
VOLATILE = {"invocation", "lease", "previous", "diff", "api_requests"}


def both_ways(lab, lock_ns):
    runs, lease = {}, "in-process-" + uuid.uuid4().hex[:6]
    # A first run makes the Lease, so that both compared runs find it as the other left it.
    for way, extra in (("first", {}), ("in_process", {}), ("module_process", {"tfops_in_process": False})):
        runs[way] = run_playbook("in_process.yml", dict(extra, ip_kubeconfig=lab["kubeconfig"],
                                                        ip_namespace=lock_ns, ip_lease=lease), args=["-vvv"])
        assert runs[way].rc == 0, runs[way].stdout[-3000:]
    return runs


def stable(result):
    return dict((k, v) for k, v in result.items() if k not in VOLATILE and not k.startswith("_ansible"))


def test_the_same_tasks_give_the_same_results_in_the_worker_and_as_module_processes(lab, lock_ns):
    runs = both_ways(lab, lock_ns)
    inside, outside = runs["in_process"], runs["module_process"]
    assert "tensorfusion.ops.maintenance_lock runs in ansible-playbook's worker" in inside.stdout
    assert "runs as a module process" not in inside.stdout
    assert "tensorfusion.ops.maintenance_lock runs as a module process: tfops_in_process is false" in outside.stdout
    assert "runs in ansible-playbook's worker" not in outside.stdout
    for task in TASKS:
        a, b = inside.task_results(task), outside.task_results(task)
        if task == "Health picture":  # the same picture (times and versions aside)
            assert a["summary"] == b["summary"] and a["api_server"] == b["api_server"]
            assert sorted(f["code"] for f in a["findings"]) == sorted(f["code"] for f in b["findings"])
            assert sorted(a["data"]) == sorted(b["data"])
            continue
        if task in ("Take the lock", "Give it back"):
            assert a["lease"]["holder"] == b["lease"]["holder"], task
            assert (a.get("previous") or {}).get("holder") == (b.get("previous") or {}).get("holder"), task
        assert stable(a) == stable(b), task
    for run in (inside, outside):
        statuses = dict((r["task"], r["status"]) for r in run.results)
        assert [statuses[t] for t in TASKS] == ["ok"] * 4 + ["failed"] * 2, statuses
    assert inside.task_results("A TTL of 0 is refused")["msg"] == "ttl must be at least 1 second"
    missing = inside.task_results("A namespace that does not exist")
    assert (missing["status"], missing["changed"]) == (404, False), missing
