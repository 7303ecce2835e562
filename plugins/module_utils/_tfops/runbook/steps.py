# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The steps of each runbook, written down once (pure data, pure functions).

A runbook is one skeleton, ``playbooks/tasks/runbook.yml``: the frame's steps before (the
preflight, a saved plan's check), the runbook's own steps (``playbooks/tasks/<runbook>_steps.yml``,
one ``step_<step>.yml`` each, tagged with the step's tags), the steps it runs on a failure, and the
frame's steps at the end (the lock's release, the report). Each step marks itself with
``tensorfusion.ops.mark_step('<name>')`` and hands its result to the report
(``playbooks/tasks/report.yml``, ``results: {<key>: <fact>}``), which ``report/record.py`` reads.

The unit test of this file (tests/unit/plugins/module_utils/_tfops/runbook/test_steps.py) checks the
step files, their tags and order in the ``*_steps.yml`` files, the report's ``results`` and the
step names ``report/record.py`` uses against this list: a step added in one place and not in the
others fails it."""

from __future__ import annotations

from collections import namedtuple

# name: the step's mark (and report entry); file: playbooks/tasks/<file> that marks and runs it
# (None: a step of the frame, marked in the frame's own files); tags: its tags in the runbooks'
# step lists; results: {report.yml results key: the fact the step leaves}; bookkeeping: it only
# reads, or keeps the books of the run - its "changed" is no change of TensorFusion.
Step = namedtuple("Step", "name file tags results bookkeeping")
# steps_file: playbooks/tasks/<file> of its steps; steps: in order; on_failure: the steps its
# recovery may run (tasks/<recovery>); read_only: no saved plan, no lock, no window.
Runbook = namedtuple("Runbook", "steps_file steps on_failure recovery read_only")

STEPS = dict((s.name, s) for s in (
    # The frame, before the runbook's steps: the inputs' check begins the preflight (not a step of
    # its own), the permission check goes on in it.
    Step("preflight", None, (), (("preflight", "rbac_result"), ("inputs", "tfops_inputs")), True),
    # (A saved plan's check: its result stays out of the report, which keeps its dry run apart.)
    Step("plan", None, (), (), False),
    # The runbooks' own steps.
    Step("lock", "step_lock.yml", ("always", "lock"), (("lock", "tfops_lock_taken"),), True),
    Step("window", "step_window.yml", ("always", "window"), (("window", "tfops_window"),), True),
    Step("precheck", "step_precheck.yml", ("precheck",), (("precheck", "precheck_info"),), True),
    # No change without its restore point: --tags upgrade and --tags pools take it too.
    Step("snapshot", "step_snapshot.yml", ("snapshot", "upgrade", "pools"), (("snapshot", "snapshot_result"),), True),
    Step("upgrade", "step_upgrade.yml", ("upgrade",), (("upgrade", "upgrade_release"),), False),
    Step("pools", "step_pools.yml", ("pools",),
         (("pools", "gpupool_update_results"), ("pool_updates", "gpupool_update_pools")), False),
    Step("rotate", "step_rotate.yml", ("rotate",), (("rotate", "rotate_result"),), False),
    Step("verify", "step_verify.yml", ("verify",), (("verify", "tfops_verify_info"),), True),
    Step("rollback", "step_rollback.yml", ("rollback",), (("rollback", "rollback_release"),), False),
    Step("verify_after_rollback", "step_verify_after_rollback.yml", ("verify_after_rollback",),
         (("verify_after_rollback", "tfops_verify_after_rollback_info"),), True),
    # The frame, at the end.
    Step("unlock", None, (), (("unlock", "tfops_unlock_result"),), True),
    Step("report", None, (), (), True),
))

FRAME_BEFORE = ("preflight", "plan")
FRAME_AFTER = ("unlock", "report")

_UPGRADE = Runbook("upgrade_steps.yml", ("lock", "window", "precheck", "snapshot", "upgrade", "pools", "verify"),
                   ("rollback", "verify_after_rollback"), "upgrade_on_failure.yml", False)
RUNBOOKS = {
    "upgrade": _UPGRADE,
    # upgrade.yml across a fleet: the same steps.
    "fleet_upgrade": _UPGRADE,
    "precheck": Runbook("precheck_steps.yml", ("precheck",), (), None, True),
    "rotate_secret": Runbook("rotate_secret_steps.yml", ("lock", "window", "precheck", "rotate", "verify"),
                             (), None, False),
    "rollback": Runbook("rollback_steps.yml", ("lock", "window", "rollback", "verify_after_rollback"),
                        (), None, False),
}


def step(name):
    """The step ``name`` (KeyError for a step no runbook has)."""
    return STEPS[name]


def runbook_steps(runbook):
    """Every step a run of ``runbook`` may mark, in order: the frame's, its own, those of its
    recovery, the frame's at the end (the read-only precheck has no saved plan and no lock)."""
    book = RUNBOOKS[runbook]
    before = ("preflight",) if book.read_only else FRAME_BEFORE
    after = ("report",) if book.read_only else FRAME_AFTER
    return before + book.steps + book.on_failure + after


def result_keys():
    """The keys of the run report's ``results``, each with the fact that feeds it, in step order."""
    return tuple((key, fact) for s in STEPS.values() for key, fact in s.results)


def bookkeeping():
    """The steps whose ``changed`` is no change of TensorFusion (the report's BOOKKEEPING)."""
    return frozenset(s.name for s in STEPS.values() if s.bookkeeping)


def step_files():
    """The step files of playbooks/tasks (``step_<step>.yml``) by step."""
    return dict((s.name, s.file) for s in STEPS.values() if s.file)
