# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The consumers of a Secret that secret_rotate moves to new content: workloads, a GPU pool
component's podTemplate in a TensorFusionCluster, a Helm release's values key. Each one can say
what it references, be repointed (versioned) or marked for a restart (in place), be waited on,
be verified on its Pods, and be put back."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.predicates import live, live_only, pod_ready
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import optimistic
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import plan as secret_plan
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import refs as secretrefs
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads import decisions
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import Deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    TfopsError,
    VerifyFailed,
    WaitTimeout,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import (
    ClusterEditor,
    PoolObserver,
    pool_entry_transform,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads.restart import Restarter
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.waiting import ObjectWatcher

POD_TEMPLATE_FIELD = {"hypervisor": "podTemplate", "worker": "podTemplate"}
# The container a component's template gets when it names none (the chart's names).
DEFAULT_CONTAINER = {"hypervisor": "tensor-fusion-hypervisor", "worker": "tensor-fusion-worker"}


def on_target(pod, target):
    """Whether a Pod started on ``target`` (see secret_plan.target_secret): references the
    Secret (versioned), or started for the Secret's version (in place: the restart's annotation,
    or on a GPU pool component the version in its containers' environment)."""
    spec = pod.get("spec") or {}
    if target[0] == "name":
        return bool(secretrefs.references(spec, target[1]))
    if target[0] == "annotation":
        return (pod["metadata"].get("annotations") or {}).get(target[1]) == target[2]
    return all({"name": target[1], "value": target[2]} in (c.get("env") or [])
               for c in spec.get("containers") or [])


# How long a pool component's verify waits for its Pods to be on the new Secret and Ready.
VERIFY_SETTLE_SECONDS = 60


def pods_off_target(pods, target):
    """Live Pods that do not run on ``target``: ("name", "why") pairs. Each Pod must reference the
    target's Secret (env valueFrom, envFrom, a volume, a projected volume, imagePullSecrets: what
    it reads, not a mark on it), have started for its version (in place), and be Ready."""
    wrong = []
    secret = secret_plan.target_secret(target)
    for pod in pods:
        if not live(pod):
            continue
        name, spec = pod["metadata"]["name"], pod.get("spec") or {}
        if not secretrefs.references(spec, secret):
            others = secretrefs.secret_names(spec)
            wrong.append((name, "does not reference Secret %s (%s)" % (
                secret, "it references %s" % ", ".join(others[:5]) if others else "it references no Secret")))
        elif not on_target(pod, target):
            wrong.append((name, "started before the Secret was updated"))
        elif not pod_ready(pod):
            wrong.append((name, "not Ready"))
    return wrong


def census(pods, rotated):
    """(Pods that are not Ready, Ready Pods still on the ``rotated`` target) among the live
    ``pods``: what a put-back whose rollout cannot finish leaves."""
    alive = live_only(pods)
    not_ready = sorted(p["metadata"]["name"] for p in alive if not pod_ready(p))
    on_rotated = sorted(p["metadata"]["name"] for p in alive if pod_ready(p) and on_target(p, rotated))
    return not_ready, on_rotated


class WorkloadConsumer:
    # A consumer's write is one request: when it fails, nothing was written (see PoolComponentConsumer).
    wrote = False

    def __init__(self, kube, kind, name, namespace):
        self.kube = kube
        self.kind, self.name, self.namespace = kind, name, namespace
        self.restarter = Restarter(kube, kind)
        self.label = "%s %s/%s" % (kind, namespace, name)

    @staticmethod
    def own_target(target):
        return target

    def pods(self, _target=None):
        return self.restarter.pods_of(self.read())

    def describe(self):
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name}

    def read(self):
        return self.restarter.find(self.namespace, self.name)[0]

    def referenced(self, names):
        """Which of ``names`` the Pod template uses, from one read."""
        spec = self.read()["spec"]["template"].get("spec")
        return [n for n in names if secretrefs.references(spec, n)]

    def repoint(self, old, new, _deadline=None):
        """Point the Pod template at ``new``; the workload controller rolls it. True if written."""
        def change(obj):
            spec = obj["spec"]["template"].get("spec") or {}
            if not secretrefs.references(spec, old):
                return None
            obj["spec"]["template"]["spec"] = secretrefs.repoint(spec, old, new)
            return obj
        before = self.referenced([old])
        optimistic.update(self.kube, self.restarter.api, change, self.name, self.namespace)
        return bool(before)

    def mark(self, secret_meta, _deadline=None):
        """Restart for this version of the Secret (in place), unless already done. True if so."""
        return self.restarter.restart(self.read(), False, False, None, secret=secret_meta)["restarted"]

    def wait(self, deadline, _target):
        self.restarter.wait(self.read(), deadline)

    def verify(self, target):
        wrong = pods_off_target(self.pods(), target)
        if wrong:
            raise VerifyFailed("%s: %s" % (self.label, "; ".join("%s %s" % w for w in wrong[:10])),
                               consumer=self.label)


class PoolComponentConsumer:
    """A pool component's podTemplate in the TensorFusionCluster; the operator rolls its Pods
    (waited on as gpupool_rollout waits), or, when its autoUpdate is off and the task allows it,
    the stale Pods are deleted and the operator recreates them from the current spec."""

    def __init__(self, ctx, cluster, pool, component, params):
        self.ctx = ctx  # the rotation's: its roll runs in a child of it (ctx.child())
        self.kube = ctx.kube
        self.editor = ClusterEditor(self.kube, cluster)
        self.pool, self.component, self.params = pool, component, params
        self.label = "TensorFusionCluster %s pool %s %s" % (self.editor.name, pool, component)
        # Whether the last repoint or mark wrote before it failed (its write and its wait are
        # one call): what it changed must be put back and reported.
        self.wrote = False

    def describe(self):
        return {"kind": "TensorFusionCluster", "name": self.editor.name, "pool": self.pool,
                "component": self.component}

    def _entry(self, tfc=None):
        tfc = tfc or self.editor.read()
        index = rollout.find_pool_index(tfc, self.pool)
        return tfc, index, tfc["spec"]["gpuPools"][index]

    def template(self, spec_template=None):
        spec_template = spec_template if spec_template is not None else self._entry()[2]["specTemplate"]
        config = (spec_template.get("componentConfig") or {}).get(self.component) or {}
        return config.get(POD_TEMPLATE_FIELD[self.component]) or {}

    def gpupool(self):
        tfc, index, _entry = self._entry()
        return rollout.gpupool_name(tfc, index)

    def referenced(self, names):
        """Which of ``names`` the component's Pod template uses, from one read."""
        spec = (self.template().get("template") or {}).get("spec")
        return [n for n in names if secretrefs.references(spec, n)]

    def auto_update(self):
        return rollout.auto_update(self._entry()[2]["specTemplate"], self.component)

    def preflight(self, change=None):
        """Refuse, before anything is written, a change that could never reach the Pods:
        ``change`` (template -> template), the rotation's own, must move the component's hash
        (the operator rebuilds a hypervisor's containers when their number does not fit
        enableVector, dropping the environment an in_place rotation records its version in)."""
        if change is not None:
            self._refuse_unhashed(change)
        if self.auto_update():
            return
        if self.component != "hypervisor" or not self.params.get("delete_unrolled_pods"):
            raise InvalidInput(
                "%s: autoUpdate%s is false, so the operator would never roll the new Secret "
                "out; turn it on (gpupool_rollout) or, for hypervisors, set "
                "delete_unrolled_pods so that stale Pods are deleted and recreated" % (
                    self.label, self.component.capitalize()))

    def _refuse_unhashed(self, change):
        before = self._entry()[2]["specTemplate"]
        after = self._changed_template(change)(before)
        if after == before or self.component in rollout.hash_changed_components(before, after):
            return
        why = "the change is in a part of the Pod template the operator does not hash"
        if self.component == "hypervisor":
            hv = (before.get("componentConfig") or {}).get("hypervisor") or {}
            count = len((((hv.get("podTemplate") or {}).get("template") or {}).get("spec") or {}).get(
                "containers") or [])
            vector = bool(hv.get("enableVector"))
            if count != (2 if vector else 1):
                why = ("its hypervisor template has %d container%s while enableVector is %s, so the "
                       "operator replaces them with bare containers of its own and drops their "
                       "environment, where this rotation would record the Secret's version; give the "
                       "template the %s container%s enableVector calls for" % (
                           count, "" if count == 1 else "s", "on" if vector else "off",
                           "two" if vector else "one", "s" if vector else ""))
        raise InvalidInput("%s: the operator would never roll this rotation out (%s); nothing was "
                           "written" % (self.label, why))

    def rotation_change(self, key, old=None, new=None):
        """The template change a rotation makes here, for preflight: the version mark of an
        in_place rotation (``key``), or the references repointed from ``old`` to ``new``."""
        if old is not None:
            return lambda t: secret_plan.repoint_template(t, old, new)
        return lambda t: secret_plan.mark_template_env(t, key, "(the next version)", DEFAULT_CONTAINER[self.component])

    def _changed_template(self, change):
        def transform(spec_template):
            spec_template = dict(spec_template)
            config = dict(spec_template.get("componentConfig") or {})
            comp = dict(config.get(self.component) or {})
            comp[POD_TEMPLATE_FIELD[self.component]] = change(self.template(spec_template))
            config[self.component] = comp
            spec_template["componentConfig"] = config
            return spec_template
        return transform

    def _write(self, change, deadline):
        """Write the template change; with autoUpdate on, wait for the rollout like
        gpupool_rollout does (stale status guarded, stall detected, Pods that do not start)."""
        self.wrote = False
        transform = self._changed_template(change)
        entry_before = self._entry()[2]["specTemplate"]
        if transform(entry_before) == entry_before:
            return False
        if not self.auto_update():
            self.editor.update(pool_entry_transform(self.pool, transform))
            return True
        from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.rollout_task import RolloutTask
        params = {"cluster": self.editor.name, "pool": self.pool, "state": "present",
                  "components": {self.component: {}}, "rolling_update": {},
                  "wait": deadline is not None, "wait_timeout": 0, "deadline": None,
                  "stall_timeout": self.params.get("stall_timeout"), "on_deadline": "fail",
                  "wait_until_progress": 100, "namespace": self.params.get("namespace")}
        # The rotation's child: the roll's warnings reach the rotation's result. Hypervisor Pods
        # that do not start end the wait as fast as a Deployment's new Pods end its rollout's.
        task = RolloutTask(self.ctx.child(deadline=deadline or Deadline(timeout=60)), params,
                           template_change=transform, pods_fail_after=decisions.FATAL_FOR_SECONDS)
        writes = self.kube.writes
        try:
            task.run()
        finally:
            self.wrote = self.kube.writes > writes
        return True

    def repoint(self, old, new, deadline=None):
        return self._write(lambda t: secret_plan.repoint_template(t, old, new), deadline)

    def mark(self, secret_meta, deadline=None):
        key, value = decisions.secret_annotation(secret_meta)
        return self._write(lambda t: secret_plan.mark_template_env(
            t, key, value, DEFAULT_CONTAINER[self.component]), deadline)

    def marked(self, key, version):
        return secret_plan.template_env_mark(self.template(), key) == version

    @staticmethod
    def own_target(target):
        """An in-place rotation's version is in the Pod spec's environment here, not in an
        annotation (see mark)."""
        if target[0] == "annotation":
            return ("env", secret_plan.version_env_name(target[1]), target[2], target[3])
        return target

    def pods(self, _target=None):
        """The hypervisor Pods of the pool (a worker's Pods belong to the workloads)."""
        return self._observer().hypervisor_pods() if self.component == "hypervisor" else []

    def wait(self, deadline, target):
        """With autoUpdate on, the write already waited. Otherwise give the operator the grace
        period, then delete the hypervisor Pods still on the old Secret and wait for their
        replacements."""
        if self.auto_update():
            return
        target = self.own_target(target)
        observer = self._observer()
        grace = Deadline(timeout=max(1, int(self.params.get("unrolled_grace") or 0)))
        watcher, rolled, _want = self._hypervisors_on(observer, target)
        try:
            watcher.wait(rolled, grace if grace.remaining() < deadline.remaining() else deadline)
            return
        except TfopsError:
            if deadline.expired():
                raise
        pods = observer.pods
        for name, _why in pods_off_target(watcher.objects.values(), target):
            self.kube.call("delete", "pods/%s" % name, pods.delete, name=name,
                           namespace=observer.namespace)
        watcher.wait(rolled, deadline)

    def _hypervisors_on(self, observer, target):
        """A watcher of the pool's hypervisor Pods, the check that every GPUNode has one live
        Pod on ``target`` (Ready), and how many GPUNodes there are."""
        watcher = ObjectWatcher(self.kube, observer.pods, namespace=observer.namespace,
                                label_selector="tensor-fusion.ai/component=hypervisor,"
                                               "tensor-fusion.ai/pool-%s=true" % observer.gpupool)
        want = len(observer.gpunodes())

        def rolled(objects):
            wrong = pods_off_target(objects.values(), target)
            alive = live_only(objects.values())
            return not wrong and len(alive) == want, "%d of %d hypervisor Pods on the new Secret" % (
                len(alive) - len(wrong), want)
        return watcher, rolled, want

    def _observer(self):
        # Component Pods live in the operator's namespace, which is the rotated Secret's (an
        # imagePullSecret or a mounted Secret must be in the Pod's own namespace).
        return PoolObserver(self.kube, self.gpupool(), self.params.get("namespace"))

    def verify(self, target):
        target = self.own_target(target)
        observer = self._observer()
        if self.component == "hypervisor":
            watcher, rolled, want = self._hypervisors_on(observer, target)
            try:
                # A Pod's Ready can drop for seconds after a control-plane outage (its node's
                # lease went stale) until its kubelet reports again: wait for it, bounded.
                watcher.wait(rolled, Deadline(timeout=VERIFY_SETTLE_SECONDS))
                return
            except WaitTimeout:
                pass
            pods = list(watcher.objects.values())
            alive = live_only(pods)
            wrong = pods_off_target(pods, target)
            raise VerifyFailed("%s: %d of %d hypervisor Pods run on the new Secret%s" % (
                self.label, len(alive) - len(wrong), want,
                "; " + "; ".join("%s %s" % w for w in wrong[:10]) if wrong else ""),
                consumer=self.label)
        pool = observer.read_pool()
        _hash, progress, synced, _ip = rollout.component_status(pool, self.component)
        if not synced:
            raise VerifyFailed("%s: the worker campaign is not synced (progress %s)" % (
                self.label, progress), consumer=self.label)
