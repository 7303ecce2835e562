# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bodies of helm_release, helm_snapshot and helm_snapshot_info: connect (the module's one
connection, ``ctx.connected()``), run, register every secret-looking string with the module so
that Ansible masks it anywhere in the output."""

from __future__ import annotations

import hashlib
import json

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import redact
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import signing
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import bundle as snapshots
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.auth import (
    build_configuration,
    resolve_auth,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    InvalidInput,
    UnusableBundle,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.release import (
    ReleaseTask,
    on_secret,
    validate,
)

FIELD_MANAGER = "tensorfusion.ops"


def open_helm(ctx):
    """The helm CLI for the module's auth options and binary_path (its own kubeconfig, from the
    same options as the module's connection; the credentials in it are masked)."""
    auth = resolve_auth(ctx.params)
    cfg = build_configuration(auth)
    kubeconfig = helmcli.kubeconfig_from_configuration(cfg, auth.get("impersonate_user"),
                                                       auth.get("impersonate_groups"))
    on_secret(ctx)([u.get(k) for u in [kubeconfig["users"][0]["user"]]
                    for k in ("token", "client-key-data", "password")])
    return helmcli.Helm(helmcli.find_binary(ctx.params.get("binary_path")), kubeconfig=kubeconfig)


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
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.snapshot_runs import open_bundle
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


def run_release(ctx):
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
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.restore import (
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
