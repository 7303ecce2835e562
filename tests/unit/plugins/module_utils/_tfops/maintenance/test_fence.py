"""maintenance/fence.py's pure parts: reading /proc/<pid>/stat, finding the ansible-playbook ancestor, telling
an orphaned module (its ansible-playbook killed) from a live one; the holder identity of a run."""
import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import fence


def stat_line(pid, comm, ppid, start):
    rest = ["S", str(ppid)] + ["0"] * 17 + [str(start)] + ["0"] * 10
    return "%d (%s) %s" % (pid, comm, " ".join(rest))


def test_parse_stat_counts_fields_after_the_last_parenthesis():
    assert fence.parse_stat(stat_line(7, "python (x) y", 3, 12345)) == (3, 12345)


def test_a_zombie_has_ended():
    """An ansible-playbook ended by a signal whose parent has not reaped it yet still shows its
    pid: its run is over all the same (its lock's warden releases, its orphans stop)."""
    line = stat_line(7, "ansible-playbook (Z)", 3, 12345)
    assert not fence.ended(line)
    assert fence.ended(line.replace(") S ", ") Z ")) and fence.ended(line.replace(") S ", ") X "))


@pytest.mark.parametrize("argv, expected", [
    (["/venv/bin/python3", "/venv/bin/ansible-playbook", "site.yml"], True),
    (["/usr/bin/ansible-playbook", "-i", "inv"], True),
    (["/bin/sh", "-c", "python ansible-playbook"], False),
    (["/venv/bin/python", "/tmp/AnsiballZ_gpupool_rollout.py"], False),
    ([], False),
])
def test_is_ansible_playbook(argv, expected):
    assert fence.is_ansible_playbook(argv) is expected


# module 40 -> sh 30 -> worker 20 -> ansible-playbook 10 -> bash 5 -> init 1
TREE = {30: (20, 300), 20: (10, 200), 10: (5, 100), 5: (1, 50)}


ARGV = {30: ["/bin/sh", "-c", "python x"], 20: ["python", "/venv/bin/ansible-playbook", "p.yml"],
        10: ["python", "/venv/bin/ansible-playbook", "p.yml"], 5: ["bash"]}


def test_the_chain_ends_at_the_topmost_ansible_playbook_whose_parent_is_not_watched():
    chain = fence.controller_chain(stat=TREE.get, argv=ARGV.get, start=30)
    assert chain == [(30, 20, 300), (20, 10, 200), (10, None, 100)]
    assert fence.controller_pid(chain) == 10


def test_no_ansible_playbook_ancestor_means_no_controller_check():
    assert fence.controller_chain(stat=TREE.get, argv=lambda pid: ["bash"], start=30) == []


def test_a_killed_ansible_playbook_reparents_the_worker_and_the_chain_is_dead():
    chain = fence.controller_chain(stat=TREE.get, argv=ARGV.get, start=30)
    assert fence.chain_alive(chain, stat=TREE.get)
    killed = dict(TREE)
    del killed[10]
    killed[20] = (1, 200)  # the worker, reparented to init
    assert not fence.chain_alive(chain, stat=killed.get)
    reused = dict(TREE)
    reused[10] = (5, 999)  # the pid reused by another process
    assert not fence.chain_alive(chain, stat=reused.get)
    nohup = dict(TREE)
    nohup[10] = (1, 100)  # ansible-playbook itself reparented (its shell ended): still alive
    assert fence.chain_alive(chain, stat=nohup.get)


def test_a_module_run_in_the_worker_is_reparented_itself_when_ansible_playbook_is_killed():
    # in process: the chain starts at the worker (20), whose parent is ansible-playbook (10)
    chain = fence.controller_chain(stat=TREE.get, argv=ARGV.get, start=20)
    assert chain == [(20, 10, 200), (10, None, 100)]
    assert fence.controller_pid(chain) == 10
    killed = dict(TREE)
    del killed[10]
    killed[20] = (1, 200)
    assert not fence.chain_alive(chain, stat=killed.get)


def test_a_writer_is_alive_on_its_own_host_with_its_own_start_time():
    stat = {40: (30, 400)}.get
    writer = dict(pid=40, started=400, host="bastion", what="helm upgrade")
    assert fence.writer_alive(writer, stat=stat, host="bastion")
    assert not fence.writer_alive(dict(writer, started=401), stat=stat, host="bastion")  # pid reused
    assert not fence.writer_alive(dict(writer, pid=41), stat=stat, host="bastion")  # ended
    assert not fence.writer_alive(writer, stat=stat, host="elsewhere")  # cannot be judged here
    assert not fence.writer_alive(None, stat=stat, host="bastion")
