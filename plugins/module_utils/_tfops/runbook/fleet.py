# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""fleet_upgrade.yml across AWX execution nodes (docs/awx.md, "A fleet across execution nodes"):
pure decisions, no client, no clock.

The fleet's guarantees - a canary first, then waves, no wave after a failed one - hold inside one
job (the play's ``serial`` and ``max_fail_percentage: 0``). AWX's job slicing runs one job
template as several jobs at once, each on a share of the inventory, and tells none of them that
it is a slice. Across execution nodes the fleet is therefore a workflow: the canary's job, then
one job per wave (sliced over the nodes), each started only on the success of the one before.
Each of these jobs is told its place with ``tfops_fleet_wave``; what the jobs before it handed on
(``set_stats``, which AWX passes to the later nodes of a workflow as extra variables) says
whether it may start. Everything here is checked before the lock or any write."""

from __future__ import annotations

import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import values
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

# A run of a wave that lets the next wave start; a check-mode run (a plan) lets the next plan run.
PASSED = ("succeeded", "unchanged", "planned")
_PERCENT = re.compile(r"^\s*([0-9]+)\s*%\s*$")
# The inventory group of each wave: tfops_fleet_wave_0 is the canary.
GROUP = "tfops_fleet_wave_%d"


def serial(value, name):
    """The play's ``serial`` as fleet_upgrade.yml takes it (``tfops_fleet_serial``): a batch size
    or a list of them (the last repeats), each a whole number of clusters (1 or more) or a
    percentage (1%-100%); text is a comma-separated list."""
    items = values.text_list(value, name) if isinstance(value, (str, list, tuple)) else [value]
    if not items:
        raise InvalidInput("%s: an empty list is no batch size" % name)
    out = []
    scalar = len(items) == 1 and not isinstance(value, (list, tuple))
    for index, item in enumerate(items):
        where = name if scalar else "%s[%d]" % (name, index)
        match = _PERCENT.match(item) if isinstance(item, str) else None
        if match:
            if not 1 <= int(match.group(1)) <= 100:
                raise InvalidInput("%s: %r is not a percentage of 1%%-100%%" % (where, item))
            out.append("%d%%" % int(match.group(1)))
        else:
            try:
                out.append(values.whole_number(item, where, 1, unit=" clusters"))
            except InvalidInput:
                raise InvalidInput("%s: %r is neither a number of clusters (1 or more) nor a percentage "
                                   "(1%%-100%%)" % (where, item))
    return out


def one_batch(batches):
    """Whether ``serial`` (as ``serial()`` returns it, or None when unset) puts all the job's
    clusters into one batch whatever their number."""
    return batches is None or batches == ["100%"]


def slice_of(awx):
    """The sliced job template this AWX job is a slice of, else None. AWX runs a job template whose
    ``job_slice_count`` is above 1 as a workflow job of its own, named after the template, whose
    nodes are the slice jobs; it gives a slice no variable saying so (the slice's number is a field
    of the job, not an extra variable). A slice is told by what AWX does set (``awx_*``): launched
    by a workflow whose name is its own job template's."""
    awx = awx or {}
    template = awx.get("job_template_name")
    if template and awx.get("job_launch_type") == "workflow" and awx.get("workflow_job_name") == template:
        return template
    return None


def outcome(status, wave, host):
    """What one cluster of wave ``wave`` hands on to the jobs after it (``set_stats``). Two keys,
    because AWX merges the artifacts of a sliced job's slices key by key, the later one winning:
    ``tfops_fleet_passed`` is the same in every slice that passed; ``tfops_fleet_failed`` is set
    only by clusters that did not pass, so no slice that passed can hide it."""
    if status in PASSED:
        return {"tfops_fleet_passed": {"wave": wave}}
    return {"tfops_fleet_failed": {host: {"wave": wave, "status": status or "failed"}}}


def problems(wave, batches, passed, failed, awx):
    """Why this job of fleet_upgrade.yml must not start (each message names the variable at fault);
    [] when it may. ``wave``: tfops_fleet_wave (None: the whole fleet in this job); ``batches``:
    tfops_fleet_serial as ``serial()`` returns it (None: unset); ``passed``, ``failed``: what the
    jobs before it handed on; ``awx``: the job's AWX variables without their ``awx_`` prefix."""
    template = slice_of(awx)
    if wave is None:
        if template:
            return ["tfops_fleet_wave: unset, and this job is one slice of the sliced job template %r: "
                    "each slice would run its own canary at once and go on with its waves while another "
                    "slice failed. Run the fleet as the fleet workflow (a canary job, then one job per "
                    "wave, each told its wave with tfops_fleet_wave; docs/awx.md), or set the job "
                    "template's job slice count to 1" % template]
        return []
    out = []
    if not one_batch(batches):
        out.append("tfops_fleet_serial: %s makes waves inside this job, which is wave %d of a fleet "
                   "workflow (tfops_fleet_wave): its clusters run in one batch, the workflow orders the "
                   "waves. Leave tfops_fleet_serial unset (or 100%%)" % (batches, wave))
    if wave == 0:
        if template:
            out.append("tfops_fleet_wave: 0 is the canary, which runs as one job before every other "
                       "cluster, and this job is a slice of the sliced job template %r: set the canary "
                       "node's job slice count to 1" % template)
        return out
    if failed:
        hosts = sorted(failed)
        out.append("tfops_fleet_failed: wave %d does not start: a cluster of an earlier wave did not pass "
                   "(%s)" % (wave, ", ".join("%s: wave %s %s" % (h, (failed[h] or {}).get("wave"),
                                                                 (failed[h] or {}).get("status")) for h in hosts)))
    else:
        last = (passed or {}).get("wave")
        if last != wave - 1:
            out.append("tfops_fleet_passed: wave %d starts only after wave %d passed, and %s; run the waves "
                       "as the fleet workflow's nodes, in order, each on the success of the one before"
                       % (wave, wave - 1, "no job before this one handed on a wave that passed" if last is None
                          else "the last wave handed on as passed is %s" % last))
    return out


def passed_wave(value, name):
    """``tfops_fleet_passed``: {wave: N}, as a wave's clusters hand it on."""
    values.mapping(value, name, " (for example {wave: 0})")
    if set(value) != {"wave"}:
        raise InvalidInput("%s: a mapping with the one key wave (for example {wave: 0}), not %s"
                           % (name, ", ".join(sorted(str(k) for k in value)) or "an empty one"))
    return {"wave": values.whole_number(value["wave"], "%s.wave" % name, 0, unit="")}


def failed_clusters(value, name):
    """``tfops_fleet_failed``: {cluster: {wave: N, status: S}}, as a wave's clusters hand it on."""
    values.mapping(value, name, " (for example {gpu-eu: {wave: 1, status: rolled_back}})")
    for host, entry in value.items():
        values.mapping(entry, "%s.%s" % (name, host), " (for example {wave: 1, status: rolled_back})")
    return value
