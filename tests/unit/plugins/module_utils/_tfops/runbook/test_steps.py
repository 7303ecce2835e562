"""runbook/steps.py, the one list of the runbooks' steps, against every place a step is named: the
runbooks' step lists (tasks/<runbook>_steps.yml: the step files they import, their tags, their
order), the step files (each marks its own step), the frame's marks, the report's results
(tasks/report.yml) and the step names report/record.py reads, and the steps table of
playbooks/README.md. A step added in one place and not in the others fails here."""
import ast
import re
from pathlib import Path

import pytest
import yaml

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import record
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import steps

ROOT = Path(__file__).resolve().parents[6]
PLAYBOOKS = ROOT / "playbooks"
TASKS = PLAYBOOKS / "tasks"
MARK = re.compile(r"tensorfusion\.ops\.mark_step\('([a-z_]+)'\)")


def _load(path):
    return yaml.safe_load(path.read_text())


def _marks(path):
    return MARK.findall(path.read_text())


def _play_vars(runbook):
    play, = _load(PLAYBOOKS / ("%s.yml" % runbook))
    return play["vars"]


def _task_file(value):
    """tasks/<file> of a '{{ tfops_runbooks_dir }}/tasks/<file>' reference."""
    match = re.fullmatch(r"\{\{ tfops_runbooks_dir \}\}/tasks/([a-z_]+\.yml)", value)
    assert match, value
    return match.group(1)


def test_every_runbook_of_playbooks_has_its_steps_and_no_other():
    assert sorted(p.stem for p in PLAYBOOKS.glob("*.yml")) == sorted(steps.RUNBOOKS)


@pytest.mark.parametrize("runbook", sorted(steps.RUNBOOKS))
def test_the_playbook_runs_the_runbook_s_step_list_and_recovery(runbook):
    book, play_vars = steps.RUNBOOKS[runbook], _play_vars(runbook)
    assert _task_file(play_vars["tfops_runbook_steps"]) == book.steps_file
    recovery = play_vars.get("tfops_runbook_on_failure")
    assert (_task_file(recovery) if recovery else None) == book.recovery
    assert bool(play_vars.get("tfops_runbook_read_only")) == book.read_only


@pytest.mark.parametrize("runbook", sorted(steps.RUNBOOKS))
def test_the_step_list_imports_each_step_file_in_order_with_its_tags(runbook):
    book = steps.RUNBOOKS[runbook]
    tasks = _load(TASKS / book.steps_file)
    assert [_task_file(t["ansible.builtin.import_tasks"]) for t in tasks] == \
        [steps.step(name).file for name in book.steps]
    assert [tuple(t["tags"]) for t in tasks] == [steps.step(name).tags for name in book.steps]
    assert all(set(t) == {"name", "ansible.builtin.import_tasks", "tags"} for t in tasks), tasks


def test_every_step_file_marks_its_own_step_first_and_every_one_is_listed():
    files = steps.step_files()
    assert sorted(p.name for p in TASKS.glob("step_*.yml")) == sorted(files.values())
    for name, file in files.items():
        first = _load(TASKS / file)[0]
        assert first["name"] == "Step %s" % name.replace("_", " "), file
        assert first["ansible.builtin.set_fact"] == {
            "tfops_marks": "{{ tfops_marks | tensorfusion.ops.mark_step('%s') }}" % name}, file
        assert _marks(TASKS / file) == [name], file


def test_every_step_a_step_list_runs_is_in_a_runbook_and_every_listed_step_in_a_step_list():
    used = set(n for b in steps.RUNBOOKS.values() for n in b.steps + b.on_failure)
    assert used | set(steps.FRAME_BEFORE + steps.FRAME_AFTER) == set(steps.STEPS)
    assert all(steps.step(n).file for b in steps.RUNBOOKS.values() for n in b.steps)


def test_the_frame_and_the_recovery_mark_the_steps_of_the_list():
    assert _marks(TASKS / "inputs.yml") == ["preflight"] and _marks(TASKS / "preflight.yml") == ["preflight"]
    assert _marks(TASKS / "plan.yml") == ["plan"]
    assert _marks(TASKS / "unlock.yml") == ["unlock"] and _marks(TASKS / "finish.yml") == ["report"]
    # upgrade_on_failure.yml's rollback, from the run's snapshot.
    recovery = _load(TASKS / steps.RUNBOOKS["upgrade"].recovery)
    assert "rollback_after_failure.yml" in yaml.safe_dump(recovery)
    assert tuple(_marks(TASKS / "rollback_after_failure.yml")) == steps.RUNBOOKS["upgrade"].on_failure
    # Nowhere else does a step begin (a mark of another name would be a step the report does not know).
    marked = set()
    for path in list(PLAYBOOKS.rglob("*.yml")) + list((ROOT / "roles").rglob("*.yml")):
        marked |= set(_marks(path))
    assert marked == set(steps.STEPS)


@pytest.mark.parametrize("runbook", sorted(steps.RUNBOOKS))
def test_runbook_steps_in_order(runbook):
    names = steps.runbook_steps(runbook)
    assert names[0] == "preflight" and names[-1] == "report" and len(names) == len(set(names))
    assert set(names) <= set(steps.STEPS)


def _report_results():
    tasks = [t for t in _load(TASKS / "report.yml") if "block" in t]
    writes = [b for t in tasks for b in t["block"] if "tensorfusion.ops.run_report" in b]
    return writes[0]["tensorfusion.ops.run_report"]["results"]


def test_the_report_gets_the_result_of_every_step_and_nothing_else():
    results = _report_results()
    assert sorted(results) == sorted(k for k, _fact in steps.result_keys())
    for key, fact in steps.result_keys():
        assert re.search(r"\b%s\b" % fact, results[key]), (key, results[key])
    # Only steps give results (the inputs' check is the preflight's first check).
    assert set(k for s in steps.STEPS.values() for k, _f in s.results) == set(results)


def _record_names():
    """(the results keys, the step names) that report/record.py reads."""
    tree = ast.parse(Path(record.__file__).read_text())
    keys, names = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "results" \
                and node.args and isinstance(node.args[0], ast.Constant):
            keys.add(node.args[0].value)
        # s["name"] == "rollback", s["name"] in ("rollback", ...)
        if isinstance(node, ast.Compare) and isinstance(node.left, ast.Subscript) \
                and isinstance(node.left.slice, ast.Constant) and node.left.slice.value == "name":
            for comp in node.comparators:
                items = comp.elts if isinstance(comp, (ast.Tuple, ast.List, ast.Set)) else [comp]
                names.update(i.value for i in items if isinstance(i, ast.Constant))
        # {"step": "upgrade", ...}: a warning of a step
        if isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == "step" and isinstance(v, ast.Constant):
                    names.add(v.value)
    return keys, names


def test_the_record_reads_the_results_and_steps_of_the_list():
    keys, names = _record_names()
    assert keys and keys <= set(k for k, _fact in steps.result_keys()), keys
    assert names and names <= set(steps.STEPS), names
    assert record.BOOKKEEPING == steps.bookkeeping()


def test_the_readme_s_steps_table_is_the_list():
    text = (PLAYBOOKS / "README.md").read_text().split("## Steps and tags", 1)[1]
    rows = dict((m.group(1), m.group(2)) for m in re.finditer(r"^\| (`[a-z_]+\.yml`(?:, `[a-z_]+\.yml`)*) \| (.+) \|$",
                                                              text, re.M))
    for runbook, book in steps.RUNBOOKS.items():
        row, = [v for k, v in rows.items() if "`%s.yml`" % runbook in k]
        named = re.findall(r"`([a-z_]+)`", row)
        assert tuple(named) == book.steps + book.on_failure, (runbook, row)
