"""The AWX surveys of extensions/awx/surveys against the runbooks they drive: every question sets
a variable its runbook really reads and the runbooks' README documents; types, choices and
defaults agree with the runbook's default and with the role option the variable ends up in
(meta/argument_specs.yml); what a runbook needs is asked; and a blank answer (AWX sends "" for a
text question left empty) means what an unset variable means, in every runbook expression."""
import ast
import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.integration.awx_job import QUESTION_TYPES, SURVEYS, answer_errors, job_extra_vars, load_survey

REPO = Path(__file__).resolve().parents[3]
PLAYBOOKS = REPO / "playbooks"
RUNBOOKS = sorted(p.stem for p in PLAYBOOKS.glob("*.yml"))
# Blank means something of its own here, as the README says: no repository (a path or oci:// chart).
BLANK_IS_A_VALUE = {"tfops_chart_repo"}
UNSET = object()


def _walk(node, key=None):
    """(key, Jinja expression) of every templated string and every ``when`` in a YAML tree."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("when", "changed_when", "failed_when") and isinstance(v, str):
                yield k, "{{ %s }}" % v
            else:
                # A dict of the mapping (tfops_helm_flags, tfops_lock) is read as tfops_x.<key>.
                yield from _walk(v, "%s.%s" % (key, k) if key and key.startswith("tfops_") else k)
    elif isinstance(node, list):
        for item in node:
            yield from _walk(item, key)
    elif isinstance(node, str) and "{{" in node:
        yield key, node


def _load(path):
    return yaml.safe_load(path.read_text())


MAPPING = _load(PLAYBOOKS / "vars" / "runbook.yml")
ROLE_OPTIONS = {}
for _spec in sorted(REPO.glob("roles/*/meta/argument_specs.yml")):
    for _entry in _load(_spec)["argument_specs"].values():
        ROLE_OPTIONS.update(_entry.get("options") or {})


def _files_of(runbook):
    """The playbook and every task file it includes, transitively."""
    files, todo = [], [PLAYBOOKS / ("%s.yml" % runbook)]
    while todo:
        path = todo.pop()
        if path in files:
            continue
        files.append(path)
        todo += [PLAYBOOKS / "tasks" / name for name in re.findall(r"(?:/tasks/|tfops_tasks_dir }}/)([a-z_]+\.yml)", path.read_text())]
    return files


def _internal_names():
    """tfops_* names the runbooks set themselves (facts, registered results, task vars, the mapping)."""
    names = set(k for k in MAPPING if k.startswith("tfops_"))
    for path in PLAYBOOKS.rglob("*.yml"):
        text = path.read_text()
        names.update(re.findall(r"register: (tfops_[a-z_]+)", text))
        names.update(re.findall(r"tfops_verify_fact: (tfops_[a-z_]+)", text))  # a fact named by a variable
        names.update(re.findall(r"^\s+(tfops_[a-z_]+):", text, re.M))  # set_fact keys, task and play vars
    return names


INTERNAL = _internal_names()


@functools.lru_cache(maxsize=None)
def expressions(runbook):
    """(key, expression) the runbook templates: its files, and the mapping's keys of its roles plus
    the intermediate tfops_* keys they use."""
    found, roles = [], set()
    for path in _files_of(runbook):
        text = path.read_text()
        roles.update(re.findall(r"name: tensorfusion\.ops\.([a-z_]+)$", text, re.M))
        found += list(_walk(_load(path)))
    mapped = [(k, e) for k, e in _walk(MAPPING) if k.startswith(tuple(r + "_" for r in roles))]
    wanted = set(k for k, _expr in mapped) | set(n for _key, e in found + mapped for n in re.findall(r"\btfops_[a-z_]+", e))
    while True:
        more = [(k, e) for k, e in _walk(MAPPING) if k.split(".")[0] in wanted and (k, e) not in mapped]
        if not more:
            break
        mapped += more
        wanted |= set(n for _key, e in more for n in re.findall(r"\btfops_[a-z_]+", e))
    return tuple(found + mapped)


def runbook_variables(runbook):
    """The user-facing tfops_* variables the runbook reads."""
    return set(n for _key, e in expressions(runbook) for n in re.findall(r"\btfops_[a-z_]+", e)) - INTERNAL


def documented():
    names = set()
    for line in (PLAYBOOKS / "README.md").read_text().splitlines():
        if line.startswith("| `tfops_"):
            names.update(re.findall(r"`(tfops_[a-z_]+)`", line.split("|")[1]))
    return names


def _literal(text):
    text = text.strip()
    if text == "omit":
        return UNSET
    if re.fullmatch(r"[a-z_][a-z0-9_]*", text) and text not in ("true", "false", "none"):
        return ("variable", text)
    value = ast.literal_eval(re.sub(r"\b(true|false|none)\b", lambda m: m.group(1).capitalize(), text))
    return UNSET if value in ("", None, []) else value


def runbook_defaults(runbook, var):
    """Every default the runbook's expressions give ``var`` (UNSET for '', none, [] and omit)."""
    found = set()
    for _key, expr in expressions(runbook):
        # (default('') | string | length > 0 asks whether the variable is set, it gives no default)
        for arg in re.findall(r"\b%s \| default\(((?:[^()]|\([^()]*\))*)\)(?! \| string \| length)" % var, expr):
            arg = re.sub(r",\s*true\s*$", "", arg)
            value = _literal(arg)
            found.add(json.dumps(value) if value is not UNSET and not isinstance(value, tuple) else value)
    return found


DIRECT = re.compile(r"\{\{ ([a-z_.]+)((?: \| [^{}|]+)*) \}\}")


def role_targets(runbook, var):
    """Role options that take the variable as it is (defaulted, perhaps made a bool, int or list),
    directly or through the mapping's tfops_* keys; computed options (a dict the runbook builds, a
    list of pools) are the unit tests' of their filters."""
    names, targets, chain, exprs = {var}, {}, {}, expressions(runbook)
    changed = True
    while changed:
        changed = False
        for key, expr in exprs:
            direct = DIRECT.fullmatch(expr.strip())
            if key and key not in names and direct and direct.group(1) in names:
                # The option's expression, after those of the intermediate keys it goes through.
                through = chain.get(direct.group(1), "") + expr.strip()
                if key in ROLE_OPTIONS:
                    targets[key] = through
                elif key.startswith("tfops_"):
                    names.add(key)
                    chain[key] = through
                    changed = True
    return targets


def surveys():
    return [(runbook, load_survey(runbook)) for runbook in RUNBOOKS]


def test_every_runbook_has_a_survey_and_every_survey_a_runbook():
    assert sorted(p.stem for p in SURVEYS.glob("*.json")) == RUNBOOKS


@pytest.mark.parametrize("runbook,survey", surveys(), ids=RUNBOOKS)
def test_the_survey_is_one_awx_takes(runbook, survey):
    assert survey["name"] and survey["description"] and survey["spec"]
    variables = [q["variable"] for q in survey["spec"]]
    assert len(variables) == len(set(variables)), "a variable asked twice"
    for question in survey["spec"]:
        assert set(question) <= {"question_name", "question_description", "variable", "type", "required",
                                 "default", "choices", "min", "max"}, question
        assert question["question_name"] and question["question_description"], question
        assert question["type"] in QUESTION_TYPES and isinstance(question["required"], bool), question
        if question["type"] in ("multiplechoice", "multiselect"):
            assert question["choices"], question
        if question.get("default") is not None:
            assert answer_errors(question, {question["variable"]: question["default"]}) == [], question
        else:
            assert question["type"] == "integer" or question["required"], \
                "an optional text question needs the default \"\" (what AWX sends when it is left blank)"
    # Launched with no answers at all, the survey's defaults make a valid job.
    required_without_default = dict((q["variable"], "x") for q in survey["spec"]
                                    if q["required"] and q.get("default") is None)
    job_extra_vars(survey, required_without_default)


@pytest.mark.parametrize("runbook,survey", surveys(), ids=RUNBOOKS)
def test_every_question_sets_a_documented_variable_the_runbook_reads(runbook, survey):
    reads, docs = runbook_variables(runbook), documented()
    for question in survey["spec"]:
        assert question["variable"] in reads, "%s does not read %s" % (runbook, question["variable"])
        assert question["variable"] in docs, "playbooks/README.md does not document %s" % question["variable"]


@pytest.mark.parametrize("runbook,survey", surveys(), ids=RUNBOOKS)
def test_what_the_runbook_needs_is_a_required_question(runbook, survey):
    needed = set(v for v in runbook_variables(runbook) if not runbook_defaults(runbook, v))
    asked = dict((q["variable"], q) for q in survey["spec"])
    for var in needed:
        assert var in asked and asked[var]["required"], "%s needs %s (it has no default)" % (runbook, var)
    assert needed == ({"tfops_secret_name"} if runbook == "rotate_secret" else set())


def _survey_value(question, value):
    """A runbook or role default as the question's answer would carry it."""
    if question["type"] == "multiplechoice" and isinstance(value, bool):
        return "true" if value else "false"
    return value


@pytest.mark.parametrize("runbook,survey", surveys(), ids=RUNBOOKS)
def test_defaults_types_and_choices_agree_with_the_runbook_and_the_roles(runbook, survey):
    for question in survey["spec"]:
        var, kind = question["variable"], question["type"]
        defaults = runbook_defaults(runbook, var)
        if not defaults:  # needed: see test_what_the_runbook_needs_is_a_required_question
            assert question["required"] and "default" not in question, var
            continue
        assert len(defaults) == 1, "%s: the runbook's expressions disagree on its default: %s" % (var, defaults)
        default = defaults.pop()
        default = json.loads(default) if isinstance(default, str) else default
        if default is UNSET or isinstance(default, tuple):  # unset, or another variable's value
            assert question.get("default") in ("", None), "%s: blank means the runbook's default" % var
        else:
            assert question.get("default") == _survey_value(question, default), (var, default)
        for option, expr in role_targets(runbook, var).items():
            spec = ROLE_OPTIONS[option]
            where = "%s -> %s" % (var, option)
            if spec.get("type") == "bool":
                assert kind == "multiplechoice" and question["choices"] == ["true", "false"], where
            elif spec.get("type") == "int":
                assert kind == "integer", where
            elif spec.get("type") == "list":
                assert kind in ("text", "textarea", "multiselect"), where
                assert "survey_list" in expr or "pool_updates" in expr, "%s: a text answer is not made a list" % where
            elif spec.get("choices"):
                assert kind == "multiplechoice" and sorted(question["choices"]) == sorted(spec["choices"]), where
            else:
                assert spec.get("type", "str") == "str" and kind in ("text", "textarea", "password"), where
            if "default" in spec and default is not UNSET and not isinstance(default, tuple):
                assert spec["default"] == default, "%s: the role's default differs from the runbook's" % where


# Runtime facts that some expressions read besides the variables (the blank test only compares).
FACTS = {"tfops_marks": [{"step": "a", "at": "2026-01-01T00:00:00Z"}] * 2, "tfops_started": "2026-01-01T00:00:00Z",
         "tfops_deadline": "2026-01-01T01:00:00Z", "tfops_playbook": "upgrade", "tfops_step": "a",
         "tfops_verify_fact": "x", "tfops_lock_result": {"holder": "h"}, "snapshot_bundle": "",
         "tfops_resumable": False, "tfops_error": {}, "tfops_lock_taken": {"holder": "h"}}


def _play_vars():
    """The plays' own vars (tfops_playbook aside, which differs), as the expressions see them."""
    out = {}
    for runbook in RUNBOOKS:
        for play in _load(PLAYBOOKS / ("%s.yml" % runbook)):
            out.update((k, v) for k, v in (play.get("vars") or {}).items() if k != "tfops_playbook")
    return out


def _render(exprs, extra_vars, tmp_path, name):
    play = [{"name": "Render", "hosts": "localhost", "connection": "local", "gather_facts": False,
             "vars": dict(FACTS, **_play_vars(), **dict(("e%d" % i, e) for i, (_key, e) in enumerate(exprs))),
             # As the runbooks read their variables (pre_tasks).
             "pre_tasks": [{"name": "Variables", "ansible.builtin.include_vars": str(PLAYBOOKS / "vars" / "runbook.yml")}],
             "tasks": [{"name": "Dump", "ansible.builtin.copy": {
                 "dest": str(tmp_path / (name + ".json")), "mode": "0600",
                 "content": "{{ {%s} | to_json }}" % ", ".join("'e%d': e%d" % (i, i) for i in range(len(exprs)))}}]}]
    path = tmp_path / (name + ".yml")
    path.write_text(yaml.safe_dump(play))
    (tmp_path / "extra.json").write_text(json.dumps(extra_vars))
    env = dict(os.environ, ANSIBLE_PYTHON_INTERPRETER=sys.executable, ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               ANSIBLE_DEPRECATION_WARNINGS="true")
    proc = subprocess.run(["ansible-playbook", "-i", "localhost,", str(path), "-e", "@%s" % (tmp_path / "extra.json")],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "coerced invalid value" not in proc.stdout + proc.stderr, "a blank answer reached a filter as a value"
    return json.loads((tmp_path / (name + ".json")).read_text())


def test_a_blank_answer_means_what_an_unset_variable_means(tmp_path):
    """Every documented variable with a default, answered "" (a blank AWX text question), gives every
    expression of every runbook the value it has when the variable is not set at all."""
    blank = set()
    exprs = []
    for runbook in RUNBOOKS:
        blank |= set(v for v in runbook_variables(runbook) if runbook_defaults(runbook, v)) - BLANK_IS_A_VALUE
        exprs += [(k, e) for k, e in expressions(runbook) if "lookup(" not in e and (k, e) not in exprs]
    # now() would differ between the two renderings; omit cannot be serialized: both become constants.
    exprs = [(k, re.sub(r"\bomit\b", "'OMIT'", e.replace("now().timestamp()", "0"))) for k, e in exprs
             if set(re.findall(r"\btfops_[a-z_]+", e)) & blank]
    unset = _render(exprs, {}, tmp_path, "unset")
    blanks = _render(exprs, dict((v, "") for v in blank), tmp_path, "blank")
    differ = ["%s: %s -> %r instead of %r" % (k, e, blanks["e%d" % i], unset["e%d" % i])
              for i, (k, e) in enumerate(exprs) if blanks["e%d" % i] != unset["e%d" % i]]
    assert not differ, "\n".join(differ)
