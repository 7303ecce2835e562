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

What this path uses of ansible-core: ActionBase and its helpers (``_update_module_args``,
``_compute_environment_string``, ``_execute_module``), the module serialization profiles of
``ansible.module_utils.common.json`` (2.19+), and two internals, the globals through which
AnsiballZ hands a module its arguments (``ansible.module_utils.basic._ANSIBLE_ARGS`` and
``_ANSIBLE_PROFILE``). Each is looked up once, when this file is imported (``missing_internals``):
an ansible-core without one runs every task as a module process, with one warning that names the
version and what it lacks; nothing crashes.

Anything else (another connection, become, async, another interpreter, ``tfops_in_process:
false``, an ansible-core older than 2.19) runs the module as a module process, as Ansible always
does, but always pipelined (``module_process``): the task's arguments, Secret values among them,
reach the module on its standard input and are never written to a file. Where pipelining cannot
be had (async, a connection without it, ``keep_remote_files``), a task that carries a secret value
is refused before anything runs, saying why.
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
from ansible.module_utils.ansible_release import __version__ as ANSIBLE_CORE_VERSION
from ansible.module_utils.parsing.convert_bool import boolean
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display
from ansible.utils.vars import merge_hash

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import remove_client_temp_files

try:  # ansible-core 2.19+: how module arguments and results are encoded
    from ansible.module_utils.common.json import Direction, get_module_decoder, get_module_encoder
except ImportError:
    Direction = get_module_decoder = get_module_encoder = None

display = Display()

MODULES = "ansible_collections.tensorfusion.ops.plugins.modules."
PROFILE = "legacy"  # the serialization profile of a module without METADATA (all of ours)
DISCOVERY = ("auto", "auto_legacy", "auto_silent", "auto_legacy_silent")
# The options of the collection's modules whose values are secret (no_log in their argument
# specs; test_in_process ties this set to the modules' specs), and the kubeconfig when it is given
# inline (a dict holds tokens and keys).
# Modules that are only an action on the controller (no module process, no backend): what they
# read - the play's variables as given - no module argument could carry.
ACTION_ONLY = frozenset(("runbook_guard",))
SECRET_OPTIONS = frozenset(("api_key", "data", "string_data", "signing_key", "secret_variables"))


def missing_internals(basic_module=basic, action_base=ActionBase, encoder=get_module_encoder,
                      decoder=get_module_decoder):
    """What of ansible-core the worker path needs and this ansible-core lacks (names), given an
    ansible-core with serialization profiles (2.19+). Pure on its arguments."""
    missing = []
    if encoder is None or decoder is None:
        missing.append("ansible.module_utils.common.json.get_module_encoder")
    missing.extend("ansible.module_utils.basic." + name for name in ("_ANSIBLE_ARGS", "_ANSIBLE_PROFILE")
                   if not hasattr(basic_module, name))
    missing.extend("ActionBase." + name for name in ("_update_module_args", "_compute_environment_string")
                   if not callable(getattr(action_base, name, None)))
    return missing


# Looked up once, when the strategy first loads an action of this collection (in ansible-playbook,
# before it forks a worker): the warning below is given once per run, not once per task.
MISSING = missing_internals() if get_module_encoder is not None else []
if MISSING:
    display.warning("tensorfusion.ops: ansible-core %s lacks %s, which running the modules inside "
                    "ansible-playbook's worker needs; every tensorfusion.ops task runs as a module "
                    "process instead (the same results, about 0.5 CPU-seconds more per task)."
                    % (ANSIBLE_CORE_VERSION, ", ".join(MISSING)))


def preload(module):
    """Import a module and the kubernetes client where the strategy loads the action (in
    ansible-playbook, once): the workers it forks for the tasks share them instead of importing
    them again. Nothing is imported that the module would not import itself."""
    with contextlib.suppress(ImportError):
        importlib.import_module(MODULES + module)
        from kubernetes import client, config, dynamic  # noqa: F401 pylint: disable=unused-import


def refusal(connection, become, async_val, interpreter, controller_python, switch, profiles, kubernetes_here,
            missing=()):
    """Why a task must run as a module process, or None when it may run in the worker. Pure.

    The module runs in the worker only where it would run on this very machine, as this user,
    synchronously, in this Python: the interpreter configured for the host is ansible-playbook's
    own, or left to discovery while ansible-playbook's Python has the modules' libraries; and only
    on an ansible-core that has everything the worker path needs (``missing`` names what not)."""
    if not profiles:
        return "this ansible-core has no module serialization profiles (2.19+ runs modules in process)"
    if missing:
        return "ansible-core %s lacks %s" % (ANSIBLE_CORE_VERSION, ", ".join(missing))
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


def secret_options(module_args):
    """The options of a task whose values are secret and set (sorted names). Pure."""
    found = set(name for name in SECRET_OPTIONS if module_args.get(name) not in (None, "", {}, []))
    if isinstance(module_args.get("kubeconfig"), dict):
        found.add("kubeconfig")
    return sorted(found)


def unpipelined_refusal(module, secrets, why):
    """The failed result of a task that would put secret values in a file. Pure."""
    return dict(failed=True, changed=False, msg=(
        "tensorfusion.ops.%s was not run: as a module process without pipelining (%s), Ansible "
        "writes a task's arguments into the module file in its temporary directory, and this task's "
        "%s hold secret values. Run it without async, on a connection that pipelines (local, ssh), "
        "without keep_remote_files, or inside ansible-playbook (connection local, tfops_in_process "
        "not false); or give the credentials by file or environment instead of inline."
        % (module, why, ", ".join(secrets))))


def module_result(output):
    """A module's printed JSON as the action's result, as ansible-core reads a module process's:
    decoded in the module serialization profile, its internal keys dropped."""
    data = json.loads(output, cls=get_module_decoder(PROFILE, Direction.MODULE_TO_CONTROLLER))
    for key in [k for k in data if k.startswith("_ansible_")]:
        del data[key]
    for key in ("warnings", "deprecations"):
        if key in data and not data[key]:
            del data[key]
    return data


@contextlib.contextmanager
def pipelining(connection):
    """The connection's ``pipelining`` option on for the block, as it was afterwards."""
    try:
        before = connection.get_option("pipelining")
    except (KeyError, AttributeError, ValueError):
        before = None
    connection.set_option("pipelining", True)
    try:
        yield
    finally:
        connection.set_option("pipelining", before)


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
            return merge_hash(result, self._module_process(task_vars))
        display.vvv("tensorfusion.ops.%s runs in ansible-playbook's worker (pid %d)" % (self.MODULE, os.getpid()),
                    host=self._play_context.remote_addr)
        module_args = dict(self._task.args)
        self._update_module_args(self._task.action, module_args, task_vars)
        # The task's environment (K8S_AUTH_*, KUBECONFIG, a proxy), exactly as the module path
        # puts it before the module's command: the module must act on the cluster the task names.
        environment = {}
        self._compute_environment_string(environment)
        return merge_hash(result, module_result(run_main(MODULES + self.MODULE, module_args, environment)))

    def _module_process(self, task_vars):
        """The module as a module process. A task with secret values is pipelined (its
        arguments on the module's standard input, never in a file), or refused."""
        wrap_async = bool(self._task.async_val) and not self._connection.has_native_async
        secrets = secret_options(self._task.args)
        with pipelining(self._connection) if secrets else contextlib.nullcontext():
            if secrets and not self._is_pipelining_enabled("new", wrap_async):
                why = "async" if wrap_async else "connection %s, keep_remote_files %s" % (
                    self._connection.transport, C.DEFAULT_KEEP_REMOTE_FILES)
                return unpipelined_refusal(self.MODULE, secrets, why)
            data = self._execute_module(task_vars=task_vars, wrap_async=wrap_async)
        if not wrap_async:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        return data

    def _refusal(self, task_vars):
        interpreter = C.config.get_config_value("INTERPRETER_PYTHON", variables=task_vars)
        interpreter = self._templar.template(interpreter) if interpreter else interpreter
        switch = task_vars.get("tfops_in_process")
        switch = self._templar.template(switch) if switch is not None else None
        return refusal(self._connection.transport, self._play_context.become, self._task.async_val,
                       interpreter, sys.executable, switch, get_module_encoder is not None,
                       importlib.util.find_spec("kubernetes") is not None, MISSING)


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
        # The client's temporary copies of a kubeconfig's certificate data go at interpreter
        # exit, which a worker never reaches (os._exit): removed after each task.
        remove_client_temp_files()
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


def module_action(module):
    """The action plugin class of ``module`` (each file of plugins/action names its module and
    takes this; runbook_inputs adds its own step). A file each, not links to one shared file:
    antsibull-docs reads a link in plugins/action as the module being an alias of the one it
    points to, and would document twelve modules as aliases of one."""
    preload(module)
    return type("ActionModule", (InProcessModuleAction,), {"MODULE": module, "__module__": __name__})
