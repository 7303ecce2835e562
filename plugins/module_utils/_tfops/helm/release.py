# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_release's decisions on a release (pure): ``helm upgrade --install`` and ``helm rollback``
(to a revision or to a snapshot bundle) - the task's input checked, the helm flags it sets and
those a snapshot recorded, the upgrade's arguments, a saved plan's identity checked, the secrets
of a revision and of the task's own arguments. The run itself (idempotent by comparing chart
version, user values and rendered manifest with what is deployed, check mode through a
server-side dry run, recovery of releases stuck pending-*) is backends/helm_release.py; the
comparison of two renderings with the pools kept live, gpupool/release_changes.py."""

from __future__ import annotations

import os
from urllib.parse import urlparse

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    PlanRefused,
)

UPGRADE_STATES = ("deployed",)


# ---- pure decisions -----------------------------------------------------------------------------
def check_repo_url(url, option="chart_repo_url"):
    """A chart repository URL as helm's --repo takes it: http:// or https:// with a host (helm
    itself would only say it found no protocol handler)."""
    parsed = urlparse(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc or " " in url:
        raise InvalidInput("%s: %r is not an http:// or https:// URL of a chart repository (an "
                           "oci:// chart or a chart folder goes in the chart reference, without a "
                           "repository URL)" % (option, url))


CHART_ARCHIVES = (".tgz", ".tar.gz")


def check_values_file(path, option="values_files"):
    """A values file on the controller must parse as a YAML mapping (or be empty) before helm
    reads it: any other file's lines would become the release's values and a restore point's
    (``../../etc/shadow``). Neither a refusal nor its error shows the content, only where the
    YAML is broken. A URL is helm's to fetch."""
    if "://" in path:
        return
    try:
        doc = yamldoc.load_file(path, "values file")
    except InvalidInput as exc:
        raise InvalidInput("%s: %s" % (option, exc.msg))
    if doc is not None and not isinstance(doc, dict):
        raise InvalidInput("%s: %s is not a mapping of Helm values but a YAML %s (its content is not "
                           "shown)" % (option, path, type(doc).__name__))
    # Lines such as /etc/shadow's or /etc/group's ("name:x:0:") parse as keys without a value: a
    # values file that sets nothing but nulls is not one (and would only unset the chart's defaults).
    if doc and all(value is None for value in doc.values()):
        raise InvalidInput("%s: %s is not a values file: none of its %d keys has a value (its content "
                           "is not shown)" % (option, path, len(doc)))


def check_chart_ref(ref, option="chart_ref"):
    """What helm will read as the chart: a chart folder must hold Chart.yaml and a local file
    must be a packaged chart (``../../etc`` is neither); ``repo/chart``, a chart name with a
    repository URL, and oci:// or http(s):// references are helm's to resolve."""
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidInput("%s: a chart reference is needed" % option)
    if "://" in ref:
        return
    full = os.path.abspath(os.path.expanduser(ref))
    if os.path.isdir(full):
        if not os.path.isfile(os.path.join(full, "Chart.yaml")):
            raise InvalidInput("%s: %s is a folder without Chart.yaml: not a chart" % (option, ref))
    elif os.path.exists(full) and not ref.endswith(CHART_ARCHIVES):
        raise InvalidInput("%s: %s is a file but not a packaged chart (%s)" % (option, ref, " or ".join(CHART_ARCHIVES)))
    elif not os.path.exists(full) and (ref.startswith(("/", "./", "../", "~")) or ref.endswith(CHART_ARCHIVES)):
        raise InvalidInput("%s: %s does not exist on the controller (a chart folder or archive)" % (option, ref))


# Options that only a state that uses them takes; given with another state they would be ignored.
STATE_OPTIONS = (("revision", "rolled_back"), ("snapshot", "rolled_back"))


def validate(params):
    modes = [m for m in ("reuse_values", "reset_then_reuse_values") if params.get(m)]
    if len(modes) > 1:
        raise InvalidInput("reuse_values and reset_then_reuse_values are mutually exclusive")
    if modes and params.get("reset_values"):
        raise InvalidInput("reset_values and %s are mutually exclusive: reset_values starts from the "
                           "chart's values, %s from the last release's" % (modes[0], modes[0]))
    for option, state in STATE_OPTIONS:
        if params.get(option) is not None and params["state"] != state:
            raise InvalidInput("%s goes with state: %s; state: %s would ignore it" % (
                option, state, params["state"]))
    if params.get("snapshot") is None:
        if params.get("signing_key"):
            raise InvalidInput("signing_key goes with snapshot (the key a bundle was signed with)")
        if params.get("allow_unsigned"):
            raise InvalidInput("allow_unsigned goes with snapshot (a bundle with no signature)")
    if params["state"] == "rolled_back":
        if (params.get("revision") is None) == (params.get("snapshot") is None):
            raise InvalidInput("state=rolled_back needs exactly one of revision and snapshot")
        if params.get("revision") is not None and params["revision"] < 1:
            raise InvalidInput("revision must be 1 or more")
    if params.get("chart_repo_url"):
        check_repo_url(params["chart_repo_url"])
    if params["state"] == "present":
        check_chart_ref(params.get("chart_ref"))
        for path in params.get("values_files") or []:
            check_values_file(path)
    for item in params.get("set_values") or []:
        if "=" not in (item.get("value") or ""):
            raise InvalidInput("set_values: %r is not key=value (use key= for an empty string)"
                               % item.get("value"))
    if params.get("extra_args") is not None:
        params["extra_args"] = helmcli.parse_extra_args(params["extra_args"])


def effective_flags(params, recorded=None):
    """({option: value}, {option: source}) of the helm flags a run uses (disable_openapi_validation,
    skip_crds, no_hooks, extra_args). An option the task sets wins (source ``task``); one it leaves
    unset takes the value a snapshot recorded for the upgrade that followed it (``snapshot``), so
    that a rollback to that snapshot passes what the upgrade needed; else off (``default``)."""
    recorded = recorded or {}
    flags, sources = {}, {}
    for key in helmcli.FLAG_OPTIONS:
        if params.get(key) is not None:
            flags[key], sources[key] = params[key], "task"
        elif recorded.get(key) is not None:
            flags[key], sources[key] = recorded[key], "snapshot"
        else:
            flags[key], sources[key] = ([] if key == "extra_args" else False), "default"
        flags[key] = list(flags[key]) if key == "extra_args" else bool(flags[key])
    return flags, sources


def recorded_flags(params):
    """What a snapshot records of the upgrade's helm flags (``helm_flags``): normalised, complete."""
    if params is None:
        return None
    flags = effective_flags(dict(params, extra_args=helmcli.parse_extra_args(
        params.get("extra_args"), "helm_flags.extra_args")))[0]
    return flags


def upgrade_args(params, version, values_file=None, flags=None, known=None):
    """The ``helm upgrade --install`` arguments for a task (without --dry-run/--output); ``flags``
    (effective_flags) default to the task's own, ``known`` is what this helm lists for upgrade."""
    args = ["upgrade", "--install", params["name"], params["chart_ref"],
            "--namespace", params["namespace"]]
    if params.get("chart_repo_url"):
        args += ["--repo", params["chart_repo_url"]]
    if params.get("chart_version"):
        args += ["--version", params["chart_version"]]
    if params.get("create_namespace"):
        args.append("--create-namespace")
    for path in params.get("values_files") or []:
        args += ["-f", path if "://" in path else os.path.expanduser(path)]
    if values_file:
        args += ["-f", values_file]
    for item in params.get("set_values") or []:
        args += [helmcli.SET_FLAGS[item.get("value_type") or "raw"], item["value"]]
    if params.get("reuse_values"):
        args.append("--reuse-values")
    elif params.get("reset_then_reuse_values"):
        if version[0] == 3 and version[1] < 14:
            raise InvalidInput("reset_then_reuse_values needs helm >= 3.14; this helm is %s"
                               % helmcli.version_text(version))
        args.append("--reset-then-reuse-values")
    elif params.get("reset_values") is not False:  # unset: reset, as helm 3 otherwise reuses
        args.append("--reset-values")
    if flags is None:
        flags = effective_flags(params)[0]
    return args + helmcli.flag_args(flags, helmcli.UPGRADE, version, known)


def write_args(params, version, seconds):
    """Flags of a real run: wait, timeout, atomic mapped to the helm major."""
    args = ["--timeout", helmcli.seconds_flag(seconds)]
    if params.get("wait"):
        args.append("--wait")
    if params.get("atomic"):
        args.append(helmcli.atomic_flag(version))
    return args


def check_plan_identity(identity, expected):
    """Refuse a chart or rendered values other than those a saved plan was made with."""
    drift = ["chart: changed (same name and version, other content)"
             if expected.get("chart_digest") and identity["chart_digest"] != expected["chart_digest"] else None,
             "rendered values: changed" if expected.get("values_digest") and
             identity["values_digest"] != expected["values_digest"] else None]
    drift = [d for d in drift if d]
    if drift:
        raise PlanRefused("the chart step renders something else than the plan saw: %s; nothing was "
                          "written, make a new plan" % "; ".join(drift), drift=drift)


def secrets_in(info):
    """Every secret-looking string a revision info holds (for no_log_values)."""
    if not info:
        return []
    found = redact.secret_leaves(info.get("values") or {})
    found += redact.secret_leaves(info.get("computed_values") or {})
    found += redact.manifest_secret_values(info.get("manifest") or "")
    return found


def params_secrets(params):
    """Secret-looking values in the task's own arguments."""
    found = redact.secret_leaves(params.get("values") or {})
    for item in params.get("set_values") or []:
        key, _sep, value = item["value"].partition("=")
        if value and redact.set_value_is_secret(key + "="):
            found.append(value)
    return [v for v in found if len(v) >= 3]


def summary(info):
    return {"revision": info.get("revision"), "status": info.get("status"), "chart": info.get("chart"),
            "chart_version": info.get("chart_version"), "app_version": info.get("app_version")}


def before_versions(info):
    """The chart and app version of the release before the task (None for each when it did not
    exist): a rollback's report says which chart it came from."""
    return {"chart_version_before": (info or {}).get("chart_version"),
            "app_version_before": (info or {}).get("app_version")}
