"""plugin_utils/in_process.py: when a module may run in ansible-playbook's worker, and a real
module's main() run there (maintenance_window with an explicit window needs no cluster)."""
import json
import sys

import pytest

from ansible_collections.tensorfusion.ops.plugins.plugin_utils import in_process
from ansible_collections.tensorfusion.ops.plugins.plugin_utils.in_process import refusal

PY = sys.executable
HERE = dict(connection="local", become=False, async_val=0, interpreter=PY, controller_python=PY,
            switch=None, profiles=True, kubernetes_here=True)


def why(**changes):
    return refusal(**dict(HERE, **changes))


def test_a_local_synchronous_task_in_ansible_playbooks_python_runs_in_the_worker():
    assert why() is None
    assert why(connection="ansible.builtin.local") is None
    assert why(switch="yes") is None


@pytest.mark.parametrize("changes, reason", [
    (dict(connection="ssh"), "connection ssh"),
    (dict(become=True), "become"),
    (dict(async_val=60), "async"),
    (dict(interpreter="/usr/bin/python3.9"), "interpreter /usr/bin/python3.9"),
    (dict(switch="false"), "tfops_in_process is false"),
    (dict(switch=False), "tfops_in_process is false"),
    (dict(profiles=False), "this ansible-core has no module serialization profiles"),
])
def test_anything_else_runs_as_a_module_process(changes, reason):
    assert why(**changes).startswith(reason)


def test_interpreter_discovery_runs_in_the_worker_only_where_the_libraries_are():
    for auto in (None, "", "auto", "auto_silent"):
        assert why(interpreter=auto) is None
        assert "no kubernetes library" in why(interpreter=auto, kubernetes_here=False)


def test_the_interpreter_is_compared_by_its_real_path(tmp_path):
    link = tmp_path / "python"
    link.symlink_to(PY)
    assert why(interpreter=str(link)) is None


def _args(**options):
    return dict(options, _ansible_check_mode=False, _ansible_no_log=False, _ansible_diff=False,
                _ansible_verbosity=0, _ansible_module_name="tensorfusion.ops.maintenance_window",
                _ansible_tmpdir=None, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False,
                _ansible_syslog_facility="LOG_USER", _ansible_debug=False)


def test_main_runs_here_and_its_result_is_what_it_printed():
    out = in_process.run_main(in_process.MODULES + "maintenance_window", _args(
        start="2026-12-04T02:00:00Z", end="2026-12-04T04:00:00Z", now="2026-12-04T03:00:00Z",
        safety_margin="5m"))
    result = json.loads(out)
    assert result["changed"] is False and not result.get("failed"), result
    assert result["deadline"].startswith("2026-12-04T03:55:00"), result
    assert result["invocation"]["module_args"]["start"] == "2026-12-04T02:00:00Z"


def test_a_refused_argument_is_a_failed_result_not_an_exception():
    result = json.loads(in_process.run_main(in_process.MODULES + "maintenance_window", _args(
        start="2026-12-04T02:00:00Z", cron=["0 2 * * *"], duration="1h")))
    assert result["failed"] is True
    assert "mutually exclusive" in result["msg"], result


def test_no_log_values_are_masked_as_in_a_module_process():
    result = json.loads(in_process.run_main(in_process.MODULES + "maintenance_window", _args(
        start="2026-12-04T02:00:00Z", end="2026-12-04T04:00:00Z", now="2026-12-04T03:00:00Z",
        kubeconfig={"users": [{"name": "u", "user": {"token": "s3cr3t-t0ken"}}]})))
    assert "s3cr3t-t0ken" not in json.dumps(result), result


def test_a_crash_is_a_failed_result(monkeypatch):
    module = pytest.importorskip(in_process.MODULES + "maintenance_window")

    def boom():
        raise RuntimeError("boom")

    monkeypatch.setattr(module, "main", boom)
    result = json.loads(in_process.run_main(in_process.MODULES + "maintenance_window", _args()))
    assert result["failed"] is True and "RuntimeError: boom" in result["msg"]
    assert "Traceback" in result["exception"]


def test_the_tasks_environment_is_there_while_main_runs_and_gone_afterwards(monkeypatch):
    """#36: a task's environment: (K8S_AUTH_KUBECONFIG of another cluster) applies in the worker
    as it does to a module process; afterwards os.environ is as it was."""
    import os
    module = pytest.importorskip(in_process.MODULES + "maintenance_window")
    seen = {}

    def main():
        seen.update(kubeconfig=os.environ.get("K8S_AUTH_KUBECONFIG"), proxy=os.environ.get("HTTPS_PROXY"),
                    number=os.environ.get("TFOPS_TEST_NUMBER"))
        print(json.dumps({"changed": False}))

    monkeypatch.setattr(module, "main", main)
    monkeypatch.setenv("HTTPS_PROXY", "http://before:3128")
    monkeypatch.delenv("K8S_AUTH_KUBECONFIG", raising=False)
    in_process.run_main(in_process.MODULES + "maintenance_window", _args(),
                        {"K8S_AUTH_KUBECONFIG": "/second/lab", "HTTPS_PROXY": "http://task:3128", "TFOPS_TEST_NUMBER": 3})
    assert seen == {"kubeconfig": "/second/lab", "proxy": "http://task:3128", "number": "3"}
    assert "K8S_AUTH_KUBECONFIG" not in os.environ and "TFOPS_TEST_NUMBER" not in os.environ
    assert os.environ["HTTPS_PROXY"] == "http://before:3128"


def test_ansible_cores_globals_are_put_back_also_after_a_crash(monkeypatch):
    from ansible.module_utils import basic
    module = pytest.importorskip(in_process.MODULES + "maintenance_window")
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", b"before")
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "before-profile")

    def boom():
        assert basic._ANSIBLE_PROFILE == in_process.PROFILE and basic._ANSIBLE_ARGS != b"before"
        raise RuntimeError("boom")

    monkeypatch.setattr(module, "main", boom)
    result = json.loads(in_process.run_main(in_process.MODULES + "maintenance_window", _args(), {"A_B": "c"}))
    assert "RuntimeError: boom" in result["msg"]
    assert (basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE) == (b"before", "before-profile")


def test_a_kubeconfig_named_by_the_environment_at_run_time_is_the_one_loaded(tmp_path, monkeypatch):
    """The kubernetes client reads KUBECONFIG once, when it is imported (in ansible-playbook,
    before any task): auth must read it when the module runs."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import auth
    path = tmp_path / "second"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://second.example:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    monkeypatch.setenv("KUBECONFIG", str(path))
    cfg = auth.build_configuration(auth.resolve_auth({"context": "c"}, environ={}))
    assert cfg.host == "https://second.example:6443"
