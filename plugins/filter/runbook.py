# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn the runbooks' flat, survey-friendly variables into role input."""

from __future__ import annotations

import datetime

from ansible.errors import AnsibleFilterError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import values
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.deadline import micro_time
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

COMPONENTS = ("hypervisor", "worker", "client")


def _checked(check, *args):
    """A check of module_utils (InvalidInput) as a filter's error."""
    try:
        return check(*args)
    except InvalidInput as exc:
        raise AnsibleFilterError(exc.msg)


def survey_list(value):
    """A list as it is, a survey's text answer (comma- or newline-separated) as a list, None as []."""
    return _checked(values.text_list, value, "the list")


def mark_step(marks, step):
    """The run's step marks with ``step`` begun now (UTC, microseconds): one set_fact per step
    instead of an included file (an include is a task of its own, and a runbook has a dozen)."""
    return list(marks or []) + [{"step": step, "at": micro_time(datetime.datetime.now(datetime.timezone.utc))}]


def _merge(base, over):
    out = dict(base)
    for key, value in (over or {}).items():
        out[key] = _merge(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def _chart_items(chart_changes):
    """{gpupool name: item} for what the chart step left to the pools step: the components the
    new chart renders differently ({cluster: {entry: {component: options}}}, helm_release's
    chart_pool_changes). A changed Pod template is only a marker there (its content stays out of
    results) and is not an option of gpupool_rollout."""
    items = {}
    for cluster, entries in sorted((chart_changes or {}).items()):
        for entry, components in sorted((entries or {}).items()):
            comps = {}
            frozen = []
            for comp, options in (components or {}).items():
                kept = dict((k, v) for k, v in (options or {}).items()
                            if not k.endswith("_changed") and k != "auto_update")
                # A ProviderConfig change held the pool's hypervisors: the pools step resumes them.
                if kept or (options or {}).get("provider_config_changed"):
                    comps[comp] = kept
                if kept and (options or {}).get("auto_update") is False:
                    frozen.append(comp)
            if comps:
                items["%s-%s" % (cluster, entry)] = {"cluster": cluster, "entry": entry,
                                                     "components": comps, "frozen": frozen}
    return items


def _chart_item_for(chart, item):
    """The chart's item for a pool the user named (by GPUPool name or by entry name)."""
    key = item.get("pool") or item.get("name")
    for name, found in chart.items():
        if key == name or (key == found["entry"] and item.get("cluster") in (None, found["cluster"])):
            return name
    return None


def pool_updates(pools, all_pools=None, hypervisor_image="", worker_image="", client_image="",
                 batch_percentage=None, batch_interval=None, auto_update=True, chart_changes=None):
    """gpupool_rollout options per pool: ``pools`` (names or dicts with name/pool, cluster,
    components, rolling_update) with the flat images and policy as defaults; with no pools and
    an image, every pool of ``all_pools``. A component whose image is set gets its autoUpdate flag
    turned on unless the pool's rolling_update says otherwise (the operator never rolls a
    component whose flag is false). ``chart_changes`` (helm_release's chart_pool_changes) are
    rolled too, under what the user set: the user's value wins for the same field."""
    flat = dict((c, {"image": img}) for c, img in zip(COMPONENTS, (hypervisor_image, worker_image, client_image))
                if img)
    policy = dict((k, v) for k, v in (("batch_percentage", batch_percentage), ("batch_interval", batch_interval))
                  if v not in (None, ""))
    if "batch_percentage" in policy:
        policy["batch_percentage"] = _checked(values.whole_number, policy["batch_percentage"], "batch_percentage", 1, 100)
    items = pools if isinstance(pools, (list, tuple)) else survey_list(pools)
    if not items and (flat or policy):
        items = survey_list(all_pools)
    chart = _chart_items(chart_changes)
    items = [{"pool": i} if isinstance(i, str) else i for i in items]
    # Imported here: gpupool's rules read YAML, which a filter loaded in every task's worker
    # should not import unless it is used.
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool import options as pool_options
    for index, item in enumerate(items):  # the runbooks' preflight has checked them already
        _checked(pool_options.check_pool_item, item, "pools[%d]" % index)
    named = [_chart_item_for(chart, i) for i in items if isinstance(i, dict)]
    items = items + [{"pool": name, "cluster": found["cluster"]}
                     for name, found in chart.items() if name not in named]
    out = []
    for item in items:
        from_chart = chart.get(_chart_item_for(chart, item) or "", {}).get("components") or {}
        components = _merge(_merge(from_chart, flat), item.get("components"))
        rolling = dict(policy)
        chart_item = chart.get(_chart_item_for(chart, item) or "", {})
        user_set = _merge(flat, item.get("components"))
        # The chart's change of a component the pool does not roll is recorded, not rolled, as a
        # chart upgrade would do; what the user sets for it rolls as usual.
        record_only = [c for c in chart_item.get("frozen") or [] if not (user_set.get(c) or {})]
        if auto_update:
            for comp in COMPONENTS:
                if (components.get(comp) or {}).get("image") and comp not in record_only:
                    rolling["auto_update_%s" % comp] = True
        rolling.update(item.get("rolling_update") or {})
        entry = {"pool": item.get("pool") or item.get("name"), "components": components, "rolling_update": rolling,
                 # Who asked for each component's change (the change plan says it): the chart, the user, or both.
                 "origin": dict((c, [o for o, asked in (("chart", c in from_chart), ("user", c in user_set)) if asked])
                                for c in components)}
        if item.get("cluster"):
            entry["cluster"] = item["cluster"]
        if record_only or item.get("record_only"):
            entry["record_only"] = sorted(set(record_only) | set(item.get("record_only") or []))
        out.append(entry)
    return out


def chart_pod_templates(chart_changes):
    """{"<cluster>/<entry>": [components]} whose Pod template the new chart renders differently
    (helm_release's chart_pool_changes marks them; their content is never in a result)."""
    from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.gpupool.chart_pools import pod_templates_changed
    return pod_templates_changed(chart_changes)


class FilterModule:
    def filters(self):
        return {"pool_updates": pool_updates, "survey_list": survey_list,
                "chart_pod_templates": chart_pod_templates, "mark_step": mark_step}
