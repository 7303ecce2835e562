# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_release: ``helm upgrade --install`` and ``helm rollback`` (to a revision or to a snapshot
bundle), idempotent by comparing chart version, user values and rendered manifest with what is
deployed, check mode through a server-side dry run, recovery of releases stuck pending-*."""

from __future__ import annotations

import copy
import json
import os
from urllib.parse import urlparse

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.task import Task
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import plan as plans
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import pool_keeper
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import yamldoc
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    HelmError,
    InvalidInput,
    PendingRelease,
    PlanRefused,
    ReleaseNotFound,
    WaitTimeout,
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


def _objects_by_key(manifest, normalize=pool_keeper.comparable):
    objects = {}
    for doc in map(normalize, redact.parse_manifest(manifest)):
        meta = doc.get("metadata") or {}
        objects[(doc.get("apiVersion"), doc.get("kind"), meta.get("namespace"), meta.get("name"))] = doc
    return objects


KEEP = "helm.sh/resource-policy"


def _kept(doc):
    return ((doc.get("metadata") or {}).get("annotations") or {}).get(KEEP) == "keep"


def kept_one_sided(before, after):
    """Keys of objects annotated resource-policy keep that only one manifest holds (a chart that
    renders such an object only while it is absent, through lookup)."""
    b, a = _objects_by_key(before or ""), _objects_by_key(after or "")
    return [k for k in set(b) ^ set(a) if _kept(b.get(k) or a.get(k))]


def same_manifest(before, after, exists=None, ignore_pools=False):
    """Rendered manifests equal as objects (see manifest_changes: nothing added, changed or
    removed)."""
    return not any(manifest_changes(before, after, ignore_pools, exists).values())


def rollback_blockers(current_manifest, target_manifest, exists):
    """Objects that ``helm rollback`` refuses ("no <kind> with the name ... found"): in the target
    revision, not in the current one, yet present in the cluster."""
    cur, tgt = _objects_by_key(current_manifest or ""), _objects_by_key(target_manifest or "")
    return sorted((k for k in set(tgt) - set(cur) if exists(k)), key=str)


def changes(deployed, desired, exists=None, ignore_pools=False):
    """What differs between a deployed revision and a desired one: a list of reasons."""
    reasons = []
    if deployed is None:
        return ["the release does not exist"]
    if deployed.get("status") not in UPGRADE_STATES:
        reasons.append("its last revision is %s" % deployed.get("status"))
    if deployed.get("chart") != desired.get("chart") or \
            deployed.get("chart_version") != desired.get("chart_version"):
        reasons.append("chart %s-%s -> %s-%s" % (deployed.get("chart"), deployed.get("chart_version"),
                                                 desired.get("chart"), desired.get("chart_version")))
    if (deployed.get("values") or {}) != (desired.get("values") or {}):
        reasons.append("values differ")
    if not same_manifest(deployed.get("manifest"), desired.get("manifest"), exists, ignore_pools):
        reasons.append("rendered manifest differs")
    return reasons


def manifest_changes(before, after, ignore_pools=False, exists=None):
    """The objects a new rendering adds, changes and removes, by kind: {"added": {kind: [names]},
    ...} (names as namespace/name; the content is in the diff, secrets masked); document order and
    formatting aside. A kept object that only one side renders does not count when
    ``exists(key)`` says it is in the cluster. ``ignore_pools``: the TensorFusionClusters' pools
    are not compared (kept live). Exactly what makes a release's manifest differ (changes())."""
    normalize = pool_keeper.without_pools if ignore_pools else pool_keeper.comparable
    b, a = _objects_by_key(before or "", normalize), _objects_by_key(after or "", normalize)
    if exists is not None:
        for key in kept_one_sided(before, after):
            if exists(key):
                b.pop(key, None)
                a.pop(key, None)
    out = {"added": {}, "changed": {}, "removed": {}}

    def put(what, key):
        _api, kind, namespace, name = key
        out[what].setdefault(kind or "?", []).append("%s/%s" % (namespace, name) if namespace else str(name))
    for key in sorted(set(a) - set(b), key=str):
        put("added", key)
    for key in sorted(set(b) - set(a), key=str):
        put("removed", key)
    for key in sorted(set(a) & set(b), key=str):
        if a[key] != b[key]:
            put("changed", key)
    return out


def _images(doc):
    """{container name: image} of a workload's Pod template (init containers too)."""
    spec = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
    return dict((c.get("name"), c.get("image")) for key in ("initContainers", "containers")
                for c in spec.get(key) or [] if isinstance(c, dict))


def image_changes(before, after):
    """The container images a new rendering changes, from and to, object by object: each
    {object: "<Kind> <namespace>/<name>", container, from, to} (from None: a new container or
    object). TensorFusionClusters' pools are not the chart step's (see gpupool_rollout's
    spec_changes)."""
    b, a = _objects_by_key(before or ""), _objects_by_key(after or "")
    out = []
    for key in sorted(a, key=str):
        _api, kind, namespace, name = key
        old, new = _images(b.get(key) or {}), _images(a[key])
        for container in sorted(new, key=str):
            if new[container] != old.get(container):
                out.append({"object": "%s %s" % (kind, "%s/%s" % (namespace, name) if namespace else name),
                            "container": container, "from": old.get(container), "to": new[container]})
    return out


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


def with_live_pools(manifest, live):
    """``manifest`` with each TensorFusionCluster that is live carrying the live pools (``live``:
    {name: cluster}, pool_keeper's), as the post-renderer makes every rendering of a chart step
    that keeps the pools: a revision's stored pools are those of its own chart step, often older
    than the live ones, and shown as "before" they would turn the change's direction round."""
    if not live or not manifest:
        return manifest
    docs = redact.parse_manifest(manifest)
    for doc in docs:
        if chart_pools.is_cluster(doc) and chart_pools.object_name(doc) in live:
            doc.setdefault("spec", {})["gpuPools"] = copy.deepcopy(
                (live[chart_pools.object_name(doc)].get("spec") or {}).get("gpuPools") or [])
    return "".join("---\n" + yamldoc.dump(d, default_flow_style=False, sort_keys=True) for d in docs)


def release_view(info, live=None):
    """Values and manifest of a revision as they may be shown: secrets hashed; with ``live``, its
    TensorFusionClusters carry the live pools (with_live_pools)."""
    if info is None:
        return {"values": {}, "manifest": ""}
    return {"values": redact.redact_values(info.get("values") or {}),
            "manifest": redact.mask_manifest(with_live_pools(info.get("manifest") or "", live))}


def diff_of(before, after, what, live=None):
    """--diff of a release change; ``live``: the live clusters when the pools are kept (the chart
    step does not move them: the pools step does, and its own diff says how)."""
    b, a = release_view(before, live), release_view(after, live)
    return [{"before_header": "%s values" % what, "after_header": "%s values" % what,
             "before": json.dumps(b["values"], indent=2, sort_keys=True) + "\n",
             "after": json.dumps(a["values"], indent=2, sort_keys=True) + "\n"},
            {"before_header": "%s manifest" % what, "after_header": "%s manifest" % what,
             "before": b["manifest"], "after": a["manifest"]}]


def from_dry_run(out):
    """The release a dry run (or a real run) with ``-o json`` prints, as a revision info."""
    try:
        rel = json.loads(out)
    except ValueError:
        raise HelmError("helm printed no JSON release: %s" % (out or "")[:300])
    meta = ((rel.get("chart") or {}).get("metadata") or {})
    return {"revision": rel.get("version"), "status": (rel.get("info") or {}).get("status"),
            "chart": meta.get("name"), "chart_version": meta.get("version"),
            "app_version": meta.get("appVersion"), "values": rel.get("config") or {},
            "manifest": rel.get("manifest") or "",
            # The chart as helm loaded it (metadata, templates, default values, files): a
            # re-published chart of the same version has another digest.
            "chart_digest": plans.plain_digest(rel.get("chart") or {})}


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


def on_secret(ctx):
    """How the helm tasks register secret-looking strings: masked wherever they show (three
    characters or more: shorter fragments would mask unrelated text)."""
    return lambda values: ctx.hide(values, min_length=3)


# ---- the task -----------------------------------------------------------------------------------
class ReleaseTask(Task):
    """One helm_release run with the helm CLI; the secret-looking strings it meets are registered
    with the context (masked wherever they show)."""

    def __init__(self, ctx, params, helm):
        super().__init__(ctx, params)
        self.helm = helm
        self.on_secret = on_secret(ctx)
        self._exists_cache = {}
        self.keeper = pool_keeper.PoolKeeper(self.kube, helm.temp_dir, helm.major, params.get("keep_pools", True))
        self.held, self._providers, self._providers_before = [], {}, {}
        self.result = {"changed": False, "name": params["name"], "namespace": params["namespace"],
                       "helm_version": helmcli.version_text(helm.version), "command": None,
                       "recovered": None}
        self.use_flags(None)

    def use_flags(self, recorded):
        """The helm flags of this run: the task's, completed by those a snapshot ``recorded``
        (checked again against the allow-list: a bundle is data, not trusted arguments)."""
        if recorded is not None:
            recorded = dict(recorded, extra_args=helmcli.parse_extra_args(
                recorded.get("extra_args"), "the snapshot's helm_flags.extra_args"))
        self.flags, sources = effective_flags(self.params, recorded)
        self.result["helm_flags"] = dict(self.flags)
        self.result["helm_flags_source"] = sources
        return self.flags

    def _flags(self, command):
        return self.helm.flag_args(self.flags, command)

    def exists(self, key):
        """Whether the object (apiVersion, kind, namespace, name) of a manifest is in the cluster."""
        if self.kube is None:
            return False
        if key not in self._exists_cache:
            api_version, kind, namespace, name = key
            from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import ApiError
            try:
                resource = self.kube.resource(kind, api_version=api_version)
                kwargs = {"name": name}
                if resource.namespaced:
                    kwargs["namespace"] = namespace or self.params["namespace"]
                self.kube.call("get", "%s/%s" % (resource.name, name), resource.get, **kwargs)
                self._exists_cache[key] = True
            except ApiError as exc:
                if exc.status != 404:
                    raise
                self._exists_cache[key] = False
        return self._exists_cache[key]

    def _seconds(self):
        remaining = self.deadline.remaining()
        if remaining <= 0:
            raise HelmError("no time left (%s) for helm" % self.deadline.reason)
        return remaining

    def _write(self, args):
        """A real helm run bounded by the deadline; its masked command goes into the result."""
        seconds = self._seconds()
        full = args + write_args(self.params, self.helm.version, seconds)
        self.result["command"] = self.helm.shown(full)
        try:
            return self.helm.run(full, timeout=int(seconds) + 60)
        finally:
            # helm writes with its own client: a revision is recorded (deployed, or failed and
            # perhaps rolled back), so the module changed something whatever happens next.
            if self.kube is not None:
                self.kube.written = True

    def _current(self):
        history = self.helm.history(self.params["name"], self.params["namespace"])
        if not history:
            return None, history
        info, history = self.helm.release(self.params["name"], self.params["namespace"])
        self.on_secret(secrets_in(info))
        return info, history

    def _handle_pending(self, history):
        """Fail on a pending-* release, or roll it back to its last deployed revision."""
        pending = helmcli.pending_state(history)
        if not pending:
            return False
        status, revision = pending
        target = helmcli.last_deployed_revision(history)
        where = "release %s in namespace %s" % (self.params["name"], self.params["namespace"])
        if self.params["recover_pending"] != "rollback":
            raise PendingRelease(
                "%s is stuck %s at revision %s: another helm operation is in progress or was "
                "interrupted. Make sure none is running, then set recover_pending=rollback to go "
                "back to the last deployed revision (%s) first%s." % (
                    where, status, revision, target if target else "none",
                    "" if target else "; with no deployed revision, only helm uninstall can clear it"),
                status=status, revision=revision, last_deployed_revision=target)
        if target is None:
            raise PendingRelease(
                "%s is stuck %s at revision %s and has no earlier deployed revision to roll back "
                "to; helm uninstall %s -n %s clears it" % (where, status, revision,
                                                           self.params["name"], self.params["namespace"]),
                status=status, revision=revision)
        self.result["recovered"] = {"from_status": status, "from_revision": revision,
                                    "to_revision": target}
        if self.check_mode:
            return True
        self._write(["rollback", self.params["name"], str(target), "--namespace",
                     self.params["namespace"]] + self._flags(helmcli.ROLLBACK))
        self.result["changed"] = True
        return True

    def present(self):
        params = self.params
        self.on_secret(params_secrets(params))
        current, history = self._current()
        self.result["revision_before"] = current["revision"] if current else None
        self.result.update(before_versions(current))
        recovered = self._handle_pending(history)
        if recovered and self.check_mode:
            self.warnings.append("check mode: the release is pending; after the recovery rollback "
                                 "the upgrade would be evaluated again")
            self.result.update(changed=True, status=current["status"], revision_after=None)
            return self.result
        if recovered:
            current, history = self._current()
        helmcli.require_server_dry_run(self.helm.version)
        values_file = self.helm.write_file("values.json", helmcli.values_yaml(params.get("values"))) \
            if params.get("values") else None
        args = upgrade_args(params, self.helm.version, values_file, self.flags,
                            self.helm.known_flags(helmcli.UPGRADE) if self.flags["extra_args"] else None)
        self._keep_pools()
        desired = from_dry_run(self.helm.run(args + self.keeper.flags() + [
            "--dry-run=server", "-o", "json", "--timeout", helmcli.seconds_flag(self._seconds())],
            timeout=int(self._seconds()) + 60))
        self.on_secret(secrets_in(desired))
        reasons = changes(current, desired, self.exists)
        # The same comparison as the reasons': a change is listed exactly when the manifest differs.
        self.result["manifest_changes"] = manifest_changes((current or {}).get("manifest"), desired["manifest"],
                                                           exists=self.exists)
        self.result["image_changes"] = image_changes((current or {}).get("manifest"), desired["manifest"])
        plan = params.get("plan_identity")
        if plan:
            identity = {"chart_digest": desired["chart_digest"],
                        "values_digest": plans.digest(desired["values"], plan["salt"])}
            self.result["plan_identity"] = identity
            check_plan_identity(identity, plan)  # before any write of the chart step
        held = self._chart_pool_changes(current, desired)
        self.result.update(changed=self.result["changed"] or bool(reasons), reasons=reasons,
                           chart=desired["chart"], chart_version=desired["chart_version"],
                           app_version=desired["app_version"])
        if self.check_mode or self.diff_mode:
            self.result["diff"] = diff_of(current, desired, "release %s" % params["name"],
                                          self.keeper.live if self.keeper.enabled else None)
        if self.check_mode:
            self.result["command"] = self.helm.shown(args + write_args(params, self.helm.version,
                                                                       self.deadline.remaining()))
            self.result.update(status=current["status"] if current else None,
                               revision_after=self.result["revision_before"])
            return self.result
        if not reasons:
            self.result.update(status=current["status"], revision_after=current["revision"])
            return self.result
        if held:
            pool_keeper.hold(self.kube, held)
            self._keep_pools()  # the post-renderer carries the pools as they are now: held
        applied = from_dry_run(self._write(args + self.keeper.flags() + ["-o", "json"]))
        self.on_secret(secrets_in(applied))
        self._after_providers_changed()
        after, _history = self._current()
        self.result.update(status=after["status"], revision_after=after["revision"],
                           chart=after["chart"], chart_version=after["chart_version"],
                           app_version=after["app_version"])
        return self.result

    def _keep_pools(self):
        """Set up (again) the post-renderer that keeps the live pools (gpupool/chart_pools.py)."""
        self.keeper.prepare()
        self.helm.extra_env.update(self.keeper.env())

    def _chart_pool_changes(self, current, desired):
        """What the chart step leaves to the pools step (``chart_pool_changes``), and the pools
        whose hypervisors a ProviderConfig change of this chart would start rolling at once: those
        are held (paused, as a deadline pauses them) before helm writes, and resumed and rolled
        once by the pools step."""
        if not self.keeper.enabled:
            return []
        pool_changes = self.keeper.changes((current or {}).get("manifest"))
        held = self._providers_held(desired.get("manifest"))
        for cluster, entry in held:
            item = pool_changes.setdefault(cluster, {}).setdefault(entry, {}).setdefault("hypervisor", {})
            item["provider_config_changed"] = sorted(self._providers)
        self.result["chart_pool_changes"] = pool_changes
        for pool, components in chart_pools.pod_templates_changed(pool_changes).items():
            self.warnings.append(
                "%s: the new chart renders another %s Pod template; the live pools keep theirs (its "
                "content, which may hold secrets, is never passed on) - set it with a pool's "
                "components.<component>.pod_template (tfops_pools) to roll it in the window"
                % (pool, " and ".join(components)))
        return held

    def _providers_held(self, manifest):
        """The pools a ProviderConfig change in ``manifest`` would start rolling at once."""
        live = pool_keeper.live_providers(self.kube)
        self._providers = pool_keeper.provider_config_changes(manifest, live)
        self._providers_before = pool_keeper.provider_hashes(live)
        held = pool_keeper.entries_to_hold(self.keeper.live, self._providers.values())
        self.held = held
        self.result["held_for_provider_configs"] = ["%s/%s" % (c, e) for c, e in held]
        return held

    def _after_providers_changed(self):
        """Return only once the operator has taken the new ProviderConfigs (see
        pool_keeper.wait_providers_processed); a warning if it has not within the deadline."""
        if not getattr(self, "_providers", None):
            return
        try:
            pool_keeper.wait_providers_processed(self.kube, sorted(self._providers),
                                                 self._providers_before, self.deadline)
        except WaitTimeout as exc:
            self.warnings.append("%s: the held pools may roll twice when the pools step resumes them"
                                 % exc.msg)

    def rolled_back(self, revision, expect=None):
        """Roll back to ``revision``; ``expect`` (from a bundle) is what that revision must hold."""
        params = self.params
        current, history = self._current()
        if current is None:
            raise ReleaseNotFound("release %s has no revision in namespace %s; nothing to "
                                  "roll back" % (params["name"], params["namespace"]))
        self.result["revision_before"] = current["revision"]
        self.result.update(before_versions(current))
        if expect is not None and revision not in [r["revision"] for r in history]:
            raise InvalidInput(
                "the snapshot's revision %s of release %s is no longer in its history (helm keeps "
                "the last 10 revisions unless --history-max says otherwise; oldest kept: %s); "
                "roll back to a newer snapshot or reinstall the snapshot's chart version with its "
                "values" % (revision, params["name"], min(r["revision"] for r in history)))
        target, _history = self.helm.release(params["name"], params["namespace"], revision)
        self.on_secret(secrets_in(target))
        if expect is not None:
            expect(target)
        keep = self._keeps_pools_of(target["manifest"])
        reasons = changes(current, target, self.exists, ignore_pools=keep)
        self.result.update(changed=bool(reasons), reasons=reasons, target_revision=revision,
                           chart=target["chart"], chart_version=target["chart_version"],
                           app_version=target["app_version"])
        if self.check_mode or self.diff_mode:
            self.result["diff"] = diff_of(current, target, "release %s" % params["name"],
                                          self.keeper.live if keep else None)
        rollback = ["rollback", params["name"], str(revision), "--namespace", params["namespace"]] + \
            self._flags(helmcli.ROLLBACK)
        if self.check_mode or not reasons:
            if reasons:
                self.result["command"] = self.helm.shown(rollback + write_args(
                    dict(params, atomic=False), self.helm.version, self.deadline.remaining()))
            self.result.update(status=current["status"], revision_after=current["revision"])
            return self.result
        blockers = rollback_blockers(current["manifest"], target["manifest"], self.exists)
        if blockers or current["status"] == "failed" or keep:
            self._rerender(revision, target, blockers, current["status"], keep)
        else:
            self.result["method"] = "rollback"
            seconds = self._seconds()
            full = rollback + write_args(dict(params, atomic=False), self.helm.version, seconds)
            self.result["command"] = self.helm.shown(full)
            self.helm.run(full, timeout=int(seconds) + 60)
        after, _history = self._current()
        self.result.update(status=after["status"], revision_after=after["revision"])
        return self.result

    def _keeps_pools_of(self, manifest):
        """Whether ``manifest`` renders a TensorFusionCluster that is live: then helm rollback, which
        cannot post-render, would put that revision's pools back and start rolling them at once."""
        if not self.keeper.enabled:
            return False
        self._keep_pools()
        return any(chart_pools.is_cluster(doc) and chart_pools.object_name(doc) in self.keeper.live
                   for doc in pool_keeper.documents(manifest))

    def _rerender(self, revision, target, blockers, current_status, keep=False):
        """helm rollback fails on an object that the target revision rendered and the current one
        did not (the chart renders it only while absent, through lookup, and keeps it): its
        three-way merge has no original for it. And from a failed revision (such as that failed
        rollback) its three-way merge starts from the failed revision's manifest, so changes that
        revision never made stay in the cluster. Re-render the target revision's stored chart with
        its values instead (helm upgrade merges from the last deployed revision), against the
        cluster as it is - what the rollback means."""
        params = self.params
        try:
            args = helmcli.stored_chart_upgrade(
                self.helm, self.kube, params["name"], params["namespace"], revision, None,
                "Rollback to %s (re-rendered by tensorfusion.ops)" % revision)
        except HelmError as exc:
            raise HelmError(
                "helm rollback to revision %s cannot work (%s) and %s; upgrade to that chart "
                "version with the revision's values instead" % (
                    revision, self._why(blockers, current_status), exc.msg))
        args += [a for a in self._flags(helmcli.UPGRADE) if a not in args]
        self.result["method"] = "upgrade-to-stored-chart"
        if blockers or current_status == "failed":
            self.warnings.append("helm rollback to revision %s cannot do it (%s); upgraded to revision "
                                 "%s's stored chart and values instead" % (
                                     revision, self._why(blockers, current_status), revision))
        if keep:
            # The revision's chart and values, rendered with the live pools kept: the pools go back
            # through the componentConfig restore (in the window, watched), not through helm.
            if self._providers_held(target["manifest"]):
                pool_keeper.hold(self.kube, self.held)
            self._keep_pools()
            args += self.keeper.flags()
        seconds = self._seconds()
        full = args + write_args(dict(params, atomic=False), self.helm.version, seconds)
        self.result["command"] = self.helm.shown(full)
        self.helm.run(full, timeout=int(seconds) + 60)
        if keep:
            self._after_providers_changed()

    @staticmethod
    def _why(blockers, current_status):
        if blockers:
            return "it would fail on %s, rendered by that revision, not by the current one, and " \
                "present in the cluster" % ", ".join("%s %s" % (k[1], k[3]) for k in blockers)
        return "the last revision is %s, and helm rollback would merge from its manifest" % current_status
