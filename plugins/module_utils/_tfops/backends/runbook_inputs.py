# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runbook_inputs' body: every tfops_* variable of a runbook checked (runbook/inputs.py), then
what only the cluster can say, read only: the namespaces, pools, the Secret and its consumers, a
snapshot reference. Nothing is written. What these credentials may not read is left to the RBAC
preflight that follows (and listed in ``unchecked``)."""

from __future__ import annotations

import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.common_args import retry_deadline
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    ApiError,
    Forbidden,
    InvalidInput,
    TfopsError,
)
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.labels import TF_GROUP
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import rollout
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.cluster import ClusterEditor
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import store as snapshot_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm.storage import ReleaseStorage
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import inputs
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import repo_index
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import plan as secret_plan
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.module import Run

DEFAULT_NAMESPACE = "tensor-fusion-sys"
DEFAULT_RELEASE = "tensor-fusion-sys"
# The upgrade runbook's chart and repository when the run names none (vars/runbook.yml).
DEFAULT_CHART = "tensor-fusion"
DEFAULT_CHART_REPO = "https://download.tensor-fusion.ai"


def run(ctx):
    """runbook_inputs' body (core/module.py's contract)."""
    params = ctx.params
    given = dict(params.get("variables") or {})
    given.update(params.get("secret_variables") or {})
    places = inputs.places_for(given, project=params.get("project") or None)
    checked, problems = inputs.check(params["playbook"], given, awx=params.get("awx"), places=places)
    unchecked = []
    connection = [p for p in problems if p.startswith(("tfops_kubeconfig", "tfops_context"))]
    if params["cluster"] and not connection:
        # Reads only: an outage is ridden out - unless the run is refused anyway, which is said
        # at once rather than after waiting out an API server that does not answer.
        try:
            with ctx.connected(None if problems else retry_deadline(params)):
                task = ClusterInputs(ctx, params)
                problems += task.problems(checked, given)
                unchecked = task.unchecked
        except TfopsError as exc:  # no cluster to read: said with the other problems, if any
            problems.append("the cluster cannot be read (tfops_kubeconfig, tfops_context or the "
                            "K8S_AUTH_* environment): %s" % exc.msg)
    names = sorted(set(n for p in problems for n in re.findall(r"tfops_[a-z0-9_]+", p) if n in inputs.BY_NAME))
    if problems:
        raise InvalidInput(inputs.message(problems), refused=names, problems=problems, unchecked=unchecked)
    return dict(changed=False, checked=sorted(checked), unchecked=unchecked, refused=[],
                msg="%d variable%s of %s checked%s" % (
                    len(checked), "" if len(checked) == 1 else "s", params["playbook"],
                    "; not readable with these credentials: %s" % ", ".join(unchecked) if unchecked else ""))


class ClusterInputs(Run):
    """What the cluster says about the variables (reads only)."""

    def __init__(self, ctx, params):
        super().__init__(ctx, params)
        self.unchecked = []

    def problems(self, checked, given):
        out = []
        playbook = inputs.runbook_of(self.params["playbook"])
        namespace = checked.get("tfops_namespace") or DEFAULT_NAMESPACE
        steps = [lambda: self._namespace("tfops_namespace", namespace, "tfops_namespace" not in checked)]
        if playbook == "upgrade" and checked.get("tfops_pools"):
            steps.append(lambda: self._pools(checked["tfops_pools"]))
            steps.append(lambda: self._pod_templates(checked["tfops_pools"]))
        for name in ("tfops_window_pool", "tfops_verify_pool"):
            if checked.get(name):
                steps.append(lambda n=name: self._gpupool(n, checked[n]))
        if playbook == "upgrade" and checked.get("tfops_chart_version") and given.get("tfops_chart_repo") != "":
            steps.append(lambda: self._chart_version(checked))
        release_refused = inputs.is_set(inputs.BY_NAME["tfops_release"], given.get("tfops_release")) and \
            "tfops_release" not in checked
        if playbook == "rollback" and not release_refused:
            steps.append(lambda: self._release(checked, namespace))
        if playbook == "rollback" and snapshot_store.is_reference(checked.get("tfops_snapshot")):
            steps.append(lambda: self._snapshot(checked["tfops_snapshot"]))
        if playbook == "rotate_secret" and checked.get("tfops_secret_name"):
            secret_ns = checked.get("tfops_secret_namespace") or namespace
            steps.append(lambda: self._secret(checked, secret_ns))
        for step in steps:
            try:
                problem = step()
            except InvalidInput as exc:
                problem = exc.msg
            except Forbidden as exc:  # left to the RBAC preflight that follows
                self.unchecked.append(exc.msg)
                problem = None
            if problem:
                out.append(problem)
                if problem.startswith("tfops_namespace"):
                    break  # nothing else can be read in a namespace that is not there
        return out

    # ---- reads ----------------------------------------------------------------------------------
    @staticmethod
    def _get(read):
        """read(), or None when it is not found."""
        try:
            return read()
        except ApiError as exc:
            if exc.status == 404 and not exc.details.get("route_missing"):
                return None
            raise

    def _release(self, checked, namespace):
        """The release a rollback rolls back: helm_release refuses one without a revision, after
        the lock and the window; said here, before them."""
        release = checked.get("tfops_release") or DEFAULT_RELEASE
        if ReleaseStorage(self.kube).revisions(namespace, release):
            return None
        return "tfops_release: there is no Helm release %s in namespace %s%s: nothing to roll back" % (
            release, namespace, " (the default; set tfops_release to TensorFusion's)"
            if "tfops_release" not in checked else "")

    def _chart_version(self, checked):
        """A pinned chart version that the repository's index does not list (a run would take the
        lock and a restore point before helm said so). An index that cannot be read is said, not
        refused: helm reads it again."""
        chart = repo_index.plain_chart_name(checked.get("tfops_chart") or DEFAULT_CHART)
        if chart is None or not repo_index.EXACT.match(str(checked["tfops_chart_version"])):
            return None
        try:
            index = repo_index.fetch(checked.get("tfops_chart_repo") or DEFAULT_CHART_REPO)
        except TfopsError as exc:
            self.unchecked.append("tfops_chart_version: %s" % exc.msg)
            return None
        return repo_index.missing(index, chart, checked["tfops_chart_version"])

    def _namespace(self, name, namespace, default):
        found = self.kube.namespace_exists(namespace)
        if found is None:
            self.unchecked.append("namespace %s" % namespace)
        if found is False:
            return "%s: namespace %s%s does not exist" % (
                name, namespace, " (the default; set tfops_namespace to TensorFusion's)" if default else "")
        return None

    def _pools(self, pools):
        try:
            api = self.kube.resource("TensorFusionCluster", group=TF_GROUP)
        except ApiError:
            return "tfops_pools: the cluster serves no TensorFusionCluster (is TensorFusion installed?)"
        clusters = self._get(lambda: self.kube.call("list", "tensorfusionclusters", api.get).to_dict()["items"])
        missing = []
        for index, item in enumerate(pools):
            name = item if isinstance(item, str) else (item.get("pool") or item.get("name"))
            cluster = None if isinstance(item, str) else item.get("cluster")
            candidates = [c for c in clusters or [] if cluster in (None, c["metadata"]["name"])]
            if not any(rollout.pool_index(c, name) is not None for c in candidates):
                where = " in TensorFusionCluster %s" % cluster if cluster else ""
                missing.append("tfops_pools[%d]: no pool %s%s" % (index, name, where))
        if not missing:
            return None
        known = ["%s (GPUPool %s-%s)" % (e.get("name"), c["metadata"]["name"], e.get("name"))
                 for c in clusters or [] for e in (c.get("spec") or {}).get("gpuPools") or []]
        return "%s; the pools are: %s" % ("; ".join(missing), ", ".join(known) or "none")

    def _pod_templates(self, pools):
        """Each pool's pod_templates against the field names this API server knows."""
        for index, item in enumerate(pools):
            components = item.get("components") if isinstance(item, dict) else None
            if any((settings or {}).get("pod_template") for settings in (components or {}).values()):
                rollout.validate_task(components, {}, "tfops_pools[%d]." % index,
                                      pod_fields=self.kube.pod_field_names())
        return None

    def _gpupool(self, name, pool):
        try:
            api = self.kube.resource("GPUPool", group=TF_GROUP)
        except ApiError:
            return "%s: the cluster serves no GPUPool (is TensorFusion installed?)" % name
        found = self._get(lambda: self.kube.call("get", "gpupools/%s" % pool, api.get, name=pool))
        return None if found is not None else "%s: there is no GPUPool %s" % (name, pool)

    def _snapshot(self, reference):
        namespace, secret = snapshot_store.parse_reference(reference)
        api = self.kube.resource("Secret", api_version="v1")
        found = self._get(lambda: self.kube.call("get", "secrets/%s" % secret, api.get, name=secret,
                                                 namespace=namespace))
        if found is None:
            return "tfops_snapshot: there is no snapshot %s (no Secret %s in %s)" % (reference, secret, namespace)
        # Any Secret may be named: only a restore point of this collection is one (type, labels).
        obj = found.to_dict()
        bundle = ((obj.get("metadata") or {}).get("annotations") or {}).get(snapshot_store.ANNOTATION_BUNDLE) or secret
        why = snapshot_store.not_a_restore_point([obj], bundle)
        return "tfops_snapshot: %s is not a restore point of tensorfusion.ops (%s)" % (reference, why) if why else None

    def _secret(self, checked, namespace):
        if "tfops_secret_namespace" in checked:
            problem = self._namespace("tfops_secret_namespace", namespace, False)
            if problem:
                return problem
        problems = []
        name = checked["tfops_secret_name"]
        api = self.kube.resource("Secret", api_version="v1")
        if (checked.get("tfops_secret_strategy") or "in_place") == "in_place":
            found = self._get(lambda: self.kube.call("get", "secrets/%s" % name, api.get, name=name,
                                                     namespace=namespace))
            if found is None:
                problems.append("tfops_secret_name: there is no Secret %s in namespace %s (in_place "
                                "updates an existing Secret; tfops_secret_strategy versioned creates one)"
                                % (name, namespace))
            else:
                try:  # secret_rotate's own check, before its first write
                    secret_plan.check_in_place(found.to_dict(), name, namespace,
                                               checked.get("tfops_secret_type"), "tfops_secret_type")
                except InvalidInput as exc:
                    problems.append(exc.msg if exc.msg.startswith("tfops_") else "tfops_secret_name: %s" % exc.msg)
        for index, consumer in enumerate(checked.get("tfops_secret_consumers") or []):
            problem = self._consumer(consumer, namespace)
            if problem:
                problems.append("tfops_secret_consumers[%d]: %s" % (index, problem))
        return "; ".join(problems) or None

    def _consumer(self, consumer, namespace):
        kind = consumer.get("kind")
        namespace = consumer.get("namespace") or namespace
        if kind in secret_plan.WORKLOAD_KINDS:
            api = self.kube.resource(kind, api_version="apps/v1")
            found = self._get(lambda: self.kube.call("get", "%ss/%s" % (kind.lower(), consumer["name"]), api.get,
                                                     name=consumer["name"], namespace=namespace))
            return None if found is not None else "%s %s/%s does not exist" % (kind, namespace, consumer["name"])
        if kind == "HelmRelease":
            revisions = ReleaseStorage(self.kube).revisions(namespace, consumer["name"])
            return None if revisions else "Helm release %s/%s does not exist" % (namespace, consumer["name"])
        if kind == "TensorFusionCluster":
            try:
                editor = ClusterEditor(self.kube, consumer.get("name"))
                rollout.find_pool_index(editor.read(), consumer["pool"])
            except InvalidInput as exc:
                return exc.msg
        return None
