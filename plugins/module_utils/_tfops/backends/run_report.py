# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""run_report's body: build the record, write it (locally, in the cluster), save a check run's plan."""

from __future__ import annotations

import os

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan import plans
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.maintenance.lock import check_run_id
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import record
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import render as report_render
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report import store as report_store
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time, utcnow
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import (
    InvalidInput,
    ReportNotWritten,
    TfopsError,
)


NOT_STORED = "the report was not stored in the cluster (%s)%s"


def store_in_cluster(ctx, run_record, files, folder):
    """(the ConfigMap of the report or None, whether anything was written). A failure is a warning:
    the cluster copy never fails the task (it runs in the runbooks' rescue/always path, where the
    run's own failure must stay the one reported, and the local copy must still be written); a
    write that went through before it (the ConfigMap made, the pruning failed) still counts."""
    params = ctx.params
    local = " - the local report is in %s" % folder if folder else " - only the run's summary remains"
    kube = None
    try:
        with ctx.connected() as kube:
            taken = run_record.get("restore_point") or {}
            stored = report_store.store_in_cluster(kube, params["namespace"], run_record["playbook"], run_record["started"],
                                                   run_record["host"], files, params["keep"], run_record.get("run_id"),
                                                   restore_point=(taken.get("captured_at"), run_record["changed"]))
    except TfopsError as exc:
        ctx.warn(NOT_STORED % (exc.msg, local))
        return None, bool(kube is not None and kube.written)
    except Exception as exc:  # pylint: disable=broad-except  # anything else as well: see above
        ctx.warn(NOT_STORED % ("%s: %s" % (type(exc).__name__, exc), local))
        return None, bool(kube is not None and kube.written)
    if stored["dropped"]:
        ctx.warn("the report's %s did not fit in ConfigMap %s and was left out (report.json holds it all)" % (
            ", ".join(stored["dropped"]), stored["ref"]))
    return stored, True


def save_plan(ctx, run_record):
    """(the sealed plan, the file written or None) of a check-mode run with a plan identity."""
    params = ctx.params
    identity = params.get("plan_identity") or {}
    if not run_record.get("plan") or not identity.get("salt"):
        if run_record.get("plan") and params.get("plan_out"):
            ctx.warn("the plan was not saved to %s: what it was made from could not be read (see the "
                     "change_plan task's failure)" % params["plan_out"])
        return None, None
    upgrade = (params.get("results") or {}).get("upgrade")
    plan = plans.saved_plan(dict(run_record, summary=record.summary_line(run_record)), identity["salt"],
                            identity.get("identity"), (upgrade or {}).get("plan_identity") if isinstance(upgrade, dict) else None,
                            params["plan_max_age"])
    if not params.get("plan_out") or ctx.check_mode:
        return plan, None
    try:
        return plan, plans.write_plan_file(params["plan_out"], run_record["host"], plan)
    except OSError as exc:
        raise ReportNotWritten("cannot write the plan to %s: %s" % (params["plan_out"], exc))


def run(ctx):
    """run_report's body (core/module.py's contract)."""
    params = ctx.params
    local, cluster = params["store"] in ("local", "both"), params["store"] in ("cluster", "both")
    try:
        if params["keep"] < 1:
            raise InvalidInput("keep must be 1 or more (this run's report is one of them), not %d" % params["keep"])
        check_run_id(params.get("run_id"))
        if params["plan_max_age"] < 1:
            raise InvalidInput("plan_max_age must be a positive number of seconds, not %d" % params["plan_max_age"])
        # The record's host is the inventory host (the option is not named host: see auth).
        run_record = record.build_record(dict(params, host=params["inventory_host"]), micro_time(utcnow()))
        if cluster:
            report_store.report_labels(run_record["playbook"])  # a playbook that cannot label it: refused now
    except (TfopsError, ValueError) as exc:
        raise InvalidInput("cannot build the report: %s" % getattr(exc, "msg", exc))
    files = report_render.report_files(run_record)
    folder, written, not_written = None, [], None
    if local and ctx.check_mode:
        folder = os.path.join(os.path.abspath(params["dest"]), report_render.run_folder_name(run_record))
    elif local:
        try:
            folder, written = report_render.write_report(params["dest"], run_record, files)
        except OSError as exc:
            # What can still be written is: the cluster copy below; then the task fails saying so.
            not_written = "cannot write the report into %s: %s" % (params["dest"], exc)
    stored, cluster_written = store_in_cluster(ctx, run_record, files, folder) \
        if cluster and not ctx.check_mode and not params["check_run"] else (None, False)
    plan, plan_file = save_plan(ctx, run_record) if not_written is None else (None, None)
    result = dict(changed=bool(written or cluster_written or plan_file), plan=plan, plan_file=plan_file,
                  status=run_record["status"], failed_run=run_record["failed"],
                  resumable=run_record["resumable"], cluster_changed=run_record["changed"],
                  summary=record.summary_line(run_record), dir=folder, files=written, configmap=stored,
                  report_ref=stored["ref"] if stored else None, record=run_record)
    if not_written:
        raise ReportNotWritten("%s; %s" % (not_written, "the cluster copy is %s" % stored["ref"] if stored
                                           else "no copy was stored in the cluster"), **result)
    return result
