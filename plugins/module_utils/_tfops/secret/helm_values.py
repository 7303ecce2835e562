# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A Helm release's values key as a consumer of a Secret (such as the chart's
``imagePullSecrets``): repointed by re-rendering the release's current chart with the changed
user values (nothing else in the release changes), then the release's workloads that use the
Secret are waited on and verified like any workload."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.helm import cli as helmcli
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import plan as secret_plan
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret import refs as secretrefs
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.kube import list_pages
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.secret.consumers import (
    VerifyFailed,
    WorkloadConsumer,
)

RELEASE_ANNOTATION = "meta.helm.sh/release-name"
DEFAULT_HELM_SECONDS = 300


class HelmValuesConsumer:
    def __init__(self, kube, helm, release, namespace, values_key):
        self.kube, self.helm = kube, helm
        self.release, self.namespace, self.values_key = release, namespace, values_key
        self.label = "HelmRelease %s/%s values %s" % (namespace, release, values_key)
        self.wrote = False  # whether the last repoint's helm upgrade ran (and failed)

    @staticmethod
    def own_target(target):
        return target

    def pods(self, target):
        """The Pods of the release's workloads that use the target's Secret."""
        return [p for w in self.workloads(secret_plan.target_secret(target)) for p in w.pods(target)]

    def describe(self):
        return {"kind": "HelmRelease", "namespace": self.namespace, "name": self.release,
                "values_key": self.values_key}

    def _current(self):
        info, _history = self.helm.release(self.release, self.namespace)
        return info

    def referenced(self, names):
        """Which of ``names`` the values key holds, from one read of the release."""
        values = self._current()["values"]
        return [n for n in names if secret_plan.values_references(values, self.values_key, n)]

    def repoint(self, old, new, deadline=None):
        info = self._current()
        values = secret_plan.repoint_values(info["values"], self.values_key, old, new)
        if values == info["values"]:
            return False
        args = helmcli.stored_chart_upgrade(
            self.helm, self.kube, self.release, self.namespace, info["revision"], values,
            "secret_rotate: %s %s -> %s (tensorfusion.ops)" % (self.values_key, old, new))
        seconds = int(deadline.remaining()) if deadline is not None and deadline.bounded \
            else DEFAULT_HELM_SECONDS
        self.wrote = False
        try:
            self.helm.run(args + ["--timeout", helmcli.seconds_flag(max(1, seconds))],
                          timeout=max(1, seconds) + 60)
        finally:
            # helm's own client wrote a revision, deployed or failed: changed, and put back.
            self.wrote = self.kube.written = True
        return True

    def mark(self, secret_meta, _deadline=None):
        """In place: restart the release's workloads that use the Secret (values stay)."""
        name = secret_meta["metadata"]["name"]
        restarted = [w.mark(secret_meta) for w in self.workloads(name)]  # every one, no short cut
        return any(restarted)

    def workloads(self, secret):
        """The release's workloads whose Pod template references ``secret``."""
        found = []
        for kind in secret_plan.WORKLOAD_KINDS:
            api = self.kube.resource(kind, api_version="apps/v1")
            for obj in list_pages(self.kube, api, namespace=self.namespace):
                meta = obj["metadata"]
                if (meta.get("annotations") or {}).get(RELEASE_ANNOTATION) == self.release and \
                        secretrefs.references(obj["spec"]["template"].get("spec"), secret):
                    found.append(WorkloadConsumer(self.kube, kind, meta["name"], self.namespace))
        return found

    def wait(self, deadline, target):
        for workload in self.workloads(secret_plan.target_secret(target)):
            workload.wait(deadline, target)

    def verify(self, target):
        secret = secret_plan.target_secret(target)
        workloads = self.workloads(secret)
        if not workloads:
            raise VerifyFailed("%s: no workload of the release references Secret %s" % (
                self.label, secret), consumer=self.label)
        for workload in workloads:
            workload.verify(target)
