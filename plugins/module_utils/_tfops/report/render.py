# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run's record as a short Markdown summary and a self-contained HTML page with an SVG timeline
of each component's progress per pool (inline CSS and SVG, no external assets); and writing them."""

from __future__ import annotations

import json
import os
import tempfile
from html import escape

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.changeplan.report import describe_changes
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.report.record import summary_line
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.workloads import changes

COLORS = {"hypervisor": "#1f77b4", "worker": "#d62728", "client": "#2ca02c"}
WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 640, 220, 48, 110, 14, 34


def _points(events, scale_x, scale_y):
    """A step line: progress holds until the next event."""
    points, last = [], 0
    for e in events:
        x = scale_x(e["seconds"])
        points.append((x, scale_y(last)))
        last = e.get("progress") or 0
        points.append((x, scale_y(last)))
    return points


def svg_timeline(pool):
    """SVG of each component's progress (0-100 %) against seconds since the pool's first event."""
    events = pool.get("timeline") or []
    span = max([e["seconds"] for e in events] + [1.0])
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def scale_x(sec):
        return round(LEFT + plot_w * sec / span, 1)

    def scale_y(pct):
        return round(TOP + plot_h * (1 - min(100, max(0, pct)) / 100.0), 1)

    parts = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" '
             'aria-label="progress of pool %s">' % (WIDTH, HEIGHT, WIDTH, HEIGHT, escape(str(pool.get("gpupool"))))]
    for pct in (0, 50, 100):
        y = scale_y(pct)
        parts.append('<line x1="%d" y1="%s" x2="%d" y2="%s" stroke="#ddd"/>' % (LEFT, y, WIDTH - RIGHT, y))
        parts.append('<text x="%d" y="%s" font-size="11" text-anchor="end">%d%%</text>' % (LEFT - 4, y + 4, pct))
    parts.append('<text x="%d" y="%d" font-size="11">0 s</text>' % (LEFT, HEIGHT - 14))
    parts.append('<text x="%d" y="%d" font-size="11" text-anchor="end">%s s</text>' % (
        WIDTH - RIGHT, HEIGHT - 14, round(span, 1)))
    for e in events:
        gate = e.get("gate")
        if gate:  # a band over the bake: green when the batch passed, red when it stopped the pool
            x0, x1 = scale_x(max(0.0, e["seconds"] - (gate.get("seconds") or 0))), scale_x(e["seconds"])
            parts.append('<rect x="%s" y="%d" width="%s" height="%d" fill="%s" opacity="0.2"><title>%s'
                         '</title></rect>' % (x0, TOP, max(1.0, round(x1 - x0, 1)), plot_h,
                                              "#2ca02c" if gate.get("passed") else "#d62728",
                                              escape(gate_text(gate))))
    comps = sorted(set(e.get("component") for e in events if e.get("component")))
    for i, comp in enumerate(comps):
        color = COLORS.get(comp, "#555")
        mine = [e for e in events if e.get("component") == comp and not e.get("gate")]
        pts = " ".join("%s,%s" % p for p in _points(mine, scale_x, scale_y))
        parts.append('<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>' % (color, pts))
        for e in mine:
            parts.append('<circle cx="%s" cy="%s" r="3" fill="%s"><title>%s %s%% at %s s (%s)</title></circle>' % (
                scale_x(e["seconds"]), scale_y(e.get("progress") or 0), color, escape(comp),
                e.get("progress"), e["seconds"], escape(str(e.get("time")))))
        parts.append('<text x="%d" y="%d" font-size="12" fill="%s">%s</text>' % (
            WIDTH - RIGHT + 8, TOP + 14 + 16 * i, color, escape(comp)))
    if not comps:
        parts.append('<text x="%d" y="%d" font-size="12">no rollout in this %s</text>' % (
            LEFT + 8, TOP + 20, "plan" if pool.get("planned") else "run"))
    elif pool.get("planned"):
        parts.append('<text x="%d" y="%d" font-size="12" fill="#555">planned batches (estimate)</text>' % (
            LEFT + 8, TOP + 12))
    parts.append("</svg>")
    return "".join(parts)


def gate_text(gate):
    failures = "; ".join("%s%s: %s" % (f.get("check"), " on %s" % f["node"] if f.get("node") else "",
                                       f.get("evidence")) for f in gate.get("failures") or [])
    return "batch %s (%s): %s after %ss of bake%s" % (
        gate.get("batch"), ", ".join(gate.get("nodes") or []), "healthy" if gate.get("passed") else "FAILED",
        gate.get("seconds"), " - " + failures if failures else "")


def rollback_line(rollback):
    """The rollback in a sentence: the chart it came from and went to, the revisions, the method,
    and a release it first brought back from a pending-* state."""
    recovered = rollback.get("recovered") or {}
    return "%schart %s -> %s, release revision %s -> %s (revision %s recorded%s)" % (
        "the release was stuck %s at revision %s (a helm write cut off): rolled back to its last "
        "deployed revision %s first; then " % (recovered.get("from_status"), recovered.get("from_revision"),
                                               recovered.get("to_revision")) if recovered else "",
        rollback.get("chart_version_before") or "?", rollback.get("chart_version") or "?",
        rollback.get("revision_before"), rollback.get("revision_after"), rollback.get("target_revision"),
        ", %s" % rollback["method"] if rollback.get("method") else "")


def _pool_line(pool):
    comps = ", ".join("%s %s%%" % (c, v.get("progress")) for c, v in sorted(pool["components"].items()))
    restored = pool.get("restored")
    return "Pool %s: %s%s%s" % (
        pool["gpupool"], comps or ("nothing rolled" if restored is None else "no campaign"),
        " (paused: %s)" % ", ".join(pool["paused"]) if pool["paused"] else "",
        "; restored by the rollback: %s" % (describe_changes(restored) or "nothing differed") if restored is not None else "")


def business_lines(pool):
    """The business workloads that changed their Pod templates while the pool rolled, one line each
    (what changed from and to; hidden fields only named); the first says the gate and the share."""
    summary = pool.get("business_changes") or {}
    entries = summary.get("changes") or []
    if not entries and not summary.get("unseen"):
        return []
    head = "business workloads changed during the rollout: %s of %s (%s%%), gate %s%s" % (
        summary.get("changed"), summary.get("business_workloads"), summary.get("share"), summary.get("gate"),
        ", reached" if summary.get("reached") else "")
    omitted = ["and %d more" % summary["changes_omitted"]] if summary.get("changes_omitted") else []
    return [head] + [changes.describe_entry(e) for e in entries] + omitted + \
        ["not seen: %s" % note for note in summary.get("unseen") or []]


def _table(headers, rows):
    head = "".join("<th>%s</th>" % escape(h) for h in headers)
    body = "".join("<tr>%s</tr>" % "".join("<td>%s</td>" % escape("" if c is None else str(c)) for c in row)
                   for row in rows)
    return "<table><tr>%s</tr>%s</table>" % (head, body)


def _versions_rows(record):
    before, after = record["versions"]["before"], record["versions"]["after"]
    rows = [["chart", before.get("chart_version"), after.get("chart_version")],
            ["app", before.get("app_version"), after.get("app_version")],
            ["revision", before.get("revision"), after.get("revision")]]
    for pool in sorted(set(before.get("pools") or {}) | set(after.get("pools") or {})):
        for comp in ("hypervisor", "worker", "client"):
            rows.append(["%s %s" % (pool, comp), _running(before, pool, comp), _running(after, pool, comp)])
    return rows


def _running(side, pool, comp):
    """The image a pool's template names, and why its Pods do not run it when they do not."""
    image = ((side.get("pools") or {}).get(pool) or {}).get(comp)
    why = ((side.get("not_running") or {}).get(pool) or {}).get(comp)
    return "%s (%s)" % (image, why) if image and why else image


CSS = ("body{font-family:sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:.5em 0 1em}"
       "td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;font-size:13px}"
       ".succeeded,.unchanged,.planned{color:#17692c}"
       ".failed,.rolled_back,.rollback_failed,.resumable,.blocked,.interrupted{color:#a61b1b}")


def interrupted_rows(interrupted):
    """[what, value] of a run that did not finish, as its record's writer saw it."""
    release = interrupted.get("release") or {}
    return [[label, value] for label, value in (
        ("recorded by", interrupted.get("recorded_by")), ("why", interrupted.get("why")),
        ("lock holder", interrupted.get("holder")), ("machine", interrupted.get("machine")),
        ("AWX job", interrupted.get("job_id")), ("lock taken", interrupted.get("lock_taken")),
        ("last renewed", interrupted.get("last_renewed")),
        ("waiting for", "; ".join(interrupted.get("rolling") or []) or None),
        ("paused", "; ".join(interrupted.get("paused") or []) or None),
        ("pause failed", interrupted.get("pause_failed")),
        ("Helm release", "%s revision %s, %s" % (release.get("name"), release.get("revision"), release.get("status"))
         if release else None)) if value]


def plan_rows(plan):
    """[step, what would happen] of a plan, in the runbook's order."""
    rows = []
    rbac = plan.get("rbac") or {}
    rows.append(["preflight", "not checked" if not rbac.get("checked") else (
        "the credentials hold every permission" if not rbac.get("missing") else
        "missing: %s" % ", ".join(rbac["missing"]))])
    lock = plan.get("lock")
    if lock:
        rows.append(["lock", "would take %s (free)" % lock.get("name") if lock.get("free") else
                     "held by %s until %s" % (lock.get("holder"), lock.get("held_until"))])
    window = plan.get("window") or {}
    if window.get("deadline"):
        rows.append(["window", "every wait would end by %s%s" % (window["deadline"], (
            " (window %s - %s)" % (window.get("window_start"), window.get("window_end"))
            if window.get("window_end") else ""))])
    snap = plan.get("snapshot")
    if snap:
        rows.append(["snapshot", "would write %s: release %s revision %s (chart %s)" % (
            snap.get("would_write"), snap.get("release"), snap.get("revision"), snap.get("chart_version"))])
    chart = plan.get("chart")
    if chart:
        rows.append(["chart", ("would upgrade chart %s -> %s, app %s -> %s: %s" % (
            chart["from"].get("chart_version"), chart["to"].get("chart_version"), chart["from"].get("app_version"),
            chart["to"].get("app_version"), "; ".join(chart["reasons"]))) if chart["changes"] else
            "would leave the release as it is (chart %s)" % chart["to"].get("chart_version")])
        for image in chart.get("images") or []:
            rows.append(["chart", "would set %s container %s image %s -> %s" % (
                image["object"], image["container"], image.get("from") or "none (new)", image["to"])])
        for what, verb in (("added", "add"), ("changed", "change"), ("removed", "remove")):
            for kind, names in sorted((chart.get("manifest") or {}).get(what, {}).items()):
                rows.append(["chart", "would %s %s: %s" % (verb, kind, ", ".join(names))])
    for pool in plan.get("pools") or []:
        described = describe_changes(pool.get("spec_changes") or [])
        if pool["components"]:
            origin = "; ".join("%s: %s" % (c, " and ".join(o)) for c, o in sorted(pool["origin"].items()))
            text = "%s would roll %s (asked by %s)%s on %s nodes, %d batches of %s at %s%% every %s, from +%ss for about %ss" % (
                pool["pool"], ", ".join(pool["components"]), origin, " - %s -" % described if described else "",
                pool["nodes"], pool["batch_count"],
                "/".join(str(n) for n in pool["batch_sizes"]), pool["batch_percentage"], pool["batch_interval"],
                pool["starts_at"], pool["estimated_seconds"])
            if pool.get("gate_bake_seconds"):
                text += ", health gates after each batch (%ss of bake, %ss of the estimate)" % (
                    pool["gate_bake_seconds"], pool["gate_seconds"])
            rows.append(["pools", text])
        elif pool.get("recorded_only") or pool.get("msg"):
            rows.append(["pools", "%s: %s" % (pool["pool"], pool.get("msg") or "would record, not roll: %s%s" % (
                ", ".join(pool["recorded_only"]), " (%s)" % described if described else ""))])
        elif described:
            rows.append(["pools", "%s would be set, no rollout: %s" % (pool["pool"], described)])
    if plan.get("rotation"):
        rows.append(["rotate", _planned_rotation(plan["rotation"])])
    rollback = plan.get("rollback")
    if rollback:
        rows.append(["rollback", "would roll back to revision %s (chart %s) from %s" % (
            rollback["target_revision"], rollback.get("chart_version"), rollback["snapshot"])])
        for item in rollback.get("component_config") or []:
            if item.get("restored"):
                rows.append(["rollback", "would restore pool %s: %s" % (item.get("gpupool"), describe_changes(item["restored"]))])
    est = plan["estimate"]
    rows.append(["estimate", "about %ss (rollout %ss), ends by %s%s" % (
        est["seconds"], est["rollout_seconds"], est["ends_by"],
        "" if est["fits"] is None else (", before the deadline %s" % est["deadline"] if est["fits"]
                                        else ", AFTER the deadline %s" % est["deadline"]))])
    return rows


def _planned_rotation(rotation):
    keys = ", ".join(rotation.get("keys") or []) or "none"
    steps = ", ".join(" ".join(str(s[k]) for k in ("step", "consumer", "detail") if s.get(k)) for s in rotation["steps"])
    consumers = ", ".join("%s %s/%s" % (c.get("kind"), c.get("namespace"), c.get("name")) for c in rotation["consumers"])
    deleted = "; would delete %s" % ", ".join(rotation["would_delete"]) if rotation.get("would_delete") else ""
    if not rotation.get("would_change", True):
        return "Secret %s (%s, keys %s) is already rotated: nothing would change; consumers: %s" % (
            rotation["secret"], rotation.get("strategy"), keys, consumers or "none")
    return "would rotate Secret %s (%s, keys %s): would %s; consumers: %s%s" % (
        rotation["secret"], rotation.get("strategy"), keys, steps or "change it", consumers or "none", deleted)


def _rotation_rows(rotation):
    return [[label, ", ".join(rotation.get(key) or []) or "none"] for key, label in (
        ("created", "created"), ("modified", "modified"), ("put_back", "put back"),
        ("not_put_back", "could not be put back"), ("deleted", "deleted"))]


def render_html(record):
    status = record["status"]
    out = ["<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>%s</title><style>%s</style></head><body>" % (
        escape("tensorfusion.ops %s %s" % (record["playbook"], record["host"])), CSS)]
    out.append("<h1>%s on %s</h1>" % (escape(record["playbook"]), escape(str(record["host"]))))
    out.append('<p class="%s"><b>%s</b>: %s</p>' % (escape(status), escape(status), escape(summary_line(record))))
    out.append("<p>API server %s; started %s, ended %s.</p>" % (
        escape(str(record.get("api_server"))), escape(record["started"]), escape(record["ended"])))
    if record.get("interrupted"):
        out.append("<h2>The run did not finish</h2>" + _table(["", ""], interrupted_rows(record["interrupted"])))
    if record.get("error"):
        out.append("<p><b>Error</b> in step %s (%s): %s</p>" % tuple(
            escape(str(record["error"].get(k))) for k in ("step", "task", "msg")))
    if record.get("warnings"):
        out.append("<h2>Warnings</h2>" + _table(["step", "warning"], [
            [w["step"], w["msg"]] for w in record["warnings"]]))
    plan = record.get("plan")
    if plan:
        if plan["blocking"]:
            out.append("<h2>Blocking</h2>" + _table(["step", "code", "message"], [
                [b["step"], b["code"], b["message"]] for b in plan["blocking"]]))
        out.append("<h2>Plan</h2>" + _table(["step", "would"], plan_rows(plan)))
    out.append("<h2>Steps%s</h2>" % (" of the check run" if plan else "") + _table(
        ["step", "status", "would change" if plan else "changed", "started", "seconds", "message"], [
            [s["name"], s["status"], s.get("would_change") if plan else s.get("changed"), s["started"], s["seconds"],
             s["msg"]] for s in record["steps"]]))
    if not plan:
        out.append("<h2>Versions</h2>" + _table(["", "before", "after"], _versions_rows(record)))
    if record.get("rotation"):
        out.append("<h2>Rotation of %s</h2>" % escape(str(record["rotation"]["secret"])) + _table(
            ["", "objects"], _rotation_rows(record["rotation"])))
    for pool in record["pools"]:
        out.append("<h2>Pool %s</h2>" % escape(str(pool["gpupool"])))
        out.append(svg_timeline(pool))
        if pool.get("planned"):
            continue
        if pool.get("restored") is not None:
            out.append("<p>Restored by the rollback: %s</p>" % escape(describe_changes(pool["restored"]) or "nothing differed"))
        out.append(_table(["component", "progress", "synced", "hash before", "hash after"], [
            [c, v.get("progress"), v.get("synced"), v.get("before_hash"), v.get("after_hash")]
            for c, v in sorted(pool["components"].items())]))
        business_text = business_lines(pool)
        if business_text:
            out.append("<p>%s</p><ul>%s</ul>" % (escape(business_text[0]), "".join(
                "<li>%s</li>" % escape(line) for line in business_text[1:])))
        if pool.get("gates"):
            out.append(_table(["health gate", "nodes", "result", "bake seconds", "evidence"], [
                [g.get("batch"), ", ".join(g.get("nodes") or []), "passed" if g.get("passed") else "failed",
                 g.get("seconds"), "; ".join(f.get("evidence") or "" for f in g.get("failures") or [])]
                for g in pool["gates"]]))
    rollback = record.get("rollback") or {}
    if rollback and not rollback.get("refused"):
        out.append("<h2>Rollback</h2><p>%s%s; pools restored: %s</p>" % (
            "" if rollback.get("ok") else "FAILED: ", escape(rollback_line(rollback)),
            escape(", ".join(p["gpupool"] for p in rollback.get("pools") or []) or "none differed")))
    if record.get("snapshot"):
        out.append("<h2>Snapshot</h2>" + _table(["key", "value"], sorted(record["snapshot"].items())))
    findings = [[stage, f["severity"], f["code"], f["message"]]
                for stage in ("precheck", "verify") for f in record["findings"][stage]]
    out.append("<h2>Findings</h2>" + (_table(["stage", "severity", "code", "message"], findings)
                                      if findings else "<p>none</p>"))
    out.append("</body></html>\n")
    return "".join(out)


def render_markdown(record):
    lines = ["# %s on %s: %s" % (record["playbook"], record["host"], record["status"]), "",
             summary_line(record), ""]
    if record.get("interrupted"):
        lines += ["- %s: %s" % (label, value) for label, value in interrupted_rows(record["interrupted"])] + [""]
    if record.get("error"):
        error = record["error"]
        lines += ["Error in step %s (%s): %s" % (error.get("step"), error.get("task"), error.get("msg")), ""]
    if record.get("snapshot"):
        lines += ["Snapshot: `%s` (revision %s)" % (record["snapshot"].get("path"),
                                                    record["snapshot"].get("revision")), ""]
    if (record.get("rollback") or {}).get("ok") is not None and not record["rollback"].get("refused"):
        rollback = record["rollback"]
        lines += ["Rollback%s: %s; pools restored: %s" % (
            "" if rollback["ok"] else " (failed)", rollback_line(rollback),
            ", ".join(p["gpupool"] for p in rollback.get("pools") or []) or "none differed"), ""]
    lines += ["Warning (%s): %s" % (w["step"], w["msg"]) for w in record.get("warnings") or []]
    if record.get("warnings"):
        lines.append("")
    if record.get("plan"):
        lines += ["Blocking (%s): %s" % (b["step"], b["message"]) for b in record["plan"]["blocking"]]
        lines += ["| step | would |", "|---|---|"]
        lines += ["| %s | %s |" % (step, text.replace("|", "\\|")) for step, text in plan_rows(record["plan"])]
        lines.append("")
    if record.get("rotation"):
        lines += ["Rotation of %s: %s" % (record["rotation"]["secret"], "; ".join(
            "%s %s" % (label, value) for label, value in _rotation_rows(record["rotation"]))), ""]
    lines += ["| step | status | seconds |", "|---|---|---|"]
    lines += ["| %s | %s | %s |" % (s["name"], s["status"], s["seconds"]) for s in record["steps"]]
    if not record.get("plan") and not record.get("interrupted"):
        lines += ["", "| | before | after |", "|---|---|---|"]
        lines += ["| %s | %s | %s |" % tuple("" if c is None else str(c).replace("|", "\\|") for c in row)
                  for row in _versions_rows(record)]
    for pool in (p for p in record["pools"] if not p.get("planned")):
        lines += ["", _pool_line(pool)]
        lines += ["- health gate of %s" % gate_text(g) for g in pool.get("gates") or []]
        business_text = business_lines(pool)
        lines += ["- %s" % business_text[0]] + ["  - %s" % line for line in business_text[1:]] if business_text else []
    blocking = [f for stage in ("precheck", "verify") for f in record["findings"][stage]
                if f["severity"] == "blocking"]
    lines += ["", "%d blocking finding(s)." % len(blocking), ""]
    return "\n".join(lines)


def _write(path, text):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def run_folder_name(record):
    """``<playbook>-<host>-<UTC start>Z[-<run id>]``: the run's token keeps apart two runs started
    in the same second."""
    stamp = record["started"].replace("-", "").replace(":", "").split(".")[0].rstrip("Z")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in "%s-%s" % (record["playbook"], record["host"]))
    run = "".join(c for c in str(record.get("run_id") or "") if c.isalnum() or c in "-_.")
    return "%s-%sZ%s" % (safe, stamp, "-" + run if run else "")


def report_files(record):
    """{file name: text} of a run's report: the same in the local folder and in the cluster."""
    return {"report.json": json.dumps(record, indent=2, sort_keys=True) + "\n",
            "report.html": render_html(record), "report.md": render_markdown(record)}


def write_report(dest, record, files=None):
    """``<dest>/<playbook>-<host>-<time>/report.{json,html,md}``: folders 0700, files 0600."""
    dest = os.path.abspath(dest)
    os.makedirs(dest, mode=0o700, exist_ok=True)
    folder = os.path.join(dest, run_folder_name(record))
    os.makedirs(folder, mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    files = files or report_files(record)
    for name, text in files.items():
        _write(os.path.join(folder, name), text)
    return folder, sorted(os.path.join(folder, n) for n in files)
