"""A job as AWX hands it to ansible-runner: the survey's semantics (which answers it accepts, how
the job's extra variables are built from the template's extra vars, the survey defaults and the
answers) and the private data dir AWX lays out (inventory/hosts, env/extravars, env/envvars with
what the "OpenShift or Kubernetes API Bearer Token" credential injects, env/settings, project/,
requirements_collections/). Pure except for the writing of the folder; no lab needed.

AWX's rules, as its SurveyJobTemplateMixin applies them: a question's default is used when it is
not None and itself a valid answer (so a text question whose default is "" sends "" when left
blank); text answers are strings within min/max length, integer answers ints within min/max,
multiplechoice answers one of the choices, multiselect answers lists of them."""
import json
import os
import stat
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
SURVEYS = REPO / "extensions" / "awx" / "surveys"
QUESTION_TYPES = ("text", "textarea", "password", "integer", "float", "multiplechoice", "multiselect")


def load_survey(runbook):
    return json.loads((SURVEYS / ("%s.json" % runbook)).read_text())


def _choices(question):
    choices = question.get("choices") or []
    if isinstance(choices, str):
        choices = [c for c in choices.splitlines() if c.strip()]
    return list(choices)


def _bounded(question, size, what):
    errors = []
    if question.get("min") not in ("", None) and size < float(question["min"]):
        errors.append("%s: %s below the minimum %s" % (question["variable"], what, question["min"]))
    if question.get("max") not in ("", None) and size > float(question["max"]):
        errors.append("%s: %s above the maximum %s" % (question["variable"], what, question["max"]))
    return errors


def answer_errors(question, answers):
    """Why AWX would refuse the answer to ``question`` among ``answers`` (a dict); [] if it takes it."""
    var, kind = question["variable"], question["type"]
    if var not in answers:
        return ["%s: value missing" % var] if question.get("required") else []
    value = answers[var]
    if kind in ("text", "textarea", "password"):
        if not isinstance(value, str):
            return ["%s: %r is not a string" % (var, value)]
        return _bounded(question, len(value), "length %d" % len(value))
    if kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):  # AWX refuses bools and floats alike
            return ["%s: %r is not an integer" % (var, value)]
        return _bounded(question, value, "value %d" % value)
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return ["%s: %r is not a number" % (var, value)]
        return _bounded(question, value, "value %s" % value)
    if kind == "multiplechoice":
        return [] if value in _choices(question) else ["%s: %r is not one of %s" % (var, value, _choices(question))]
    if kind == "multiselect":
        if not isinstance(value, list):
            return ["%s: %r is not a list" % (var, value)]
        return ["%s: %r is not one of %s" % (var, v, _choices(question)) for v in value if v not in _choices(question)]
    return ["%s: unknown question type %r" % (var, kind)]


def job_extra_vars(survey, answers, template_extra_vars=None, artifacts=None):
    """The job's extra variables as AWX builds them: the job template's extra vars, then every
    survey default that is a valid answer, then what earlier jobs of the workflow set with
    set_stats (``artifacts``), then the launch's answers; a refused answer or a variable the
    survey does not ask for (without "prompt on launch" for variables) stops the launch, as in AWX."""
    questions = dict((q["variable"], q) for q in survey["spec"])
    unknown = sorted(set(answers) - set(questions))
    assert not unknown, "not survey variables (AWX refuses them at launch): %s" % unknown
    out = dict(template_extra_vars or {})
    for var, question in questions.items():
        if question.get("default") is not None and not answer_errors(question, {var: question["default"]}):
            out[var] = question["default"]
    out.update(artifacts or {})
    out.update(answers)
    errors = [e for q in survey["spec"] for e in answer_errors(q, out)]
    assert not errors, errors
    return out


def write_private(path, text, mode=0o600):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)
    os.chmod(str(path), mode)


def bearer_token_env(pdd, host, token, ca_pem):
    """What AWX's "OpenShift or Kubernetes API Bearer Token" credential injects (verify on, with
    its CA): the CA goes to a 0600 file of the private data dir's env/ folder."""
    ca_path = Path(pdd) / "env" / ("tmp-ca-%s" % os.urandom(4).hex())
    write_private(ca_path, ca_pem)
    return {"K8S_AUTH_HOST": host, "K8S_AUTH_API_KEY": token, "K8S_AUTH_VERIFY_SSL": "True",
            "K8S_AUTH_SSL_CA_CERT": str(ca_path)}


def sliced(names, number=1, count=1):
    """The hosts of slice ``number`` (from 1) of ``count`` as AWX's job slicing picks them
    (Inventory.get_sliced_hosts): the hosts ordered by name, every ``count``-th from the
    ``number``-th."""
    names = sorted(names)
    return names[number - 1::count] if count > 1 and number > 0 else names


def inventory_script(hosts, groups=None, number=1, count=1):
    """inventory/hosts as AWX writes it for slice ``number`` of ``count`` (1 of 1: the whole
    inventory): an executable that prints the inventory's JSON. ``hosts`` {name: vars}, ``groups``
    {group: [host names]}: a group keeps the slice's hosts only, and every group stays a child of
    ``all`` (Inventory.get_script_data)."""
    groups = groups or {}
    mine = sliced(hosts, number, count)
    grouped = set(h for members in groups.values() for h in members)
    data = {"all": {"hosts": [h for h in mine if h not in grouped]}}
    if groups:
        data["all"]["children"] = sorted(groups)
    for group, members in groups.items():
        if any(h in members for h in mine):
            data[group] = {"hosts": [h for h in mine if h in members]}
    data["_meta"] = {"hostvars": dict((h, hosts[h]) for h in mine)}
    return "#! /usr/bin/env python3\n# -*- coding: utf-8 -*-\nprint(%r)\n" % json.dumps(data)


def lay_out(pdd, hosts, extravars, envvars, job_timeout=600, groups=None, job_slice=(1, 1)):
    """The private data dir: inventory/hosts (0700 script; with ``job_slice`` (number, count) the
    slice's), env/extravars, env/envvars, env/settings (AWX's job timeout), empty project/ and
    requirements_collections/ for the caller to fill with the project checkout and the installed
    collection."""
    pdd = Path(pdd)
    write_private(pdd / "inventory" / "hosts", inventory_script(hosts, groups, *job_slice), 0o700)
    write_private(pdd / "env" / "extravars", yaml.safe_dump(extravars))
    write_private(pdd / "env" / "envvars", yaml.safe_dump(envvars))
    write_private(pdd / "env" / "settings", yaml.safe_dump({"job_timeout": job_timeout, "pexpect_timeout": 5}))
    (pdd / "project").mkdir(exist_ok=True)
    (pdd / "requirements_collections").mkdir(exist_ok=True)
    os.chmod(str(pdd / "env"), stat.S_IRWXU)
    return pdd


def job_events(pdd, ident):
    """Every job event of the run, in the order ansible-runner numbered them."""
    folder = Path(pdd) / "artifacts" / ident / "job_events"
    events = [json.loads(p.read_text()) for p in folder.glob("*.json")]
    return sorted(events, key=lambda e: e.get("counter", 0))


def artifact_data(events):
    """What AWX stores as the job's artifacts (set_stats, aggregated): the playbook_on_stats
    event's artifact_data."""
    stats = [e for e in events if e.get("event") == "playbook_on_stats"]
    assert stats, "no playbook_on_stats event"
    return stats[-1]["event_data"].get("artifact_data") or {}
