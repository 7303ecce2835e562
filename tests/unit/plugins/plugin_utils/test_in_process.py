"""plugin_utils/in_process.py: when a module may run in ansible-playbook's worker, and a real
module's main() run there (maintenance_window with an explicit window needs no cluster); an
ansible-core without an internal the worker path needs (one made to vanish) runs every task as a
module process with one warning; a task with secret values is never written to a file. These run
on every ansible-core of the matrix (tests/ansible-matrix.sh)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.tensorfusion.ops.plugins.plugin_utils import in_process
from ansible_collections.tensorfusion.ops.plugins.plugin_utils.in_process import refusal

PY = sys.executable
HERE = dict(connection="local", become=False, async_val=0, interpreter=PY, controller_python=PY,
            switch=None, profiles=True, kubernetes_here=True, missing=())
PROFILES = in_process.get_module_encoder is not None  # ansible-core 2.19+
WORKER_PATH = pytest.mark.skipif(not PROFILES, reason="ansible-core before 2.19 runs the modules only as module "
                                 "processes: it has no worker path to run them in")


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
    (dict(missing=["ansible.module_utils.basic._ANSIBLE_ARGS"]),
     "ansible-core %s lacks ansible.module_utils.basic._ANSIBLE_ARGS" % in_process.ANSIBLE_CORE_VERSION),
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


def test_missing_internals_names_each_internal_that_is_gone():
    class Basic:
        _ANSIBLE_ARGS = None

    class Action:
        def _update_module_args(self):
            pass

    missing = in_process.missing_internals(Basic, Action, encoder=object, decoder=object)
    assert missing == ["ansible.module_utils.basic._ANSIBLE_PROFILE", "ActionBase._compute_environment_string"]
    assert "ansible.module_utils.common.json.get_module_encoder" in in_process.missing_internals(
        Basic, Action, encoder=None, decoder=object)


@pytest.mark.skipif(not PROFILES, reason="ansible-core before 2.19 has no worker path: nothing to probe")
def test_this_ansible_core_has_every_internal_the_worker_path_needs():
    """The matrix's versions with profiles (2.19 pinned, 2.21 newest) run modules in the worker;
    the day one loses an internal this fails, and users get the fallback and its warning."""
    assert in_process.missing_internals() == [] and in_process.MISSING == []


def test_secret_options_are_those_set_and_an_inline_kubeconfig():
    assert in_process.secret_options({"name": "a", "string_data": {"k": "v"}, "data": None}) == ["string_data"]
    assert in_process.secret_options({"kubeconfig": "/path", "api_key": ""}) == []
    assert in_process.secret_options({"kubeconfig": {"users": []}, "signing_key": "k"}) == ["kubeconfig", "signing_key"]


def _module_specs():
    """Every module's argument spec, as its main() builds it (captured before it validates)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule

    class Captured(Exception):
        pass

    specs = {}
    modules = sorted(p.stem for p in (Path(in_process.__file__).parents[1] / "modules").glob("*.py")
                     if p.stem != "__init__" and p.stem not in in_process.ACTION_ONLY)
    original = tfmodule.TfopsAnsibleModule.__init__
    for name in modules:
        def capture(self, argument_spec, name=name, **kwargs):
            specs[name] = argument_spec
            raise Captured()
        tfmodule.TfopsAnsibleModule.__init__ = capture
        try:
            __import__(in_process.MODULES + name, fromlist=["main"]).main()
        except Captured:
            pass
        finally:
            tfmodule.TfopsAnsibleModule.__init__ = original
    return specs


def _no_log_options(spec):
    for option, settings in spec.items():
        if settings.get("no_log"):
            yield option
        yield from _no_log_options(settings.get("options") or {})


def test_secret_options_are_exactly_the_modules_no_log_options():
    specs = _module_specs()
    assert len(specs) == 14, sorted(specs)
    no_log = set(option for spec in specs.values() for option in _no_log_options(spec))
    assert no_log == in_process.SECRET_OPTIONS


@WORKER_PATH
def test_a_module_result_is_decoded_and_its_internal_keys_dropped():
    result = in_process.module_result(json.dumps(dict(changed=True, _ansible_no_log=False, warnings=[],
                                                      deprecations=[], msg="m")))
    assert result == {"changed": True, "msg": "m"}


PLAY = textwrap.dedent("""\
    - hosts: localhost
      gather_facts: false
      tasks:
        - name: Window {n}
          tensorfusion.ops.maintenance_window:
            start: "2026-12-04T02:00:00Z"
            end: "2026-12-04T04:00:00Z"
            now: "2026-12-04T03:00:00Z"
          loop: [1, 2, 3]
          loop_control:
            loop_var: n
        - name: A rotation that would go to a file as an async module process
          tensorfusion.ops.secret_rotate:
            name: tfops-unit
            kubeconfig: /nonexistent
            string_data:
              token: tfopsUNITCANARY0123456789
          async: 30
          poll: 2
          register: refused
          ignore_errors: true
        - name: The refusal says why
          ansible.builtin.assert:
            that:
              - refused is failed
              - "'without pipelining (async)' in refused.msg"
              - "'string_data' in refused.msg"
    """)


@pytest.mark.parametrize("internal", ["_ANSIBLE_PROFILE", "_ANSIBLE_ARGS"])
def test_an_internal_made_to_vanish_runs_every_task_as_a_module_process_with_one_warning(internal, tmp_path):
    """ansible-playbook with ansible.module_utils.basic.<internal> deleted before anything loads
    (sitecustomize): the tasks still run (as module processes), one warning names the version and
    the internal; an async task with a secret value is refused before it runs, naming why."""
    (tmp_path / "sitecustomize.py").write_text(
        "import ansible.module_utils.basic as basic\n"
        "if hasattr(basic, %r):\n    delattr(basic, %r)\n" % (internal, internal))
    (tmp_path / "play.yml").write_text(PLAY)
    env = dict(os.environ, PYTHONPATH=str(tmp_path), ANSIBLE_NOCOLOR="1", ANSIBLE_LOCALHOST_WARNING="false",
               ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_PYTHON_INTERPRETER=sys.executable,
               ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp" / "local"), ANSIBLE_REMOTE_TEMP=str(tmp_path / "tmp" / "remote"),
               TMPDIR=str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    run = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", "localhost,", "-c", "local",
                          str(tmp_path / "play.yml"), "-vvv"], capture_output=True, text=True, env=env, timeout=300,
                         check=False)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "ok=3" in out.split("PLAY RECAP")[-1] and "failed=0" in out.split("PLAY RECAP")[-1], out[-2000:]
    assert "runs in ansible-playbook's worker" not in out
    if PROFILES:
        warning = "ansible-core %s lacks ansible.module_utils.basic.%s" % (in_process.ANSIBLE_CORE_VERSION, internal)
        assert out.count("[WARNING]: tensorfusion.ops: " + warning) == 1, out[-4000:]  # once per run
        assert out.count("runs as a module process: " + warning) == 4, out[-4000:]  # -vvv: each task's why
    else:  # 2.16-2.18: module processes always, as documented, and no warning
        assert "runs as a module process: this ansible-core has no module serialization profiles" in out
        assert "[WARNING]: tensorfusion.ops" not in out
    leftovers = [p for p in (tmp_path / "tmp").rglob("*") if p.is_file() and b"tfopsUNITCANARY" in p.read_bytes()]
    assert leftovers == []


def _args(**options):
    return dict(options, _ansible_check_mode=False, _ansible_no_log=False, _ansible_diff=False,
                _ansible_verbosity=0, _ansible_module_name="tensorfusion.ops.maintenance_window",
                _ansible_tmpdir=None, _ansible_remote_tmp="/tmp", _ansible_keep_remote_files=False,
                _ansible_syslog_facility="LOG_USER", _ansible_debug=False)


@WORKER_PATH
def test_main_runs_here_and_its_result_is_what_it_printed():
    out = in_process.run_main(in_process.MODULES + "maintenance_window", _args(
        start="2026-12-04T02:00:00Z", end="2026-12-04T04:00:00Z", now="2026-12-04T03:00:00Z",
        safety_margin="5m"))
    result = json.loads(out)
    assert result["changed"] is False and not result.get("failed"), result
    assert result["deadline"].startswith("2026-12-04T03:55:00"), result


@WORKER_PATH
def test_a_refused_argument_is_a_failed_result_not_an_exception():
    result = json.loads(in_process.run_main(in_process.MODULES + "maintenance_window", _args(
        start="2026-12-04T02:00:00Z", cron=["0 2 * * *"], duration="1h")))
    assert result["failed"] is True
    assert "mutually exclusive" in result["msg"], result


@WORKER_PATH
def test_no_log_values_are_masked_as_in_a_module_process():
    result = json.loads(in_process.run_main(in_process.MODULES + "maintenance_window", _args(
        start="2026-12-04T02:00:00Z", end="2026-12-04T04:00:00Z", now="2026-12-04T03:00:00Z",
        kubeconfig={"users": [{"name": "u", "user": {"token": "s3cr3t-t0ken"}}]})))
    assert "s3cr3t-t0ken" not in json.dumps(result), result


@WORKER_PATH
def test_a_crash_is_a_failed_result(monkeypatch):
    module = pytest.importorskip(in_process.MODULES + "maintenance_window")

    def boom():
        raise RuntimeError("boom")

    monkeypatch.setattr(module, "main", boom)
    result = json.loads(in_process.run_main(in_process.MODULES + "maintenance_window", _args()))
    assert result["failed"] is True and "RuntimeError: boom" in result["msg"]
    assert "Traceback" in result["exception"]


@WORKER_PATH
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


@WORKER_PATH
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
