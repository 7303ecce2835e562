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
  - Writes C(<dest>/<playbook>-<host>-<time>/) with C(report.json), C(report.html) (inline CSS and
    an SVG timeline of each component's progress per pool, no external assets) and C(report.md).
    Folders are 0700 and files 0600.
  - Only named fields are copied from the results - never values, diffs or manifests - so no
    Secret value reaches the report.
  - Writes files on the host it runs on; the runbooks run it on the controller (local connection).
options:
  dest:
    description: Artifacts folder (created 0700 if missing).
    type: path
    required: true
  playbook:
    description: Name of the runbook (V(upgrade), V(rollback), V(precheck)).
    type: str
    required: true
  host:
    description: The cluster's name in the inventory.
    type: str
    default: localhost
  started:
    description: When the run began (ISO 8601); the first step's time when left out.
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
attributes:
  check_mode:
    support: full
    description: Builds the record and returns it; writes nothing.
  diff_mode:
    support: none
    description: Returns no diff.
  platform:
    platforms: posix
    support: full
    description: Writes local files.
author:
  - TensorFusion ops maintainers (@NexusGPU)
"""

EXAMPLES = r"""
- name: Report
  tensorfusion.ops.run_report:
    dest: ~/tfops-artifacts
    playbook: upgrade
    host: "{{ inventory_hostname }}"
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
status:
  description:
    - The outcome - V(succeeded) (changed and verified), V(unchanged), V(rolled_back), V(rollback_failed),
      V(resumable) (a deadline paused pools mid-rollout) or V(failed) (with no rollback, or with a
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
  description: Whether running again finishes the work (pools paused by the deadline).
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
  description: The run's folder (in check mode, the one that would be written).
  returned: always
  type: str
  sample: /home/ops/tfops-artifacts/upgrade-localhost-20261129T020001Z
files:
  description: The files written.
  returned: always
  type: list
  elements: str
  sample: [/home/ops/tfops-artifacts/upgrade-localhost-20261129T020001Z/report.html]
record:
  description:
    - The JSON record. Besides the steps, versions, pools and findings it holds C(warnings) (each
      C({step, msg})) and C(lock) - whether this run held the maintenance lock, whether it was
      released and, when not, C(held_until), the time it expires by itself.
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops import report, report_render
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.deadline import utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.errors import TfopsError


def main():
    module = AnsibleModule(
        argument_spec=dict(dest=dict(type="path", required=True),
                           playbook=dict(type="str", required=True),
                           host=dict(type="str", default="localhost"),
                           started=dict(type="str"),
                           steps=dict(type="list", elements="dict", default=[]),
                           results=dict(type="dict", default={}),
                           snapshot=dict(type="dict"),
                           error=dict(type="dict"),
                           check_run=dict(type="bool", default=False)),
        supports_check_mode=True)
    try:
        record = report.build_record(module.params, utcnow().strftime("%Y-%m-%dT%H:%M:%S.%fZ"))
    except (TfopsError, ValueError) as exc:
        module.fail_json(msg="cannot build the report: %s" % getattr(exc, "msg", exc))
    if module.check_mode:
        folder = os.path.join(os.path.abspath(module.params["dest"]), report_render.run_folder_name(record))
        files = []
    else:
        try:
            folder, files = report_render.write_report(module.params["dest"], record)
        except OSError as exc:
            module.fail_json(msg="cannot write the report into %s: %s" % (module.params["dest"], exc))
    module.exit_json(changed=not module.check_mode, status=record["status"], failed_run=record["failed"],
                     resumable=record["resumable"], cluster_changed=record["changed"],
                     summary=report.summary_line(record), dir=folder, files=files, record=record)


if __name__ == "__main__":
    main()
