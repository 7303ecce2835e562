#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: run_report
short_description: Write the record of a runbook run - JSON, a self-contained HTML page and a Markdown summary
version_added: 0.1.0
description:
  - Builds the record of a run from the times its steps began and their registered results - the
    steps with their times and status, the chart and component versions before and after, the
    precheck and verify findings, the snapshot used, each pool's rollout timeline, the rollback and
    the error - and decides the run's outcome (RV(status)).
  - The report is C(report.json), C(report.html) (inline CSS and an SVG timeline of each
    component's progress per pool, no external assets) and C(report.md).
  - With O(store=local) (or V(both)) it writes them into C(<dest>/<playbook>-<host>-<time>-<run id>/)
    on the host the module runs on (the runbooks run it on the controller). Folders are 0700 and
    files 0600.
  - With O(store=cluster) (or V(both)) it keeps them in one ConfigMap per run in O(namespace), named
    C(tfops-report-<playbook>-<host>-<UTC start time>-<run id>) and labelled
    C(app.kubernetes.io/managed-by=tensorfusion.ops) and C(tensorfusion.ops/report-of=<playbook>),
    and deletes that runbook's oldest report ConfigMaps beyond O(keep). In AWX use V(cluster) or V(both) -
    the local folder is gone with the execution environment when the job ends.
  - Only named fields are copied from the results - never values, diffs or manifests - so no
    Secret value reaches the report, in either store.
options:
  dest:
    description: Artifacts folder (created 0700 if missing); required when O(store) is V(local) or V(both).
    type: path
  store:
    description:
      - Where the report goes - V(local) (files in O(dest)), V(cluster) (a ConfigMap in
        O(namespace)) or V(both).
      - The cluster copy is best effort, the run's report must not be lost to it - when it cannot
        be stored (a missing permission, no API server, credentials that do not work) the module
        warns, returns RV(configmap) null and still succeeds (with V(both), the local files are
        written). A local folder that cannot be written fails the task, after what can still be
        written is (with V(both), the cluster copy); the failed result still carries RV(status),
        RV(summary), RV(report_ref) and RV(record), and its message says which copy exists.
      - The ConfigMap is named after the run's start (O(started)) and O(run_id), so a second report
        of the same run (the runbooks write one before and one after releasing the lock) replaces
        the first, and two runs started in the same second keep two reports. A ConfigMap of that
        name that holds another run's report (another start or run id in its annotations
        C(tensorfusion.ops/run-started), C(tensorfusion.ops/run-id)) is never overwritten; the
        module warns that the report was not stored in the cluster.
      - Its content stays below the 1 MiB object limit - the three files as text when they fit;
        else gzip-compressed in C(binaryData) (C(report.json.gz), ...); else without the HTML page
        (a warning says so; C(report.json) holds everything the page shows). A report whose
        compressed JSON alone is too large is not stored in the cluster (a warning).
      - A check-mode run (O(check_run)) stores nothing in the cluster (the report of a check run is
        not a change it may make).
    type: str
    choices: [local, cluster, both]
    default: local
  namespace:
    description: Namespace of the report ConfigMaps (the release namespace).
    type: str
    default: tensor-fusion-sys
  keep:
    description:
      - How many report ConfigMaps of this O(playbook) stay in O(namespace), this run's included; the
        oldest (by the run's start) are deleted after this run's is created.
    type: int
    default: 10
  playbook:
    description: Name of the runbook (V(upgrade), V(rollback), V(precheck)).
    type: str
    required: true
  inventory_host:
    description: The cluster's name in the inventory.
    type: str
    default: localhost
  started:
    description: When the run began (ISO 8601); the first step's time when left out.
    type: str
  run_id:
    description:
      - The run's token (the runbooks' C(tfops_run_id), random, the same for every task of one run).
        The report's folder and ConfigMap end in it, so that two runs started in the same second
        never write one report. Without it they are named by the start time alone.
      - Letters, digits, C(-), C(_) and C(.) (the runbooks' token is lowercase letters and digits).
    type: str
  steps:
    description:
      - The steps in the order they began, each C({step, at}) with C(at) an ISO 8601 time. A step
        ends when the next one begins. Names used for the outcome - V(lock), V(window),
        V(precheck), V(snapshot), V(upgrade), V(pools), V(verify), V(rollback),
        V(verify_after_rollback).
    type: list
    elements: dict
    default: []
  results:
    description:
      - The registered result (or list of results) of each step, by step name. The V(precheck) and
        V(verify) results are those of M(tensorfusion.ops.tf_cluster_info); V(pools) those of
        M(tensorfusion.ops.gpupool_rollout); V(upgrade) and V(rollback) those of
        M(tensorfusion.ops.helm_release); V(lock) the M(tensorfusion.ops.maintenance_lock) result
        that took the lock and V(unlock) the one that released it (left out for a report written
        before the release).
      - A step counts as a change of the cluster when any of its results says C(changed), also
        one that then failed.
      - The warnings of every result (an API server outage ridden out, a lock taken over) are kept
        in the record's C(warnings), with their step.
    type: dict
    default: {}
  snapshot:
    description:
      - The snapshot used - a M(tensorfusion.ops.helm_snapshot) result or a
        M(tensorfusion.ops.helm_snapshot_info) bundle entry.
    type: dict
  error:
    description:
      - The failure that ended the run - C(step), C(task) and C(msg); C(failed_steps), every step
        that failed; C(step_errors), the message of each failed step by name (for a step whose
        failing task registered no result of the step's, such as the lock renewal before a
        rollback).
    type: dict
  check_run:
    description:
      - The run was a check-mode run (pass C(ansible_check_mode)); the record and the summary say
        that the changes were only predicted. The report itself is written anyway when this task
        runs with C(check_mode=false).
    type: bool
    default: false
  plan_identity:
    description:
      - With O(check_run), what the plan was made from - the result of
        M(tensorfusion.ops.change_plan) with O(tensorfusion.ops.change_plan#module:state=captured)
        (its C(salt) and C(identity)). The record's C(plan) is then also returned as a sealed,
        saved plan (RV(plan)), and written to O(plan_out) when given.
      - The digests of the chart and the rendered values come from the upgrade's result
        (C(results.upgrade.plan_identity)).
    type: dict
    version_added: 0.2.0
  plan_out:
    description:
      - With O(check_run) and O(plan_identity), the plan file to write (0600; folders 0700). One
        file holds one plan per O(inventory_host), so the hosts of a fleet's plan run share it; each host's
        plan is replaced, the others are kept.
      - A blocked plan is written too (with its blocking findings); applying it is refused.
    type: path
    version_added: 0.2.0
  plan_max_age:
    description: How long the saved plan may be applied, in seconds from its creation (its C(expires)).
    type: int
    default: 86400
    version_added: 0.2.0
extends_documentation_fragment:
  - tensorfusion.ops.attributes
  - tensorfusion.ops.auth
attributes:
  check_mode:
    details: Builds the record and returns it; writes nothing, neither files nor a ConfigMap.
  diff_mode:
    support: none
    details: Returns no diff.
  platform:
    platforms: posix
    support: full
    details: Writes local files; the Kubernetes API for O(store=cluster).
  idempotent:
    support: none
    details: Each run writes the report of a run (a new folder and ConfigMap).
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Report, kept in the release namespace and on the controller
  tensorfusion.ops.run_report:
    store: both
    namespace: tensor-fusion-sys
    keep: 10
    dest: ~/tfops-artifacts
    playbook: upgrade
    inventory_host: "{{ inventory_hostname }}"
    steps: "{{ tfops_marks }}"
    results:
      precheck: "{{ precheck_info }}"
      snapshot: "{{ snapshot_result }}"
      upgrade: "{{ upgrade_release }}"
      pools: "{{ gpupool_update_results }}"
      verify: "{{ verify_info }}"
    snapshot: "{{ snapshot_result }}"
  register: report
"""

RETURN = r"""
api_server:
  description: The API server the report was kept in (O(store=cluster) or O(store=both), outside check mode).
  returned: when the task connected to the cluster
  type: str
  sample: https://203.0.113.10:6443
status:
  description:
    - The outcome of a check-mode run (O(check_run)) - V(planned) or V(blocked) (a step failed,
      the precheck found blocking findings, or the estimate ends after the window's deadline; the
      record's C(plan.blocking) says which); a blocked plan is a failed run (RV(failed_run)).
    - The outcome of a run - V(succeeded) (changed and verified), V(unchanged), V(rolled_back), V(rollback_failed),
      V(resumable) (a deadline, or the business changes gate of
      M(tensorfusion.ops.gpupool_rollout), paused pools mid-rollout) or V(failed) (with no rollback, or with a
      rollback that refused its snapshot before writing anything - C(refused) in the
      M(tensorfusion.ops.helm_release) result, then the record's C(rollback.refused) is true; the
      record's C(changed) says whether anything had been written).
  returned: always
  type: str
  sample: succeeded
failed_run:
  description: Whether the outcome is a failure of the run (every status but V(succeeded) and V(unchanged)).
  returned: always
  type: bool
  sample: false
resumable:
  description: Whether running again finishes the work (pools paused by the deadline or the business changes gate).
  returned: always
  type: bool
  sample: false
cluster_changed:
  description: Whether a step changed TensorFusion (not counting the lock, the snapshot and the reads).
  returned: always
  type: bool
  sample: true
summary:
  description: One line about the run.
  returned: always
  type: str
  sample: "upgrade on localhost: changed and verified (chart 1.8.6 -> 1.8.7) in 74s"
dir:
  description: The run's folder (in check mode, the one that would be written); null when O(store=cluster).
  returned: always
  type: str
  sample: /home/ops/tfops-artifacts/upgrade-localhost-20261129T020001Z-k3j2h4g5q1
files:
  description: The files written.
  returned: always
  type: list
  elements: str
  sample: [/home/ops/tfops-artifacts/upgrade-localhost-20261129T020001Z-k3j2h4g5q1/report.html]
configmap:
  description:
    - The report's ConfigMap - C(ref) (C(configmap://<namespace>/<name>)), C(namespace), C(name),
      C(created) (false when this run's earlier report was replaced), C(content) (V(plain), V(gzip) or
      V(gzip-without-html)), C(dropped) (files left out) and C(pruned) (the old report ConfigMaps deleted).
    - Null when nothing was stored in the cluster - O(store=local), check mode, a check-mode run,
      or a failure (then a warning says why).
  returned: always
  type: dict
  sample:
    ref: configmap://tensor-fusion-sys/tfops-report-upgrade-localhost-20261129t020001z-k3j2h4g5q1
    namespace: tensor-fusion-sys
    name: tfops-report-upgrade-localhost-20261129t020001z-k3j2h4g5q1
    created: true
    content: plain
    dropped: []
    pruned: [tfops-report-upgrade-localhost-20261101t020003z]
report_ref:
  description: The C(ref) of RV(configmap), or null.
  returned: always
  type: str
  sample: configmap://tensor-fusion-sys/tfops-report-upgrade-localhost-20261129t020001z-k3j2h4g5q1
plan:
  description:
    - With O(check_run) and O(plan_identity), the sealed plan of this host - C(playbook), C(host),
      C(status) (V(planned) or V(blocked)), C(blocking), C(created), C(expires), C(salt),
      C(identity) (digests, generations, revisions), C(summary), C(plan) (the record's plan) and
      C(checksum). A runbook hands it on through C(set_stats) as C(tfops_plan).
  returned: with check_run and plan_identity
  type: dict
plan_file:
  description: The plan file written (O(plan_out)); null when none was.
  returned: always
  type: str
record:
  description:
    - The JSON record. Besides the steps, versions, pools and findings it holds C(warnings) (each
      C({step, msg})) and C(lock) - whether this run held the maintenance lock, whether it was
      released and, when not, C(held_until), the time it expires by itself.
    - Each of its C(pools) holds C(business_changes) - the business workloads whose Pod templates
      changed during that pool's rollout, from M(tensorfusion.ops.gpupool_rollout)'s result of the
      same name (each change's workload and fields from and to; at most 50 workloads, the rest
      counted in C(changes_omitted)), or null when nothing was watched.
      C(business_paused) lists the pools that its gate V(pause) paused.
  returned: always
  type: dict
"""

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import module as tfmodule
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.backends import run_report as backend


def main():
    module = tfmodule.new_module(
        dict(dest=dict(type="path"),
             store=dict(type="str", choices=["local", "cluster", "both"], default="local"),
             namespace=dict(type="str", default="tensor-fusion-sys"),
             keep=dict(type="int", default=10),
             playbook=dict(type="str", required=True),
             inventory_host=dict(type="str", default="localhost"),
             started=dict(type="str"),
             run_id=dict(type="str"),
             steps=dict(type="list", elements="dict", default=[]),
             results=dict(type="dict", default={}),
             snapshot=dict(type="dict"),
             error=dict(type="dict"),
             check_run=dict(type="bool", default=False),
             plan_identity=dict(type="dict"),
             plan_out=dict(type="path"),
             plan_max_age=dict(type="int", default=86400)),
        required_if=[("store", "local", ["dest"]), ("store", "both", ["dest"])],
        supports_check_mode=True)
    tfmodule.run(module, backend.run)


if __name__ == "__main__":
    main()
