# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""helm_release's body: connect (the module's one connection, ``ctx.connected()``), upgrade or
roll back through the helm CLI (ReleaseTask, helm/release.py decides), restore a snapshot's
component config (gpupool's restore), register every secret-looking string with the module so
that Ansible masks it anywhere in the output."""

from __future__ import annotations

import hashlib
import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.values import describe_changes
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import plans
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    HelmError,
    InvalidInput,
    PendingRelease,
    ReleaseNotFound,
    UnusableBundle,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import chart_pools
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import pool_keeper
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import isolation_policy
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.cli import on_secret, open_helm
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.release_changes import (
    changes,
    diff_of,
    image_changes,
    manifest_changes,
    rollback_blockers,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.release import (
    before_versions,
    check_plan_identity,
    effective_flags,
    params_secrets,
    secrets_in,
    upgrade_args,
    validate,
    write_args,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.module import Run

FIELD_MANAGER = "tensorfusion.ops"


def apply_crds(kube, helm, params, check_mode, flags=None):
    """Server-side apply of the chart's CRDs (helm show crds): {crd name: changed}. ``flags``:
    the task's helm flags (those of chart downloads, such as --ca-file, apply here too)."""
    args = ["show", "crds", params["chart_ref"]]
    if params.get("chart_repo_url"):
        args += ["--repo", params["chart_repo_url"]]
    if params.get("chart_version"):
        args += ["--version", params["chart_version"]]
    args += helm.flag_args(flags, helmcli.SHOW)
    docs = [d for d in redact.parse_manifest(helm.run(args, kube=False))
            if d.get("kind") == "CustomResourceDefinition"]
    api = kube.resource("CustomResourceDefinition", group="apiextensions.k8s.io")
    applied = {}
    for doc in docs:
        name = doc["metadata"]["name"]
        desc = "customresourcedefinitions/%s" % name
        try:
            before = kube.call("get", desc, api.get, name=name).to_dict()
        except ApiError as exc:
            if exc.status != 404:
                raise
            before = None
        kwargs = {"field_manager": FIELD_MANAGER, "force_conflicts": True}
        if check_mode:
            kwargs["dry_run"] = "All"
        after = kube.call("apply", desc, kube.dynamic.server_side_apply, api, body=doc, name=name,
                          **kwargs).to_dict()
        applied[name] = before is None or before.get("spec") != after.get("spec") or \
            before["metadata"].get("labels") != after["metadata"].get("labels") or \
            before["metadata"].get("annotations") != after["metadata"].get("annotations")
    return applied


def _holds(recorded, legacy, text, key):
    """Whether ``text`` is what the bundle recorded: its keyed fingerprint, or the bare sha256 hex
    of a bundle taken before keyed fingerprints."""
    if recorded:
        return signing.matches(recorded, text, key)
    return hashlib.sha256(text.encode("utf-8")).hexdigest() == legacy


def _snapshot_expectation(meta, key):
    def expect(target):
        problems = []
        if not _holds(meta.get("manifest_fingerprint"), meta.get("manifest_sha256"), target["manifest"] or "", key):
            problems.append("manifest")
        if not _holds(meta.get("values_fingerprint"), meta.get("values_sha256"),
                      snapshots.dumps(target["values"]), key):
            problems.append("values")
        if problems:
            raise refused(
                "revision %s of release %s no longer holds the %s the snapshot recorded (the history "
                "was rewritten); refusing to roll back to it" % (
                    meta["revision"], meta["release"], " and ".join(problems)))
    return expect


def refused(msg, **details):
    """The typed refusal of a bundle before any write: ``refused`` and ``changed=false`` in the
    failed result are what the runbook's report reads (report.rollback_refused)."""
    return UnusableBundle(msg, refused=True, changed=False, **details)


def load_snapshot(kube, location, name, namespace, signing_key=None, allow_unsigned=False):
    """(meta, description, saved clusters, key) of a bundle (a folder or a secret:// reference)
    that verifies against this cluster: checksums, the cluster's identity, and its signature
    against the key of the release's namespace (or ``signing_key``). Any failure refuses the
    bundle before anything is written."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.locations import open_bundle
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.capture import (
        cluster_identity,
        read_key,
    )
    uid = cluster_identity(kube)[0]
    try:
        key = read_key(kube, namespace, signing_key)
    except InvalidInput as exc:  # a key Secret that holds no usable key, a signing_key too short
        raise refused("snapshot %s cannot be verified, nothing restored: %s" % (location, exc.msg))
    try:
        location, store, contents, meta, problems, signature = open_bundle(
            kube, location, cluster_uid=uid, key=key, allow_unsigned=allow_unsigned)
    except InvalidInput as exc:  # a malformed secret:// reference
        raise refused("snapshot %s cannot be read, nothing restored: %s" % (location, exc.msg))
    description = snapshots.describe(location, meta, problems, signature, store)
    if contents is None and signature is None:
        raise refused("snapshot %s does not exist (%s), nothing restored" % (location, "; ".join(problems)))
    if problems:
        raise refused("snapshot %s is unusable, nothing restored: %s" % (
            location, "; ".join(problems)), snapshot=description)
    if (meta["release"], meta["namespace"]) != (name, namespace):
        raise refused("snapshot %s is of release %s in namespace %s, not %s in %s; nothing restored" % (
            location, meta["release"], meta["namespace"], name, namespace), snapshot=description)
    clusters = json.loads(contents["tensorfusionclusters.json"].decode("utf-8"))
    return meta, description, clusters, key


def run(ctx):
    """helm_release's body (core/module.py's contract). The module's one connection (fenced by a
    runbook's lock: helm's own writes cannot be fenced one by one, so a run that lost its lock
    starts no helm) carries ``changed``, ``api_server`` and the outages ridden out to the result."""
    params = dict(ctx.params)
    deadline = ctx.deadline
    validate(params)
    if deadline.expired():
        raise InvalidInput("the %s has already passed" % deadline.reason)
    with open_helm(ctx) as helm, ctx.connected(deadline) as kube:
        task = ReleaseTask(ctx, params, helm)
        # Every flag this helm cannot take is refused here, before anything is written.
        commands = (helmcli.UPGRADE, helmcli.ROLLBACK) + \
            ((helmcli.SHOW,) if params["state"] == "present" and params["apply_crds"] else ())
        helm.check_flags(task.flags, commands)
        if params["state"] == "present":
            crds = apply_crds(kube, helm, params, ctx.check_mode, task.flags) \
                if params["apply_crds"] else {}
            result = task.present()
            result["crds"] = crds
            result["changed"] = result["changed"] or any(crds.values())
        elif params.get("revision") is not None:
            result = task.rolled_back(params["revision"])
        else:
            result = _rollback_to_snapshot(kube, ctx, task, params, deadline)
    return result


def _rollback_to_snapshot(kube, ctx, task, params, deadline):
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.restore import (
        ComponentConfigRestore,
    )
    meta, description, clusters, key = load_snapshot(
        kube, params["snapshot"], params["name"], params["namespace"], params.get("signing_key"),
        params.get("allow_unsigned"))
    # The flags the upgrade after this snapshot used, where the task sets none of its own.
    task.helm.check_flags(task.use_flags(meta.get("helm_flags")))
    restore = None
    if params["restore_component_config"]:
        restore = ComponentConfigRestore(kube, clusters, ctx.check_mode, params["wait"],
                                         deadline, params["stall_timeout"], params["namespace"],
                                         key=key)
        restore.prepare()
    result = task.rolled_back(meta["revision"], _snapshot_expectation(meta, key))
    result["snapshot"] = description
    result["component_config"] = []
    if task.held:
        # The chart step held these pools' hypervisors for a ProviderConfig change: the restore's
        # write resumes them, one campaign each, watched like the restored componentConfig.
        if restore is None:
            restore = ComponentConfigRestore(kube, [], ctx.check_mode, params["wait"],
                                             deadline, params["stall_timeout"], params["namespace"])
        restore.resume_held(task.held)
    if restore is not None:
        items = restore.finish()
        task.warnings.extend(restore.warnings)
        result["component_config"] = [dict((k, v) for k, v in i.items() if k != "diff")
                                      for i in items]
        if items:
            result["changed"] = True
            if "diff" in result:
                result["diff"].extend(i["diff"] for i in items)
    return result


class ReleaseTask(Run):
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
        # Under a runbook's lock, helm's process is named in the Lease while it writes: a run
        # interrupted meanwhile keeps its lock until helm is done (maintenance/warden.py).
        fence = getattr(self.kube, "fence", None)
        what = "helm %s of release %s/%s" % (args[0], self.params["namespace"], self.params["name"])
        if fence is not None:
            fence.check(what)
        try:
            return self.helm.run(full, timeout=int(seconds) + 60,
                                 started=(lambda pid: fence.writing(pid, what)) if fence is not None else None)
        finally:
            # helm writes with its own client: a revision is recorded (deployed, or failed and
            # perhaps rolled back), so the module changed something whatever happens next.
            if self.kube is not None:
                self.kube.written = True
            if fence is not None:
                fence.writing(None)

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
        switch = isolation_policy.switch_warning(pool_keeper.documents((current or {}).get("manifest")),
                                                 pool_keeper.documents(desired["manifest"]))
        if switch:
            self.warnings.append(switch)
        if reasons and not self.keeper.enabled:  # an upgrade that applies the chart's pools as rendered
            self._chart_resets(desired["manifest"], (current or {}).get("manifest"))
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

    def _chart_resets(self, manifest, previous):
        """keep_pools off: what the chart sets back on the live pools (``pools_reset``), each pool
        in a warning (the report carries it), field by field, from and to."""
        resets = pool_keeper.chart_resets(pool_keeper.live_clusters(self.kube), manifest or "", previous)
        self.result["pools_reset"] = resets
        for item in resets:
            self.warnings.append("keep_pools is off: the chart %s pool %s of TensorFusionCluster %s back to "
                                 "its rendering: %s" % ("would set" if self.check_mode else "sets", item["pool"],
                                                        item["cluster"], describe_changes(item["changes"])))

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
        # A release left pending-* by a writer that died or was cut off (helm's own record of its
        # last deployed revision; refused unless recover_pending says so): back there first.
        if self._handle_pending(history) and not self.check_mode:
            current, history = self._current()
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
