# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every module's main() shares: the auth options merged into the argument spec, credential
values from a dict kubeconfig registered as no_log values, the one contract of a module's body
(``run(module, body)`` with a ``Context``), and typed errors turned into fail_json."""

from __future__ import annotations

import contextlib
import copy

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import (
    AUTH_ARG_SPEC,
    kubeconfig_secrets,
    resolve_auth,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import refuse_passed
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import option_text
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput, TfopsError


def argument_spec(**module_options):
    spec = copy.deepcopy(AUTH_ARG_SPEC)
    spec.update(module_options)
    return spec


# A no_log value this short is no secret, and masking it would make every message that holds
# its letters unreadable (a nested {user: a} refused as Secret content masks each "a" of the
# message); no_log options themselves are still shown as a whole as VALUE_SPECIFIED_IN_NO_LOG_PARAMETER.
MIN_MASKED = 3


class TfopsAnsibleModule(AnsibleModule):
    """AnsibleModule that hides a dict kubeconfig's credentials before anything is logged:
    AnsibleModule.__init__ writes the invocation to syslog before it returns."""

    def _log_invocation(self):
        for value in kubeconfig_secrets(self.params.get("kubeconfig")):
            self.no_log_values.add(value)
        drop_short_no_log_values(self)
        super()._log_invocation()


def drop_short_no_log_values(module):
    module.no_log_values.difference_update([v for v in module.no_log_values if len(v) < MIN_MASKED])


def new_module(module_options, **kwargs):
    module = TfopsAnsibleModule(argument_spec=argument_spec(**module_options), **kwargs)
    for value in kubeconfig_secrets(module.params.get("kubeconfig")):
        module.no_log_values.add(value)  # also when invocation logging is switched off
    drop_short_no_log_values(module)
    return module


def connect(module):
    """A Kube connection for the module's auth options (imported late: needs kubernetes)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import Kube
    return Kube(resolve_auth(module.params))


@contextlib.contextmanager
def connected(module, deadline, warnings, fence=None):
    """``with connected(module, deadline, warnings) as kube:`` - the connection is closed however
    the block ends, the outages ridden out join ``warnings`` (also when the block fails), and
    ``kube.server`` and ``kube.written`` stay readable after it for the result. With a
    ``deadline``, every request that fails in a way that can heal is retried until then; with
    ``fence`` (see ``fence_with``), the module's ``fence`` option fences every write."""
    kube = connect(module)
    kube.retry_deadline = deadline if deadline is not None and deadline.bounded else None
    try:
        fence_with(kube, fence, module.params.get("fence"), module.check_mode)
        yield kube
    finally:
        warnings.extend(kube.outages.warnings())
        kube.close()


def fence_with(kube, make_fence, fence, check_mode=False):
    """Fence the connection with a runbook's lock (the ``fence`` option), checked at once: a
    module started by a run that no longer holds its lock writes nothing. In check mode nothing
    is written and a check-mode run holds no lock: no fence. ``make_fence(kube, namespace, name,
    holder)`` builds the fence (maintenance/fence.py's ``Fence``, handed down by the module's
    main(): core knows the fence only as an object whose ``check()`` refuses a write)."""
    if not fence or check_mode:
        return
    if make_fence is None:
        raise TfopsError("this module was given a fence but builds none (its main() passes no fence to run)")
    kube.fence = make_fence(kube, fence["namespace"], fence["name"], fence["holder"])
    kube.fence.check("starting")


def warn_all(module, warnings):
    for warning in warnings:
        module.warn(warning)


def fail(module, exc, **result):
    """fail_json from a typed error; its details join the result (they never hold secrets)."""
    details = dict((k, v) for k, v in exc.details.items() if v is not None)
    # Warnings go through module.warn: fail_json(warnings=...) is deprecated in ansible-core.
    warn_all(module, details.pop("warnings", None) or [])
    result.update(details)
    module.fail_json(msg=exc.msg, error=type(exc).__name__, **result)


class Context:
    """What a module's body and its Task work with besides their params: check and diff mode,
    the deadline, the warnings they collect, and (inside ``connected()``) the API client as
    ``kube``. A Task run inside another one gets a Context of its own: ``ctx.child()``."""

    def __init__(self, module=None, kube=None, check_mode=None, diff_mode=None, deadline=None, fence=None):
        self.module = module
        self.fence = fence  # how the connection is fenced (connected(), fence_with)
        self.params = module.params if module is not None else {}
        if module is not None:
            check_mode, diff_mode = module.check_mode, module._diff
        self.check_mode, self.diff_mode = bool(check_mode), bool(diff_mode)
        self.deadline = deadline
        self.warnings = []
        self.kube = kube

    def warn(self, message):
        self.warnings.append(message)

    def child(self, deadline=None):
        """The Context of a Task run inside this one's: the same client, check and diff mode, and
        warnings (what the inner Task warns reaches this module's result), with its own deadline
        (this one's when None) and no module params (the inner Task gets its own)."""
        inner = Context(kube=self.kube, check_mode=self.check_mode, diff_mode=self.diff_mode,
                        deadline=deadline if deadline is not None else self.deadline)
        inner.module = self.module  # values it hides are hidden in this module's output
        inner.fence = self.fence
        inner.warnings = self.warnings
        return inner

    def hide(self, values, min_length=1):
        """Values that must never appear in output (a token the body reads, a rotated value);
        Ansible masks them wherever they show. ``min_length`` skips fragments too short to mask."""
        if self.module is not None:
            self.module.no_log_values.update(str(v) for v in values or [] if v and len(str(v)) >= min_length)

    @contextlib.contextmanager
    def connected(self, deadline=None):
        """The module's connection (see ``connected``), retried until ``deadline`` or the body's."""
        with connected(self.module, deadline if deadline is not None else self.deadline,
                       self.warnings, self.fence) as kube:
            self.kube = kube
            yield kube


class Run:
    """Base of a run class - a body that keeps state over its steps (RolloutTask, ReleaseTask,
    RotateTask, ClusterInputs): what it reads of its Context, set once. The client, its params,
    check and diff mode, the deadline, and the warnings it adds to (they reach the module's
    result); ``ctx`` itself for a run it starts inside (``ctx.child()``)."""

    def __init__(self, ctx, params):
        self.ctx = ctx
        self.kube = ctx.kube
        self.params = params
        self.check_mode = ctx.check_mode
        self.diff_mode = ctx.diff_mode
        self.deadline = ctx.deadline
        self.warnings = ctx.warnings


def run(module, body, deadline=None, fence=None):
    """The one contract of a module's body: ``body(ctx) -> result``.

    ``deadline(params) -> Deadline`` for modules that wait: a deadline option that has already
    passed is refused before the body runs (gpupool_rollout decides that itself: told to pause at
    its deadline, it still pauses). Warnings go one way, ``ctx.warn``; ``diff`` is returned
    exactly when diff mode is on; ``api_server`` names the cluster whenever the body connected.
    ``fence(kube, namespace, name, holder)`` for modules with a ``fence`` option (``Fence`` of
    maintenance/fence.py): the module's connections are fenced by that runbook lock."""
    ctx = Context(module, fence=fence)
    try:
        # Every text option is one bounded line (or bounded prose), before anything is read or written.
        refused = option_text.problems(module.argument_spec, module.params)
        if refused:
            raise InvalidInput("; ".join(refused), changed=False)
        if deadline is not None:
            ctx.deadline = deadline(module.params)
            refuse_passed(ctx.deadline, module.params.get("deadline"))
        result = body(ctx)
    except TfopsError as exc:
        exc.details["warnings"] = ctx.warnings + list(exc.details.get("warnings") or [])
        if ctx.kube is not None:
            exc.details.setdefault("api_server", ctx.kube.server)
            # changed is true whenever anything was written, also when the task then fails.
            exc.details["changed"] = bool(exc.details.get("changed")) or ctx.kube.written
        fail(module, exc)
    warn_all(module, ctx.warnings)
    if not ctx.diff_mode:
        result.pop("diff", None)
    if ctx.kube is not None:
        result.setdefault("api_server", ctx.kube.server)
    module.exit_json(**result)
