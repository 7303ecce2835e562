"""core/module.py's contract for a module's body, without a cluster: run(module, body) gives the
body a Context; a passed deadline is refused before the body runs; diff only in diff mode;
warnings one way; a typed error becomes fail_json with its details (and the warnings so far)."""
import datetime

import pytest

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import deadline_from
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput, WaitTimeout


class Exited(Exception):
    pass


class FakeModule:
    """The part of AnsibleModule that run() uses: argument_spec, params, modes, warn, exit_json,
    fail_json."""

    def __init__(self, check_mode=False, diff=False, **params):
        self.params = dict({"wait_timeout": 60, "deadline": None}, **params)
        self.argument_spec = {"wait_timeout": {"type": "raw"}, "deadline": {"type": "str"},
                              "namespace": {"type": "str"}}
        self.check_mode = check_mode
        self._diff = diff
        self.warnings, self.no_log_values = [], set()
        self.exited = self.failed = None

    def warn(self, msg):
        self.warnings.append(msg)

    def exit_json(self, **result):
        self.exited = result
        raise Exited()

    def fail_json(self, **result):
        self.failed = result
        raise Exited()


def test_a_text_option_that_is_not_one_line_fails_before_the_body_runs():
    module = FakeModule(namespace="ops\nTASK [forged]")
    ran = []
    run(module, lambda ctx: ran.append(ctx) or {"changed": True})
    assert not ran and module.failed["error"] == "InvalidInput" and module.failed["changed"] is False
    assert module.failed["msg"] == "namespace holds a line break or another control character; one line of text is expected"


def run(module, body, **kwargs):
    with pytest.raises(Exited):
        tfmodule.run(module, body, **kwargs)
    return module


def past():
    return (datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=5)).isoformat()


def test_the_body_gets_a_context_with_modes_deadline_and_params():
    seen = {}

    def body(ctx):
        seen.update(check=ctx.check_mode, diff=ctx.diff_mode, params=ctx.params,
                    bounded=ctx.deadline.bounded, remaining=ctx.deadline.remaining())
        return {"changed": False}
    run(FakeModule(check_mode=True, diff=True, name="x"), body, deadline=deadline_from)
    assert seen["check"] is True and seen["diff"] is True and seen["params"]["name"] == "x"
    assert seen["bounded"] and 0 < seen["remaining"] <= 60


def test_a_passed_deadline_is_refused_before_the_body_runs():
    calls = []
    module = run(FakeModule(deadline=past()), lambda ctx: calls.append(ctx) or {"changed": True},
                 deadline=deadline_from)
    assert calls == [], "the body (and any write) never started"
    assert module.failed["error"] == "InvalidInput" and "has already passed" in module.failed["msg"]


def test_diff_is_returned_exactly_in_diff_mode():
    def body(ctx):
        return {"changed": True, "diff": {"before": "a", "after": "b"}}
    assert "diff" not in run(FakeModule(), body).exited
    assert run(FakeModule(diff=True), body).exited["diff"] == {"before": "a", "after": "b"}


def test_warnings_go_through_the_context_also_when_the_body_fails():
    def ok(ctx):
        ctx.warn("first")
        return {"changed": False}

    def fails(ctx):
        ctx.warn("before the failure")
        raise WaitTimeout("nothing became Ready", changed=True, stuck=["p"])
    assert run(FakeModule(), ok).warnings == ["first"]
    module = run(FakeModule(), fails)
    assert module.warnings == ["before the failure"]
    assert module.failed["msg"] == "nothing became Ready" and module.failed["error"] == "WaitTimeout"
    assert module.failed["changed"] is True and module.failed["stuck"] == ["p"]


class Written:
    server, written = "https://api.lab:6443", True


def test_a_failure_after_a_write_says_changed_and_names_the_api_server():
    def body(ctx):
        ctx.kube = Written()  # what ctx.connected() leaves: the client, which wrote
        raise WaitTimeout("the Pods never became Ready")
    module = run(FakeModule(), body)
    assert module.failed["changed"] is True and module.failed["api_server"] == "https://api.lab:6443"


def test_hide_registers_values_of_a_minimum_length():
    module = FakeModule()

    def body(ctx):
        ctx.hide(["ab", "token-value", None, ""], min_length=3)
        ctx.hide(["x"])
        return {"changed": False}
    run(module, body)
    assert module.no_log_values == {"token-value", "x"}


def test_a_context_for_a_task_inside_another_needs_no_module():
    ctx = tfmodule.Context(kube="client", check_mode=False, deadline="d")
    assert (ctx.kube, ctx.check_mode, ctx.diff_mode, ctx.deadline, ctx.params) == ("client", False, False, "d", {})
    ctx.hide(["ignored"])  # no module: nothing to register, no failure


def test_bad_input_raised_by_the_body_fails_the_task():
    def body(ctx):
        raise InvalidInput("keep must be 1 or more")
    module = run(FakeModule(), body)
    assert module.exited is None and module.failed["msg"] == "keep must be 1 or more"


def test_a_task_inside_another_runs_in_a_child_context_whose_warnings_reach_the_result():
    """A rotation's pool roll is such a task: what it warns (an outage it rode out, a change the
    operator does not roll) is in the rotation's result."""
    module = FakeModule(check_mode=True, diff=True, name="outer")

    def body(ctx):
        ctx.kube = Written()
        inner = ctx.child(deadline="inner deadline")
        assert (inner.kube, inner.check_mode, inner.diff_mode, inner.deadline, inner.params) == (
            ctx.kube, True, True, "inner deadline", {})
        assert ctx.child().deadline is ctx.deadline
        inner.warn("from the inner task")
        inner.hide(["inner-secret"])
        return {"changed": False}
    run(module, body, deadline=deadline_from)
    assert module.warnings == ["from the inner task"]
    assert module.no_log_values == {"inner-secret"}
