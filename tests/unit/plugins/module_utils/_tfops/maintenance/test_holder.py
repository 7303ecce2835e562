"""A lock whose holder is provably gone: the recorded process, the judgement (pure) and the
takeover decision; holders on other hosts (or where nothing can be proven) keep the TTL rule."""
import os

import pytest
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import holder as holders


HERE = {"host": "bastion", "boot": "b00t", "pidns": "4026531836"}


RECORDED = {"pid": 4242, "started": 1000, "boot": "b00t", "pidns": "4026531836"}


def test_the_recorded_process_round_trips_and_names_a_pid():
    text = holders.format_process(RECORDED)
    assert text == "pid=4242 started=1000 boot=b00t pidns=4026531836"
    assert holders.parse_process(text) == RECORDED
    assert holders.parse_process("") is None and holders.parse_process(None) is None
    assert holders.parse_process("started=1 boot=x") is None, "no pid: nothing to judge"
    assert holders.parse_process("pid=x started=1") is None


def test_a_holder_on_this_host_whose_pid_no_longer_runs_is_gone():
    reason = holders.gone_reason(RECORDED, "bastion", HERE, None)
    assert reason and "pid 4242 on bastion" in reason and "no longer running" in reason


def test_a_holder_whose_pid_now_belongs_to_another_process_is_gone():
    reason = holders.gone_reason(RECORDED, "bastion", HERE, 2000)
    assert reason and "another process" in reason


def test_a_holder_that_still_runs_is_not_gone():
    assert holders.gone_reason(RECORDED, "bastion", HERE, 1000) is None


@pytest.mark.parametrize("host,here", [
    ("laptop", HERE),                                   # another host: its TTL decides
    ("bastion", dict(HERE, boot="other-boot")),          # the same name, another machine (or boot)
    ("bastion", dict(HERE, pidns="4026532000")),         # another container on this machine
    (None, HERE),
])
def test_nothing_is_proven_elsewhere(host, here):
    assert holders.gone_reason(RECORDED, host, here, None) is None


def test_a_record_without_boot_or_namespace_proves_nothing():
    assert holders.gone_reason(dict(RECORDED, boot=None), "bastion", HERE, None) is None
    assert holders.gone_reason(None, "bastion", HERE, None) is None


def test_the_checker_reads_this_host():
    """On this machine: this very process is alive; a pid that is not running is gone."""
    here = holders.local_facts()
    if not here["boot"] or not here["pidns"]:
        pytest.skip("no /proc with boot id and pid namespace here")
    started = holders.process_start(os.getpid())
    assert started is not None
    gone = holders.gone_checker()
    me = holders.format_process(dict(here, pid=os.getpid(), started=started))
    assert gone({"host": here["host"], "process": me}) is None
    free_pid = next(p for p in range(4194000, 4194300) if holders.process_start(p) is None)
    dead = holders.format_process(dict(here, pid=free_pid, started=started))
    assert "no longer running" in gone({"host": here["host"], "process": dead})
    other = holders.format_process(dict(here, pid=os.getpid(), started=started + 1))
    assert "another process" in gone({"host": here["host"], "process": other})
    assert gone({"host": here["host"] + "-elsewhere", "process": dead}) is None
