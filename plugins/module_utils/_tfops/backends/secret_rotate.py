# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""secret_rotate's body, from start to end in the product's order: create (or update in place), repoint,
roll, verify, and only then delete the old Secret. Any failure puts the references (or the old
content) back; the old Secret is never deleted before verification. Values stay in this process:
results carry Secret names, key names and content digests only."""

from __future__ import annotations

import base64
import time

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import live
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import plan as secret_plan
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import refs as secretrefs
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    InvalidInput,
    ReleaseNotFound,
    RotationFailed,
    TfopsError,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.restart import is_operator
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret.consumers import (
    PoolComponentConsumer,
    WorkloadConsumer,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret.consumers import census as consumer_census
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.decisions import secret_annotation
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.module import Run


# How long putting a consumer back may wait for it to be Ready again (the run's own deadline may
# be what just passed).
UNDO_WAIT_SECONDS = 300


def normalized_data(params):
    """The new ``data`` (base64, canonical) from the task's data and string_data."""
    data = dict((k, base64.b64encode(base64.b64decode(str(v))).decode())
                for k, v in (params.get("data") or {}).items())
    return secretrefs.encoded_data(data, params.get("string_data"))


def _message(exc):
    """A typed error's message; anything else (a bug, an untyped client error) by its type too."""
    return exc.msg if isinstance(exc, TfopsError) else "%s: %s" % (type(exc).__name__, exc)


def secret_forms(params):
    """Every form a new value can take in output: as given, encoded and decoded."""
    forms = []
    string_data, data = params.get("string_data"), params.get("data")
    # Before validation: content that is not a mapping is refused, and hidden as it is.
    for value in [v for v in (string_data, data) if v is not None and not isinstance(v, dict)]:
        forms.append(str(value))
    for value in (string_data if isinstance(string_data, dict) else {}).values():
        forms += [str(value), base64.b64encode(str(value).encode()).decode()]
    for value in (data if isinstance(data, dict) else {}).values():
        forms.append(str(value))
        try:
            forms.append(base64.b64decode(str(value)).decode())
        except (ValueError, UnicodeDecodeError):
            pass
    return forms


def run(ctx):
    """secret_rotate's body (core/module.py's contract)."""
    ctx.hide(secret_forms(ctx.params))
    secret_plan.validate(ctx.params)
    helm = None
    with ctx.connected() as kube:
        kube.require_namespace(ctx.params["namespace"])
        try:
            if any(c["kind"] == "HelmRelease" for c in ctx.params.get("consumers") or []):
                from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.cli import open_helm
                helm = open_helm(ctx)
            return RotateTask(ctx, ctx.params, helm).run()
        finally:
            if helm is not None:
                helm.close()


class _Stuck(Exception):
    """A put-back that was written but whose rollout cannot finish (internal to RotateTask)."""

    def __init__(self, consumer, error, rotated):
        super().__init__(_message(error))
        self.consumer, self.error, self.rotated = consumer, error, rotated


def _repoint_all(consumer, olds, new):
    """The template change of a versioned rotation: every old name repointed to ``new``."""
    changes = [consumer.rotation_change(None, old, new) for old in olds]

    def change(template):
        for one in changes:
            template = one(template)
        return template
    return change


class RotateTask(Run):
    """``helm``: the helm CLI, only for HelmRelease consumers."""

    def __init__(self, ctx, params, helm=None):
        super().__init__(ctx, params)
        self.helm = helm
        self.namespace = params["namespace"]
        self.secrets = self.kube.resource("Secret", api_version="v1")
        self.steps = []
        self.undo = []  # callables that put things back, newest last
        self.verified = False  # the consumers run on the new content: nothing is undone after
        self.rotated = None  # in place: the Secret as updated (its version)

    # ---- steps ------------------------------------------------------------------------------
    def step(self, name, fn, consumer=None, detail=None, undo=None):
        """Run one recorded step; a failure becomes RotationFailed after undoing what was done.
        ``undo`` (label, fn) puts the step's change back: kept when the step succeeds, and when it
        fails after its consumer wrote (a pool component's write, then its wait)."""
        started = time.monotonic()
        entry = {"step": name, "status": "ok"}
        if consumer is not None:
            entry["consumer"] = consumer.label
        if detail:
            entry["detail"] = detail
        self.steps.append(entry)
        try:
            value = fn()
        except Exception as exc:  # pylint: disable=broad-except  # any failure puts back what was done
            message = _message(exc)
            entry.update(status="failed", error=message)
            if consumer is not None and getattr(consumer, "wrote", False):
                entry["changed"] = True  # written before the failure: modified, and put back
                if undo is not None:
                    self.undo.append(undo)
            restored = self.rollback()
            changes = dict(secret_plan.what_changed(self.steps), stuck=secret_plan.stuck_lines(self.steps))
            raise RotationFailed(
                "secret_rotate failed at step %s%s: %s; %s" % (
                    name, " for %s" % consumer.label if consumer is not None else "", message,
                    secret_plan.outcome(restored, changes, self.verified)),
                failed_step=name, failed_consumer=consumer.label if consumer is not None else None,
                steps=self.steps, restored=restored, **changes)
        if undo is not None:
            self.undo.append(undo)
        if name in ("repoint", "restart"):
            entry["changed"] = bool(value)  # False: it already pointed there, or ran on this version
        entry["seconds"] = round(time.monotonic() - started, 3)
        return value

    def rollback(self):
        """Run the undo entries, newest first (an entry may add entries, run next); a failed one
        does not stop the others. A put-back that was written but cannot finish its rollout says
        what is stuck and what to do."""
        done = []
        while self.undo:
            label, fn = self.undo.pop()
            try:
                fn()
                done.append(label)
                self.steps.append({"step": "restore", "status": "ok", "detail": label})
            except _Stuck as stuck:
                entry = {"step": "restore", "status": "failed", "detail": label,
                         "error": _message(stuck.error), "stuck": self._stuck(stuck)}
                done.append("%s NOT FINISHED (written, but %s)" % (label, _message(stuck.error)))
                self.steps.append(entry)
            except Exception as exc:  # pylint: disable=broad-except  # the other undo steps still run
                done.append("%s FAILED (%s)" % (label, _message(exc)))
                self.steps.append({"step": "restore", "status": "failed", "detail": label,
                                   "error": _message(exc)})
        return done

    def _stuck(self, stuck):
        """What a stuck put-back leaves: its Pods that do not start, its Ready Pods still on the
        rotated content (read now, best effort), and what to do."""
        consumer, error = stuck.consumer, stuck.error
        details = error.details if isinstance(error, TfopsError) else {}
        reasons = list(details.get("pods_not_ready") or
                       (details.get("diagnostics") or {}).get("hypervisor_pods_not_ready") or [])
        rotated = consumer.own_target(stuck.rotated)
        on_rotated = []
        try:
            not_ready, on_rotated = consumer_census(consumer.pods(stuck.rotated), rotated)
            reasons = reasons or not_ready
        except Exception:  # pylint: disable=broad-except  # a report of what is stuck is best effort
            pass
        what = "Secret %s" % rotated[1] if rotated[0] == "name" else \
            "Secret %s as rotated" % secret_plan.target_secret(rotated)
        return secret_plan.stuck_report(consumer.label, _message(error), reasons, on_rotated, what,
                                        pool=isinstance(consumer, PoolComponentConsumer))

    # ---- reading ----------------------------------------------------------------------------
    def read_secret(self, name):
        """The Secret with its data (kept in this process only), or None."""
        try:
            return self.kube.call("get", "secrets/%s" % name, self.secrets.get, name=name,
                                  namespace=self.namespace).to_dict()
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def family(self):
        """Every version of the Secret (metadata only: no other Secret's data is fetched)."""
        found = list_pages(self.kube, self.secrets, namespace=self.namespace, metadata_only=True,
                           label_selector="%s=%s" % (secret_plan.FAMILY_LABEL,
                                                     secret_plan.family_label(self.params["name"])))
        members = list(found)
        base = self.read_secret(self.params["name"])
        if base is not None:
            members.append({"metadata": base["metadata"]})
        return secret_plan.family_members(members, self.params["name"])

    def consumers(self, names):
        """The task's consumers, or those found referencing any of ``names``."""
        params = self.params
        found = []
        for spec in params.get("consumers") or []:
            if spec["kind"] == "TensorFusionCluster":
                found.append(PoolComponentConsumer(self.ctx, spec.get("name"), spec["pool"],
                                                   spec["component"], params))
            elif spec["kind"] == "HelmRelease":
                from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret.helm_values import (
                    HelmValuesConsumer,
                )
                found.append(HelmValuesConsumer(self.kube, self.helm, spec["name"],
                                                spec.get("namespace") or self.namespace, spec["values_key"]))
            else:
                found.append(WorkloadConsumer(self.kube, spec["kind"], spec["name"],
                                              spec.get("namespace") or self.namespace))
        if params.get("discover") or (params.get("discover") is None and not found):
            known = set(c.label for c in found)
            found += [c for c in self.discover(names) if c.label not in known]
        return found

    def discover(self, names):
        found = []
        operator_here = False
        for kind in secret_plan.WORKLOAD_KINDS:
            api = self.kube.resource(kind, api_version="apps/v1")
            for obj in list_pages(self.kube, api, namespace=self.namespace):
                spec = obj["spec"]["template"].get("spec")
                operator_here = operator_here or is_operator(obj)
                if any(secretrefs.references(spec, n) for n in names):
                    found.append(WorkloadConsumer(self.kube, kind, obj["metadata"]["name"], self.namespace))
        if not operator_here:
            # Component Pods run in the operator's namespace (its release's), and only there.
            return found
        try:
            tfcs = self.kube.resource("TensorFusionCluster", group=TF_GROUP)
        except ApiError:
            return found
        for tfc in list_pages(self.kube, tfcs):
            for entry in tfc["spec"].get("gpuPools") or []:
                for comp in secret_plan.POOL_COMPONENTS:
                    config = ((entry.get("specTemplate") or {}).get("componentConfig") or {}).get(comp) or {}
                    spec = ((config.get("podTemplate") or {}).get("template") or {}).get("spec")
                    if any(secretrefs.references(spec, n) for n in names):
                        found.append(PoolComponentConsumer(self.ctx, tfc["metadata"]["name"],
                                                           entry["name"], comp, self.params))
        return found

    def still_used(self, names):
        """Which of ``names`` a live Pod, a workload template or a pool component template in
        the namespace still references (a consumer the task was not told about)."""
        pods = self.kube.resource("Pod", api_version="v1")
        used = set()
        for pod in list_pages(self.kube, pods, namespace=self.namespace):
            if not live(pod):
                continue
            used.update(n for n in names if secretrefs.references(pod.get("spec"), n))
        used.update(n for n in names if n not in used and self.discover([n]))
        return used

    # ---- writing ----------------------------------------------------------------------------
    def create_version(self, name, data, secret_type):
        labels, annotations = secret_plan.version_metadata(self.params["name"], data, secret_type)
        body = {"apiVersion": "v1", "kind": "Secret", "type": secret_type, "immutable": True,
                "metadata": {"name": name, "namespace": self.namespace, "labels": labels,
                             "annotations": annotations}, "data": data}
        self.kube.call("create", "secrets/%s" % name, self.secrets.create, body=body,
                       namespace=self.namespace)

    def delete_secret(self, name):
        self.kube.call("delete", "secrets/%s" % name, self.secrets.delete, name=name,
                       namespace=self.namespace)

    def prune(self, current):
        """Delete previous versions (after verification), keeping the newest ``keep``."""
        members = self.family()
        candidates = secret_plan.previous_to_delete(members, current, self.params.get("keep") or 0, set())
        used = self.still_used(candidates) if candidates else set()
        if used:
            self.warnings.append("kept %s: still referenced by a running Pod" % ", ".join(sorted(used)))
        doomed = [n for n in candidates if n not in used]
        if not self.check_mode:
            for name in doomed:
                self.step("delete_old", lambda n=name: self.delete_secret(n), detail=name)
        return doomed

    # ---- the task ---------------------------------------------------------------------------
    def run(self):
        params = self.params
        data = normalized_data(params)
        current = self.read_secret(params["name"])
        secret_type = params.get("type") or (current or {}).get("type") or "Opaque"
        if params["strategy"] == "versioned":
            result = self.versioned(data, secret_type, current)
        else:
            result = self.in_place(data, secret_type, current)
        result.update(strategy=params["strategy"], namespace=self.namespace, steps=self.steps)
        return result

    @staticmethod
    def _require(consumers):
        """Every consumer exists (one read each), before anything is written: a missing one found
        only at its restart would fail after the Secret had changed."""
        for consumer in consumers:
            try:
                consumer.referenced([])
            except (InvalidInput, ReleaseNotFound) as exc:
                raise InvalidInput("consumer %s: %s; nothing was written" % (consumer.label, exc.msg))

    def _preflight(self, consumers, change_of=None):
        """``change_of(consumer)``: the template change the rotation makes there (its preflight
        refuses one the operator would not roll)."""
        for consumer in consumers:
            if isinstance(consumer, PoolComponentConsumer):
                consumer.preflight(change_of(consumer) if change_of else None)

    def versioned(self, data, secret_type, current):
        new_name = secretrefs.versioned_name(self.params["name"], data, secret_type)
        members = self.family()
        names = [m["metadata"]["name"] for m in members if m["metadata"]["name"] != new_name]
        existing = next((m for m in members if m["metadata"]["name"] == new_name), None)
        if existing is not None and (existing["metadata"].get("annotations") or {}).get(
                secret_plan.DIGEST_ANNOTATION) != secretrefs.content_digest(data, secret_type):
            raise InvalidInput("Secret %s already exists and is not this content's version; "
                               "remove or rename it" % new_name)
        consumers = self.consumers(names + [new_name])
        self._require(consumers)
        uses = [(c, c.referenced(names + [new_name])) for c in consumers]  # one read each
        moves = [(c, [n for n in used if n != new_name]) for c, used in uses]
        moves = [(c, olds) for c, olds in moves if olds]
        unrolled = [c for c, used in uses if new_name not in used]
        olds_of = dict((id(c), olds) for c, olds in moves)
        self._preflight([c for c, _olds in moves], lambda c: _repoint_all(c, olds_of[id(c)], new_name))
        changed = existing is None or bool(moves)
        result = {"secret": secret_plan.content_view(new_name, data, secret_type),
                  "previous": sorted(set(n for _c, olds in moves for n in olds)),
                  "consumers": [dict(c.describe(), repointed=any(c is m for m, _o in moves))
                                for c in consumers],
                  "diff": {"before": {"references": dict((c.label, olds) for c, olds in moves)},
                           "after": {"references": dict((c.label, [new_name]) for c, _o in moves)}}}
        if unrolled and not moves:
            self.warnings.append("not referencing %s and nothing to repoint: %s" % (
                new_name, ", ".join(c.label for c in unrolled)))
        if self.check_mode:
            result.update(changed=changed, deleted=self._would_delete(new_name))
            return result
        if existing is None:
            # Kept on failure too: harmless (immutable, unreferenced) and reused by the next run.
            self.step("create", lambda: self.create_version(new_name, data, secret_type), detail=new_name)
        for consumer, olds in moves:
            for old in olds:
                self.step("repoint", lambda c=consumer, o=old: c.repoint(o, new_name, self._wait_deadline(c)),
                          consumer=consumer, detail="%s -> %s" % (old, new_name),
                          undo=("%s points at %s again" % (consumer.label, old),
                                lambda c=consumer, o=old: self._put_back(
                                    c, lambda d: c.repoint(new_name, o, d), ("name", o), ("name", new_name))))
        self._roll_and_verify([c for c in consumers if c.referenced([new_name])], ("name", new_name))
        self.undo, self.verified = [], True
        deleted = self.prune(new_name) if self.params.get("delete_old") else []
        result.update(changed=changed or bool(deleted), deleted=deleted)
        return result

    def _would_delete(self, current):
        if not self.params.get("delete_old"):
            return []
        return secret_plan.previous_to_delete(self.family(), current, self.params.get("keep") or 0, set())

    def _wait_deadline(self, consumer):
        """Pool components wait inside their write (the stale-status guard needs it)."""
        return self.deadline if self.params["wait"] and isinstance(consumer, PoolComponentConsumer) else None

    def _roll_and_verify(self, consumers, target):
        if not self.params["wait"]:
            return
        for consumer in consumers:
            self.step("roll", lambda c=consumer: c.wait(self.deadline, target), consumer=consumer)
        for consumer in consumers:
            self.step("verify", lambda c=consumer: c.verify(target), consumer=consumer)

    def in_place(self, data, secret_type, current):
        name = self.params["name"]
        secret_plan.check_in_place(current, name, self.namespace, self.params.get("type"))
        old_data = dict(current.get("data") or {})
        old_type = current.get("type") or "Opaque"
        same = old_data == data and old_type == secret_type
        consumers = self.consumers([name])
        self._require(consumers)
        self._require_references(consumers, name)
        key = secret_annotation(current)[0]
        self._preflight(consumers, lambda c: c.rotation_change(key) if not same else None)
        backup = secretrefs.versioned_name(name, old_data, old_type)
        result = {"secret": secret_plan.content_view(name, data, secret_type),
                  "previous": [] if same else [backup],
                  "consumers": [c.describe() for c in consumers],
                  "diff": {"before": {"secret": secret_plan.content_view(name, old_data, old_type)},
                           "after": {"secret": secret_plan.content_view(name, data, secret_type)}}}
        if self.check_mode:
            key, version = secret_annotation(current)
            stale = [c.label for c in consumers if not same or not self._marked(c, name, key, version)]
            result.update(changed=not same or bool(stale), restarts=stale,
                          deleted=self._would_delete(name))
            return result
        meta = current
        if not same:
            if self.read_secret(backup) is None:
                self.step("backup", lambda: self.create_version(backup, old_data, old_type), detail=backup)
            meta = self.step("update", lambda: self._replace(current, data, secret_type), detail=name,
                             undo=("Secret %s has its previous content again (copy in %s)" % (name, backup),
                                   lambda: self._restore_content(old_data, old_type, consumers)))
            self.rotated = meta
        marked = []
        for consumer in consumers:
            if self.step("restart", lambda c=consumer: c.mark(meta, self._wait_deadline(c)), consumer=consumer):
                marked.append(consumer.label)
        key, version = secret_annotation(meta)
        # Each Pod must reference this Secret (what it reads) and have started for this version.
        self._roll_and_verify(consumers, ("annotation", key, version, name))
        self.undo, self.verified = [], True
        deleted = self.prune(name) if self.params.get("delete_old") else []
        result.update(changed=not same or bool(marked) or bool(deleted), restarts=marked, deleted=deleted)
        return result

    @staticmethod
    def _marked(consumer, name, key, version):
        if hasattr(consumer, "workloads"):  # a Helm release: its workloads that use the Secret
            return all(RotateTask._marked(w, name, key, version) for w in consumer.workloads(name))
        if isinstance(consumer, WorkloadConsumer):
            from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.decisions import (
                template_annotations,
            )
            return template_annotations(consumer.read()).get(key) == version
        return consumer.marked(key, version)

    def _replace(self, current, data, secret_type):
        body = {"apiVersion": "v1", "kind": "Secret", "type": secret_type, "data": data,
                "metadata": dict((k, v) for k, v in current["metadata"].items()
                                 if k not in ("managedFields",))}
        return self.kube.call("replace", "secrets/%s" % current["metadata"]["name"], self.secrets.replace,
                              body=body, name=current["metadata"]["name"],
                              namespace=self.namespace).to_dict()

    def _restore_content(self, old_data, old_type, consumers):
        """The previous content back in the Secret; then (run next by rollback, one entry each)
        every consumer restarted on it: Pods started on the rotated content start on the previous
        one."""
        name = self.params["name"]
        latest = self.read_secret(name)
        meta = self._replace(latest, old_data, old_type)
        key, version = secret_annotation(meta)
        rotated = ("annotation", key, secret_annotation(self.rotated)[1], name)
        for consumer in reversed(consumers):  # run in the consumers' order: the newest entry goes first
            self.undo.append(("%s restarted on the previous content" % consumer.label,
                              lambda c=consumer: self._put_back(
                                  c, lambda d: c.mark(meta, d), ("annotation", key, version, name), rotated)))

    def _put_back(self, consumer, write, target, rotated):
        """Undo one consumer's change and, when the task waits, wait until it runs as before
        (pool components wait inside their write). Written but not finished: _Stuck, with
        ``rotated`` (the target it is put back from)."""
        deadline = Deadline(timeout=UNDO_WAIT_SECONDS) if self.params["wait"] else None
        waits_in_write = isinstance(consumer, PoolComponentConsumer)
        try:
            write(deadline if waits_in_write else None)
        except Exception as exc:  # pylint: disable=broad-except  # typed below, raised as it came otherwise
            if waits_in_write and consumer.wrote:
                raise _Stuck(consumer, exc, rotated)
            raise
        if deadline is not None and not waits_in_write:
            try:
                consumer.wait(deadline, target)
            except Exception as exc:  # pylint: disable=broad-except
                raise _Stuck(consumer, exc, rotated)

    def _require_references(self, consumers, name):
        """In place, a consumer whose Pod template does not reference the Secret would be
        restarted without ever reading the new content (one that points at a versioned copy of it,
        say): refused before anything is written."""
        for consumer in consumers:
            if consumer.referenced([name]):
                continue
            copies = consumer.referenced(sorted(m["metadata"]["name"] for m in self.family()
                                                if m["metadata"]["name"] != name))
            raise InvalidInput(
                "consumer %s does not reference Secret %s%s: an in-place rotation would restart it "
                "without it ever reading the new content; nothing was written" % (
                    consumer.label, name,
                    " (it references %s, a version of it: rotate with strategy versioned, or point it "
                    "at %s first)" % (", ".join(copies), name) if copies else ""))
