# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run the collection's modules inside the controller's worker process.

The modules run on the controller (connection local) in the Python of ansible-playbook. As module
processes, each task starts an interpreter, unpacks Ansible's module runtime and imports the
``kubernetes`` client again: about 0.5-0.7 CPU-seconds before any work. In the worker that
ansible-playbook forks for the task, the module's own ``main()`` runs with the same arguments, the
same AnsibleModule validation and no_log handling, and gives the same JSON result, but no process
is started: the module's code and the ``kubernetes`` client are imported once, in
ansible-playbook, when the strategy first loads the action (``preload``), and every worker it
forks shares them.

Anything else (another connection, become, async, another interpreter, ``tfops_in_process:
false``, an ansible-core older than 2.19) runs the module as a module process, as Ansible always
does.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import sys
import traceback

from ansible import constants as C
from ansible.module_utils import basic
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash
from ansible.vars.clean import remove_internal_keys

try:  # ansible-core 2.19+: how module arguments and results are encoded
    from ansible.module_utils.common.json import Direction, get_module_encoder
except ImportError:
    Direction = get_module_encoder = None

display = Display()

MODULES = "ansible_collections.tensorfusion.ops.plugins.modules."
PROFILE = "legacy"  # the serialization profile of a module without METADATA (all of ours)
DISCOVERY = ("auto", "auto_legacy", "auto_silent", "auto_legacy_silent")


def preload(module):
    """Import a module and the kubernetes client where the strategy loads the action (in
    ansible-playbook, once): the workers it forks for the tasks share them instead of importing
    them again. Nothing is imported that the module would not import itself."""
    with contextlib.suppress(ImportError):
        importlib.import_module(MODULES + module)
        from kubernetes import client, config, dynamic  # noqa: F401 pylint: disable=unused-import


def refusal(connection, become, async_val, interpreter, controller_python, switch, profiles, kubernetes_here):
    """Why a task must run as a module process, or None when it may run in the worker. Pure.

    The module runs in the worker only where it would run on this very machine, as this user,
    synchronously, in this Python: the interpreter configured for the host is ansible-playbook's
    own, or left to discovery while ansible-playbook's Python has the modules' libraries."""
    if not profiles:
        return "this ansible-core has no module serialization profiles (2.19+ runs modules in process)"
    if switch is not None and not boolean(switch, strict=False):
        return "tfops_in_process is false"
    if connection not in ("local", "ansible.builtin.local"):
        return "connection %s" % connection
    if become:
        return "become"
    if async_val:
        return "async"
    if not interpreter or str(interpreter) in DISCOVERY:
        return None if kubernetes_here else "interpreter discovery, and no kubernetes library beside ansible-playbook"
    if os.path.realpath(str(interpreter)) != os.path.realpath(controller_python):
        return "interpreter %s" % interpreter
    return None


class InProcessModuleAction(ActionBase):
    """The action of a tensorfusion.ops module: its main() in this worker when the task runs on
    the controller, else the module process."""

    _supports_check_mode = True
    _supports_async = True

    MODULE = ""  # the module's name (module_action sets it)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        task_vars = task_vars or {}
        why_not = self._refusal(task_vars)
        if why_not:
            display.vvv("tensorfusion.ops.%s runs as a module process: %s" % (self.MODULE, why_not),
                        host=self._play_context.remote_addr)
            wrap_async = self._task.async_val and not self._connection.has_native_async
            result = merge_hash(result, self._execute_module(task_vars=task_vars, wrap_async=wrap_async))
            if not wrap_async:
                self._remove_tmp_path(self._connection._shell.tmpdir)
            return result
        display.vvv("tensorfusion.ops.%s runs in ansible-playbook's worker (pid %d)" % (self.MODULE, os.getpid()),
                    host=self._play_context.remote_addr)
        module_args = dict(self._task.args)
        self._update_module_args(self._task.action, module_args, task_vars)
        # The task's environment (K8S_AUTH_*, KUBECONFIG, a proxy), exactly as the module path
        # puts it before the module's command: the module must act on the cluster the task names.
        environment = {}
        self._compute_environment_string(environment)
        output = run_main(MODULES + self.MODULE, module_args, environment)
        data = self._parse_returned_data(dict(rc=0, stdout=output, stderr=""), PROFILE)
        data.pop("_ansible_suppress_tmpdir_delete", None)
        remove_internal_keys(data)
        return merge_hash(result, data)

    def _refusal(self, task_vars):
        interpreter = C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars)
        interpreter = self._templar.template(interpreter) if interpreter else interpreter
        switch = task_vars.get("tfops_in_process")
        switch = self._templar.template(switch) if switch is not None else None
        return refusal(self._connection.transport, self._play_context.become, self._task.async_val,
                       interpreter, sys.executable, switch, get_module_encoder is not None,
                       importlib.util.find_spec("kubernetes") is not None)


def run_main(module_name, module_args, environment=None):
    """Run a module's main() in this process with ``module_args``, as AnsiballZ runs it in its
    own: the arguments handed over in the module encoding, the task's ``environment`` in
    ``os.environ``, its output captured; what it printed (its JSON result) is returned. A crash is
    a failed result, as AnsiballZ reports one. Every global it sets (ansible-core's module
    arguments and serialization profile, the environment) is put back as it was."""
    encoder = get_module_encoder(PROFILE, Direction.CONTROLLER_TO_MODULE)
    saved = (basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE)
    out, err = io.StringIO(), io.StringIO()
    try:
        with task_environment(environment):
            basic._ANSIBLE_ARGS = json.dumps(dict(ANSIBLE_MODULE_ARGS=module_args), cls=encoder).encode()
            basic._ANSIBLE_PROFILE = PROFILE
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    importlib.import_module(module_name).main()
                except SystemExit:
                    pass
                except Exception as exc:  # pylint: disable=broad-except  # a crash is the task's failure
                    out.seek(0)
                    out.truncate()
                    out.write(json.dumps(dict(failed=True, exception=traceback.format_exc(), msg="%s crashed: %s: %s" % (
                        module_name.rsplit(".", 1)[-1], type(exc).__name__, exc))))
    finally:
        basic._ANSIBLE_ARGS, basic._ANSIBLE_PROFILE = saved
        _remove_kubeconfig_files()
    return out.getvalue()


@contextlib.contextmanager
def task_environment(environment):
    """``os.environ`` with the task's ``environment:`` (values as text, as the module path's
    command prefix gives them) for the length of the block; afterwards exactly as before."""
    environment = dict((str(k), str(v)) for k, v in (environment or {}).items())
    before = dict((k, os.environ.get(k)) for k in environment)
    os.environ.update(environment)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _remove_kubeconfig_files():
    """The kubernetes client writes the certificate and key data of a kubeconfig to temporary
    files that it removes when the interpreter exits; a worker ends without that (os._exit)."""
    kube_config = sys.modules.get("kubernetes.config.kube_config")
    if kube_config is not None:
        with contextlib.suppress(Exception):
            kube_config._cleanup_temp_files()  # pylint: disable=protected-access


def module_action(module):
    """The action plugin class of ``module`` (each file of plugins/action names its module and
    takes this; runbook_inputs adds its own step). A file each, not links to one shared file:
    antsibull-docs reads a link in plugins/action as the module being an alias of the one it
    points to, and would document twelve modules as aliases of one."""
    preload(module)
    return type("ActionModule", (InProcessModuleAction,), {"MODULE": module, "__module__": __name__})
