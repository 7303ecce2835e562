# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The runbooks' flat ``tfops_*`` variables: one specification (which runbook reads which
variable, and what it must be) and the checks a runbook makes of all of them in its preflight,
before the lock or any write, with messages that name the variable the user set.

Each check reuses the collection's own validators (Go durations, image references, helm flags,
the maintenance window's rules, the Secret content rules, gpupool_rollout's argument spec for
tfops_pools, tfops_gates and tfops_business_change_*); what needs the cluster (pools, namespaces, the Secret and its
consumers, a snapshot reference) is read by backends/runbook_inputs.py.

Blank (``""``, as AWX sends an empty survey answer) or null means unset, except for
tfops_chart_repo, where blank means no repository. A list may be given as comma- or
newline-separated text, a boolean or a number as text."""

from __future__ import annotations

import os
import re
import shutil

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import auth
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import option_text
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import durations
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import values
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import gates as gate_rules
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import options as pool_options
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.options import (
    BUSINESS_CHANGE_OPTIONS,
    GATE_OPTIONS,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import release as helm_release
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store as snapshot_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import lock as locks
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance import window as windows
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.options import (
    WINDOW_OPTIONS,
    WINDOW_RULES,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import fleet
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import places as where
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import plan as secret_plan
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads import changes

RUNBOOKS = ("upgrade", "rollback", "rotate_secret", "precheck")
# fleet_upgrade.yml is upgrade.yml across an inventory: upgrade.yml's variables and its own.
FLEET = ("fleet_upgrade",)
PLAYBOOKS = RUNBOOKS + FLEET
ALL = RUNBOOKS
CHANGING = ("upgrade", "rollback", "rotate_secret")  # lock, window, saved plans
HELM = ("upgrade", "rollback")
VERIFYING = CHANGING
PRECHECKING = ("upgrade", "rotate_secret", "precheck")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# A chart version or a semver constraint as helm's --version takes it (Masterminds/semver):
# comparisons (=, !=, >, <, >=, <=, ~, ~>, ^) of versions with x/X/* wildcards, joined by spaces,
# commas or ||.
_VERSION = r"v?(?:[0-9]+|[xX*])(?:\.(?:[0-9]+|[xX*])){0,2}(?:-[0-9A-Za-z.-]+)?(?:\+[0-9A-Za-z.-]+)?"
_CONSTRAINT = re.compile(r"^\s*(?:(?:!=|>=|<=|~>|=|>|<|~|\^)?\s*%s)(?:(?:\s*,\s*|\s+|\s*\|\|\s*)"
                         r"(?:!=|>=|<=|~>|=|>|<|~|\^)?\s*%s)*\s*$" % (_VERSION, _VERSION))


# ---- checks of one value: (value, name) -> the value as the runbook uses it; InvalidInput -------
def named(name, check, *args):
    """``check(*args)``, whose refusal does not name what it checked, with ``name:`` in front."""
    try:
        return check(*args)
    except InvalidInput as exc:
        raise InvalidInput("%s: %s" % (name, exc.msg))


def returning(check):
    """A check made of a validator (``check(value, name)``, which raises or not): the value as given."""
    def checked(value, name):
        check(value, name)
        return value
    return checked


# A variable given as text (a name, a path, an image, a code), or a list of such, is one line of at
# most this many characters: a line of a log and a field of the report, not a document (mappings
# carry documents); the modules' options alike (core/option_text.py).
MAX_TEXT = option_text.MAX_TEXT


def bounded_text(value, name):
    """Refuse text (or a list's text) that is not one line of at most MAX_TEXT, whatever the variable."""
    for index, item in enumerate(value if isinstance(value, list) else [value]):
        option_text.check(item, name if not isinstance(value, list) else "%s[%d]" % (name, index))


def text(value, name):
    if not isinstance(value, str):
        raise InvalidInput("%s: %s, not text" % (name, values.kind_of(value)))
    return value


def boolean(value, name):
    return values.boolean(value, name)


def whole(low=None, high=None, unit=" seconds"):
    def check(value, name):
        return values.whole_number(value, name, low, high, unit if low is not None and high is None else "")
    return check


def choice(*options):
    def check(value, name):
        if value not in options:
            raise InvalidInput("%s: %r is not one of %s" % (name, value, ", ".join(options)))
        return value
    return check


def dns_label(value, name):
    if not isinstance(value, str) or len(value) > 63 or not _DNS_LABEL.match(value):
        raise InvalidInput("%s: %r is not a namespace name (lowercase letters, digits and '-', at "
                           "most 63)" % (name, value))
    return value


def release_name(value, name):
    if not isinstance(value, str) or len(value) > 53 or not _DNS_SUBDOMAIN.match(value):
        raise InvalidInput("%s: %r is not a Helm release name (lowercase letters, digits, '-' and "
                           "'.', at most 53)" % (name, value))
    return value


def object_name(value, name):
    if not isinstance(value, str) or len(value) > 253 or not _DNS_SUBDOMAIN.match(value):
        raise InvalidInput("%s: %r is not an object name (lowercase letters, digits, '-' and '.')"
                           % (name, value))
    return value


go_duration = returning(durations.go_duration_seconds)
window_duration = returning(windows.parse_duration)
image = returning(lambda value, name: rollout.validate_image(None, None, value, name))
timezone = returning(lambda value, name: named(name, windows.get_zone, value))
secret_data = returning(lambda value, name: secret_plan.check_content(value, name, encoded=True))
secret_string_data = returning(secret_plan.check_content)
secret_name = returning(secret_plan.check_name)


def lock_ttl(value, name):
    return locks.check_ttl(values.whole_number(value, name, 1, None, " seconds"), name)


lock_holder = returning(lambda value, name: locks.check_holder(text(value, name), name))


def mapping(value, name):
    return values.mapping(value, name, " (for example {key: value})")


def text_list(element=None):
    def check(value, name):
        items = values.text_list(value, name)
        return [element(item, "%s[%d]" % (name, i)) if element else item for i, item in enumerate(items)]
    check.element = element  # what each item is (the walking tests look at it)
    return check


def _path(value, name):
    return os.path.expanduser(text(value, name))


def existing_file(value, name):
    if not os.path.isfile(_path(value, name)):
        raise InvalidInput("%s: %s is not a file on the controller" % (name, value))
    return value


def executable(value, name):
    path = _path(value, name)
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise InvalidInput("%s: %s is not an executable file on the controller" % (name, value))
    return value


def folder(value, name):
    """A folder that exists or can be made: the nearest existing one on its path is a folder."""
    path = os.path.abspath(_path(value, name))
    probe = path
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        raise InvalidInput("%s: %s cannot be a folder: %s is a file" % (name, value, probe))
    return value


def file_to_write(value, name):
    path = os.path.abspath(_path(value, name))
    if os.path.isdir(path):
        raise InvalidInput("%s: %s is a folder, not a file to write" % (name, value))
    folder(os.path.dirname(path), name)
    return value


def url_or_file(value, name):
    if isinstance(value, str) and "://" in value:
        named(name, helm_release.check_repo_url, value, "a URL")
        return value
    return existing_file(value, name)


def values_file(value, name):
    """A Helm values file: a URL, or a file that parses as a YAML mapping (helm/release.py's
    check, which helm_release makes again)."""
    if isinstance(value, str) and "://" in value:
        return url_or_file(value, name)
    helm_release.check_values_file(text(value, name), name)
    return value


def chart_ref(value, name):
    helm_release.check_chart_ref(text(value, name), name)
    return value


def repo_url(value, name):
    if value == "":
        return value  # blank: no repository (a chart path or oci:// reference)
    helm_release.check_repo_url(text(value, name), name)
    return value


def chart_version(value, name):
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not _CONSTRAINT.match(value):
        raise InvalidInput("%s: %r is not a chart version or a version constraint (1.8.7, ~1.8, "
                           ">=1.8.0 <2)" % (name, value))
    return value


def kubeconfig(value, name):
    """A kubeconfig given as data, or files on the controller that are kubeconfigs (core/auth's
    check; whether data may run a command is the rule _kubeconfig_exec's)."""
    if isinstance(value, dict):
        named_auth(auth.check_inline_kubeconfig, value, True, name)
        return value
    for part in filter(None, text(value, name).split(os.pathsep)):
        doc = named(name, yamldoc.load_file, part, "kubeconfig")
        if not isinstance(doc, dict):
            raise InvalidInput("%s: %s is not a kubeconfig (a YAML mapping; its content is not shown)" % (name, part))
        named_auth(auth.check_inline_kubeconfig, doc, True, "%s: %s" % (name, part))
    return value


def named_auth(check, *args):
    """An auth check's refusal (AuthError) as the inputs' refusal."""
    try:
        return check(*args)
    except auth.AuthError as exc:
        raise InvalidInput(exc.msg)


def plan(value, name):
    return value if isinstance(value, dict) else existing_file(value, name)


def snapshot(value, name):
    if snapshot_store.is_reference(value):
        named(name, snapshot_store.parse_reference, value)
        return value
    if not os.path.isdir(_path(value, name)):
        raise InvalidInput("%s: %s is neither a snapshot reference (secret://<namespace>/<name>) nor "
                           "a bundle folder on the controller" % (name, value))
    return value


def signing_key(value, name):
    named(name, signing.BundleKey, text(value, name).encode("utf-8"))
    return value


def helm_args(value, name):
    return helmcli.parse_extra_args(values.text_list(value, name), name)


def gates(value, name):
    mapping(value, name)
    if not value:
        return value
    gate_rules.normalize(values.with_spec(GATE_OPTIONS, dict(value), name), name)
    return value


# gpupool_rollout's business_changes options as the runbook's variables (the gpupool_update role
# passes them on; step_pools.yml).
BUSINESS_CHANGE_VARIABLES = dict(gate="tfops_business_change_gate", workloads="tfops_business_change_workloads",
                                 percent="tfops_business_change_percent")


def business_change(key):
    """tfops_business_change_<key>: gpupool_rollout's business_changes.<key> - its argument spec
    (type, choices), then the gate's own rules (workloads/changes.check_spec)."""
    def check(value, name):
        if key == "gate" and value is False:  # off unquoted in YAML is a boolean
            value = "off"
        option = dict(BUSINESS_CHANGE_OPTIONS[key], default=None)
        checked = values.with_spec({key: option}, {key: value}, name)[key]
        changes.check_spec({key: checked}, names={key: name})
        return checked
    return check


def pools(value, name):
    items = value if isinstance(value, (list, tuple)) else values.text_list(value, name)
    return [pool_options.check_pool_item(item, "%s[%d]" % (name, i)) for i, item in enumerate(items)]


def consumers(value, name):
    if not isinstance(value, (list, tuple)):
        raise InvalidInput("%s: %s, not a list of consumers" % (name, values.kind_of(value)))
    for index, consumer in enumerate(value):
        secret_plan.validate_consumer(consumer, index, name)
    return list(value)


# ---- the specification ------------------------------------------------------------------------
class Variable:
    """A runbook variable: the runbooks that read it, its check, whether it may hold a secret
    (then it never reaches a result or a log; ``"mapping"``: only when it is one, as a kubeconfig
    given inline) and whether blank is a value of its own."""

    def __init__(self, name, runbooks, check, secret=False, blank_is_value=False, required=()):
        self.name, self.runbooks, self.check = name, runbooks, check
        self.secret, self.blank_is_value, self.required = secret, blank_is_value, required

    def is_secret(self, value):
        return isinstance(value, dict) if self.secret == "mapping" else bool(self.secret)


# ---- the files and folders a value names (runbook/places.py says where they may be) ---------------
HELM_FILE_FLAGS = ("--ca-file", "--cert-file", "--key-file", "--keyring")
# The runbook's own folders when the run names none (vars/runbook.yml).
DEFAULT_FOLDERS = {"tfops_snapshot_dir": "~/tfops-snapshots", "tfops_artifacts_dir": "~/tfops-artifacts"}


def _texts(value):
    try:
        return [v for v in values.text_list(value, "") if isinstance(v, str)]
    except InvalidInput:
        return []  # the variable's own check says what is wrong with it


def _local(ref):
    return isinstance(ref, str) and bool(ref) and "://" not in ref


def _chart_path(ref):
    """A chart reference that helm reads from the controller's disk (else a name it resolves)."""
    return _local(ref) and (ref.startswith(("/", "./", "../", "~")) or ref.endswith(helm_release.CHART_ARCHIVES)
                            or os.path.exists(os.path.expanduser(ref)))


def _flag_files(value):
    found, items = [], _texts(value)
    for index, item in enumerate(items):
        flag, sep, arg = item.partition("=")
        if flag in HELM_FILE_FLAGS:
            arg = arg if sep else (items[index + 1] if index + 1 < len(items) else "")
            if arg:
                found.append(arg)
    return found


# variable -> (kind of place, the paths of a value)
PATHS = {
    "tfops_kubeconfig": (where.KUBECONFIG, lambda v: [p for p in str(v).split(os.pathsep) if p]
                         if isinstance(v, str) else []),
    "tfops_python_interpreter": (where.RUN, lambda v: [v] if _local(v) else []),
    "tfops_helm_binary": (where.RUN, lambda v: [v] if _local(v) else []),
    "tfops_artifacts_dir": (where.WRITE, lambda v: [v] if _local(v) else []),
    "tfops_snapshot_dir": (where.WRITE, lambda v: [v] if _local(v) else []),
    "tfops_plan_out": (where.WRITE, lambda v: [v] if _local(v) else []),
    "tfops_plan": (where.READ, lambda v: [v] if _local(v) else []),
    "tfops_snapshot": (where.READ, lambda v: [v] if _local(v) and not snapshot_store.is_reference(v) else []),
    "tfops_chart": (where.READ, lambda v: [v] if _chart_path(v) else []),
    "tfops_values_cn": (where.READ, lambda v: [v] if _local(v) else []),
    "tfops_values_files": (where.READ, lambda v: [p for p in _texts(v) if _local(p)]),
    "tfops_helm_extra_args": (where.READ, _flag_files),
}


def places_for(given, project=None, environ=None):
    """The folders this run's path variables may name (runbook/places.py): the project, and the
    runbook's own folders once they are allowed themselves."""
    project = [os.getcwd()] if project is None else project
    folders = {}
    writable = where.Places(project, environ)
    for name, default in DEFAULT_FOLDERS.items():
        folder = given.get(name) or default
        if _local(folder) and writable.problem(where.WRITE, folder, name) is None:
            folders[name] = folder
    return where.Places(project, environ, snapshot_dir=folders.get("tfops_snapshot_dir"),
                        artifacts_dir=folders.get("tfops_artifacts_dir"))


def confined(variable, value, places):
    """Why ``value`` of ``variable`` names a file or folder it may not (one problem), or None;
    asked before the variable's own check, so that a file outside is never read."""
    kind, paths_of = PATHS.get(variable.name, (None, None))
    if kind is None:
        return None
    for index, path in enumerate(paths_of(value)):
        name = variable.name if variable.name != "tfops_values_files" else "%s[%d]" % (variable.name, index)
        problem = places.problem(kind, path, name)
        if problem:
            return problem
    return None


V = Variable
SPEC = [
    # The cluster, the Python, the release (every runbook).
    V("tfops_kubeconfig", ALL, kubeconfig, secret="mapping"),
    V("tfops_kubeconfig_allow_exec", ALL, boolean),
    # Read raw by runbook_guard (only a YAML true counts there); checked here like any boolean.
    V("tfops_trust_templates", ALL, boolean),
    V("tfops_context", ALL, text),
    V("tfops_python_interpreter", ALL, executable),
    V("tfops_in_process", ALL, boolean),
    V("tfops_namespace", ALL, dns_label),
    V("tfops_release", ALL, release_name),
    V("tfops_helm_binary", ALL, executable),
    V("tfops_report_store", ALL, choice("local", "cluster", "both")),
    V("tfops_report_keep", ALL, whole(1, unit="")),
    V("tfops_artifacts_dir", ALL, folder),
    V("tfops_timeout", ALL, whole(1)),
    V("tfops_rbac_preflight", ALL, boolean),
    V("tfops_precheck_downgrade_codes", PRECHECKING, text_list(text)),
    # Verify.
    V("tfops_verify_downgrade_codes", VERIFYING, text_list(text)),
    V("tfops_verify_acceptance_pod", VERIFYING, boolean),
    V("tfops_verify_pool", VERIFYING, object_name),
    V("tfops_verify_image", VERIFYING, image),
    # The lock, saved plans, the window (the runbooks that change something).
    V("tfops_lock_name", CHANGING, object_name),
    V("tfops_lock_holder", CHANGING, lock_holder),
    V("tfops_lock_ttl", CHANGING, lock_ttl),
    V("tfops_lock_heartbeat", CHANGING, boolean),
    V("tfops_renew_retry_timeout", CHANGING, whole(0)),
    V("tfops_unlock_timeout", CHANGING, whole(0)),
    V("tfops_plan_out", CHANGING, file_to_write),
    V("tfops_plan", CHANGING, plan),
    V("tfops_plan_max_age", CHANGING, whole(1)),
    V("tfops_window_start", CHANGING, text),
    V("tfops_window_end", CHANGING, text),
    V("tfops_window_cron", CHANGING, text_list(text)),
    V("tfops_window_duration", CHANGING, window_duration),
    V("tfops_window_pool", CHANGING, object_name),
    V("tfops_window_timezone", CHANGING, timezone),
    V("tfops_window_safety_margin", CHANGING, window_duration),
    V("tfops_stall_timeout", CHANGING, whole(1)),
    # Snapshots and helm (upgrade, rollback).
    V("tfops_snapshot_dir", HELM, folder),
    V("tfops_snapshot_signing_key", HELM, signing_key, secret=True),
    V("tfops_helm_disable_openapi_validation", HELM, boolean),
    V("tfops_helm_skip_crds", HELM, boolean),
    V("tfops_helm_no_hooks", HELM, boolean),
    V("tfops_keep_pools", HELM, boolean),
    V("tfops_helm_extra_args", HELM, helm_args),
    V("tfops_rollback_timeout", HELM, whole(1)),
    # upgrade.yml (and fleet_upgrade.yml).
    V("tfops_snapshot_store", ("upgrade",), choice("local", "cluster", "both")),
    V("tfops_chart", ("upgrade",), chart_ref),
    V("tfops_chart_repo", ("upgrade",), repo_url, blank_is_value=True),
    V("tfops_chart_version", ("upgrade",), chart_version),
    V("tfops_region", ("upgrade",), choice("international", "cn")),
    V("tfops_values_cn", ("upgrade",), values_file),
    V("tfops_local_mode", ("upgrade",), boolean),
    V("tfops_values", ("upgrade",), mapping, secret=True),  # Helm values may hold credentials
    V("tfops_values_files", ("upgrade",), text_list(values_file)),
    V("tfops_update_crds", ("upgrade",), boolean),
    V("tfops_pools", ("upgrade",), pools),
    V("tfops_hypervisor_image", ("upgrade",), image),
    V("tfops_worker_image", ("upgrade",), image),
    V("tfops_client_image", ("upgrade",), image),
    V("tfops_batch_percentage", ("upgrade",), whole(1, 100)),
    V("tfops_batch_interval", ("upgrade",), go_duration),
    V("tfops_on_deadline", ("upgrade",), choice("pause", "fail")),
    V("tfops_each_batch", ("upgrade",), boolean),
    V("tfops_gates", ("upgrade",), gates),
    V("tfops_business_change_gate", ("upgrade",), business_change("gate")),
    V("tfops_business_change_workloads", ("upgrade",), business_change("workloads")),
    V("tfops_business_change_percent", ("upgrade",), business_change("percent")),
    V("tfops_rollback_on_failure", ("upgrade",), boolean),
    # fleet_upgrade.yml (the play's hosts and serial, and its place in a fleet workflow; runbook/fleet.py).
    V("tfops_fleet_serial", FLEET, fleet.serial),
    V("tfops_fleet_wave", FLEET, whole(0, unit="")),
    V("tfops_fleet_passed", FLEET, fleet.passed_wave),
    V("tfops_fleet_failed", FLEET, fleet.failed_clusters),
    # rollback.yml.
    V("tfops_snapshot", ("rollback",), snapshot),
    V("tfops_runs", ("rollback",), mapping),
    V("tfops_restore_component_config", ("rollback",), boolean),
    V("tfops_allow_unsigned", ("rollback",), boolean),
    # rotate_secret.yml.
    V("tfops_secret_name", ("rotate_secret",), secret_name, required=("rotate_secret",)),
    V("tfops_secret_namespace", ("rotate_secret",), dns_label),
    V("tfops_secret_data", ("rotate_secret",), secret_data, secret=True),
    V("tfops_secret_string_data", ("rotate_secret",), secret_string_data, secret=True),
    V("tfops_secret_type", ("rotate_secret",), text),
    V("tfops_secret_strategy", ("rotate_secret",), choice("in_place", "versioned")),
    V("tfops_secret_consumers", ("rotate_secret",), consumers),
    V("tfops_secret_delete_old", ("rotate_secret",), boolean),
    V("tfops_secret_keep", ("rotate_secret",), whole(0, unit="")),
    V("tfops_secret_wait_timeout", ("rotate_secret",), whole(1)),
    V("tfops_secret_delete_unrolled_pods", ("rotate_secret",), boolean),
]
BY_NAME = dict((v.name, v) for v in SPEC)
# The window's options as the runbook's variables (step_window.yml passes them on).
WINDOW_VARIABLES = dict(start="tfops_window_start", end="tfops_window_end", cron="tfops_window_cron",
                        duration="tfops_window_duration", pool="tfops_window_pool",
                        timezone="tfops_window_timezone", safety_margin="tfops_window_safety_margin")


def runbook_of(playbook):
    """The runbook ``playbook`` runs (fleet_upgrade.yml runs upgrade.yml's for each cluster)."""
    return "upgrade" if playbook in FLEET else playbook


def variables(playbook):
    """The variables ``playbook`` reads (fleet_upgrade.yml: upgrade.yml's and its own)."""
    return [v for v in SPEC if playbook in v.runbooks or runbook_of(playbook) in v.runbooks]


def is_set(variable, value):
    return value is not None and (value != "" or variable.blank_is_value)


# ---- all of them, and what goes between them ----------------------------------------------------
def check(playbook, given, helm_on_path=None, awx=None, places=None):
    """(values as the runbook uses them, problems): every variable of ``playbook`` in ``given``
    ({name: value}, the variables the user set) checked, then the rules between them. Pure but
    for the controller's files it looks at. ``helm_on_path``: where helm is found when
    tfops_helm_binary is unset (shutil.which by default). ``awx``: the AWX job's own variables
    (``awx_*`` without the prefix; fleet_upgrade.yml's place in a fleet workflow). ``places``:
    where path variables may point (places_for(given) by default: the working directory is the
    project)."""
    places = places_for(given) if places is None else places
    if playbook not in PLAYBOOKS:
        raise InvalidInput("playbook %r is not a runbook (%s)" % (playbook, ", ".join(PLAYBOOKS)))
    checked, problems = {}, []
    for variable in variables(playbook):
        value = given.get(variable.name)
        if not is_set(variable, value):
            if playbook in variable.required:
                problems.append("%s is required" % variable.name)
            continue
        outside = confined(variable, value, places)
        if outside:
            problems.append(outside)
            continue
        try:
            # The variable's own check first: its refusal is the more precise one (a holder's 256).
            checked[variable.name] = variable.check(value, variable.name)
            bounded_text(value, variable.name)
        except InvalidInput as exc:
            checked.pop(variable.name, None)
            problems.append(exc.msg)
    for rule in RULES:
        try:
            rule(runbook_of(playbook), checked, given)
        except InvalidInput as exc:
            problems.append(exc.msg)
    if playbook in FLEET:
        problems += _fleet(checked, given, awx)
    if runbook_of(playbook) in HELM and "tfops_helm_binary" not in checked and \
            not any(p.startswith("tfops_helm_binary") for p in problems):
        found = helm_on_path if helm_on_path is not None else shutil.which("helm")
        if not found:
            problems.append("tfops_helm_binary: no helm on the controller's PATH; install helm 3 or 4, "
                            "or set tfops_helm_binary to its path")
    return checked, problems


def _renamed_rules(rename):
    """maintenance_window's rules between its options, under the runbook's variable names."""
    def pairs(groups):
        return [tuple(rename[o] for o in group) for group in groups if all(o in rename for o in group)]
    return dict(mutually_exclusive=pairs(WINDOW_RULES["mutually_exclusive"]),
                required_together=pairs(WINDOW_RULES["required_together"]),
                required_by=dict((rename[k], tuple(rename[o] for o in v))
                                 for k, v in WINDOW_RULES["required_by"].items() if k in rename))


def _window(playbook, checked, given):
    """At most one source of the window, complete (maintenance_window's rules), and its times and
    cron expressions readable in its time zone."""
    if playbook not in CHANGING:
        return
    spec = dict((name, dict(WINDOW_OPTIONS[option], default=None))
                for option, name in WINDOW_VARIABLES.items())
    params = dict((name, checked.get(name, given.get(name))) for name in WINDOW_VARIABLES.values()
                  if is_set(BY_NAME[name], given.get(name)))
    values.with_spec(spec, params, None, **_renamed_rules(WINDOW_VARIABLES))
    if is_set(BY_NAME["tfops_window_timezone"], given.get("tfops_window_timezone")) and \
            "tfops_window_timezone" not in checked:
        return  # the time zone itself is refused: nothing can be read in it
    tz = windows.get_zone(checked.get("tfops_window_timezone") or "UTC")
    if "tfops_window_start" in checked:
        start = windows.parse_instant(checked["tfops_window_start"], tz, "tfops_window_start")
        end = windows.parse_instant(checked["tfops_window_end"], tz, "tfops_window_end")
        if end <= start:
            raise InvalidInput("tfops_window_end %s is not after tfops_window_start %s" % (
                windows.iso(end), windows.iso(start)))
    if checked.get("tfops_window_cron"):
        windows.require_croniter()
        named("tfops_window_cron", windows.parse_schedules, checked["tfops_window_cron"], tz)


def _kubeconfig_exec(_playbook, checked, _given):
    """A kubeconfig given as data runs no command on the controller unless
    tfops_kubeconfig_allow_exec is true (an AWX survey answer is data)."""
    if isinstance(checked.get("tfops_kubeconfig"), dict):
        named_auth(auth.check_inline_kubeconfig, checked["tfops_kubeconfig"],
                   bool(checked.get("tfops_kubeconfig_allow_exec")), "tfops_kubeconfig")


def _region(playbook, checked, given):
    if playbook == "upgrade" and checked.get("tfops_region") == "cn" and not checked.get("tfops_values_cn") \
            and given.get("tfops_chart_repo") == "":
        raise InvalidInput("tfops_region: cn needs values-cn.yaml - set tfops_values_cn (tfops_chart_repo "
                           "is blank, so there is no repository to take it from)")


def _secret(playbook, checked, given):
    if playbook != "rotate_secret":
        return
    if not checked.get("tfops_secret_data") and not checked.get("tfops_secret_string_data") and \
            not any(is_set(BY_NAME[n], given.get(n)) for n in ("tfops_secret_data", "tfops_secret_string_data")):
        raise InvalidInput("tfops_secret_string_data or tfops_secret_data must hold the new content")
    keys = set(checked.get("tfops_secret_data") or {}) | set(checked.get("tfops_secret_string_data") or {})
    secret_plan.check_key_names(keys, "tfops_secret_data/tfops_secret_string_data")
    if checked.get("tfops_secret_strategy") == "versioned" and len(checked.get("tfops_secret_name") or "") > 242:
        raise InvalidInput("tfops_secret_name is too long for a versioned Secret (at most 242 characters)")


def _fleet(checked, given, awx):
    """fleet_upgrade.yml's place in a fleet workflow (runbook/fleet.py); nothing when one of its
    variables is refused already."""
    names = ("tfops_fleet_serial", "tfops_fleet_wave", "tfops_fleet_passed", "tfops_fleet_failed")
    if any(is_set(BY_NAME[n], given.get(n)) and n not in checked for n in names):
        return []
    return fleet.problems(checked.get("tfops_fleet_wave"), checked.get("tfops_fleet_serial"),
                          checked.get("tfops_fleet_passed"), checked.get("tfops_fleet_failed"), awx)


RULES = (_window, _region, _secret, _kubeconfig_exec)


def message(problems):
    return ("%d input%s refused before anything was written (no lock, no change): %s" % (
        len(problems), "" if len(problems) == 1 else "s", "; ".join(problems)))
