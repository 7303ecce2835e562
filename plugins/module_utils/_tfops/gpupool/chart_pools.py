# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The chart owns the TensorFusionCluster, the pools step owns its pools.

TensorFusion's chart renders the TensorFusionCluster in the release, pool images and rolling
policy included. Helm patches a custom resource with a JSON merge patch from the old rendering to
the new one, and a merge patch replaces a list whole: any change of the rendered ``gpuPools``
makes the live pools the chart's again (reverting images, policy, autoUpdate flags set on the
live object) and starts a rollout at the chart's policy, outside the pools step and its window.

So the chart step renders through a post-renderer (this file run as a program) that puts the live
pool entries into the rendered TensorFusionCluster: the release's manifest then holds the live
pools, Helm's patch leaves them as they are, and a later upgrade reverts nothing. What the chart
itself rendered for the pools is recorded in an annotation (``CHART_POOLS``) and returned, so the
pools step can roll the chart's own changes (new default images) in the window, at the run's
policy, like images the user asked for.

This file is also the post-renderer: it must import nothing but the standard library and PyYAML.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
import re
import sys

try:
    import yaml
    HAS_YAML = True
    # libyaml's C loader and emitter when PyYAML has them (core/yamldoc.py does the same for the
    # modules: this file runs on its own as the post-renderer, so it imports nothing of ours).
    _LOADER = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    _DUMPER = getattr(yaml, "CSafeDumper", None) or yaml.SafeDumper
except ImportError:  # the post-renderer says so when it runs; the module checks earlier
    HAS_YAML = False

CLUSTER_KIND = "TensorFusionCluster"
CHART_POOLS = "ops.tensor-fusion.ai/chart-pools"
_DOC_SPLIT = re.compile(r"^---[ \t]*$", re.MULTILINE)

# componentConfig field -> gpupool_rollout option, per component: the chart's changes handed to
# the pools step, in the pools step's own terms.
COMPONENT_OPTIONS = {
    "hypervisor": {"image": "image", "vectorImage": "vector_image", "portNumber": "port_number",
                   "enableVector": "enable_vector", "podTemplate": "pod_template"},
    "worker": {"image": "image", "podTemplate": "pod_template"},
    "client": {"image": "image", "operatorEndpoint": "operator_endpoint",
               "remoteModeImage": "remote_mode_image", "embeddedModeImage": "embedded_mode_image",
               "patchToPod": "patch_to_pod", "patchToContainer": "patch_to_container",
               "patchToEmbeddedWorkerContainer": "patch_to_embedded_worker_container",
               "patchEmbeddedWorkerToPod": "patch_embedded_worker_to_pod"},
}


def is_cluster(doc):
    return isinstance(doc, dict) and doc.get("kind") == CLUSTER_KIND and \
        str(doc.get("apiVersion", "")).startswith("tensor-fusion.ai/")


def object_name(doc):
    return (doc.get("metadata") or {}).get("name")


def entries_by_name(cluster):
    return dict((entry.get("name"), entry) for entry in
                ((cluster or {}).get("spec") or {}).get("gpuPools") or [])


def _digest(value):
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def component_view(spec_template):
    """{component: {field: value}} of a pool's componentConfig as the record keeps it: a Pod
    template (whose env may hold a licence) only as a digest, so that neither the annotation nor
    a result or a diff ever carries its content."""
    config = (spec_template or {}).get("componentConfig") or {}
    view = {}
    for component, options in COMPONENT_OPTIONS.items():
        fields = config.get(component) or {}
        kept = dict((f, _digest(fields[f]) if f == "podTemplate" else fields[f])
                    for f in options if f in fields)
        if kept:
            view[component] = kept
    return view


def rendered_pools(cluster):
    """{entry name: component_view} of a TensorFusionCluster as rendered."""
    return dict((name, component_view(entry.get("specTemplate") or {}))
                for name, entry in entries_by_name(cluster).items())


def recorded_chart_pools(cluster):
    """What the chart rendered for the pools at the last chart step through the post-renderer,
    from the cluster's annotation; None when it was never rendered that way."""
    raw = ((cluster.get("metadata") or {}).get("annotations") or {}).get(CHART_POOLS)
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def carry_live(rendered, live):
    """The rendered TensorFusionCluster with the live pool entries in place of the chart's (by
    entry name), the live entries the chart does not render kept, new entries of the chart added,
    and the chart's own pool rendering recorded in the ``CHART_POOLS`` annotation."""
    out = copy.deepcopy(rendered)
    live_entries = entries_by_name(live)
    pools = []
    for entry in (out.get("spec") or {}).get("gpuPools") or []:
        pools.append(copy.deepcopy(live_entries.pop(entry.get("name"), entry)))
    pools.extend(copy.deepcopy(entry) for entry in live_entries.values())
    out.setdefault("spec", {})["gpuPools"] = pools
    annotations = out.setdefault("metadata", {}).setdefault("annotations", {}) or {}
    annotations[CHART_POOLS] = json.dumps(rendered_pools(rendered), sort_keys=True,
                                          separators=(",", ":"))
    out["metadata"]["annotations"] = annotations
    return out


def post_render(manifest_text, live_clusters):
    """(manifest, {cluster: {entry: specTemplate}} as the chart rendered it): every rendered
    TensorFusionCluster that exists live gets its live pools (``carry_live``); the other
    documents stay exactly as helm rendered them, byte for byte."""
    chunks = _DOC_SPLIT.split(manifest_text)
    out, chart = [], {}
    for chunk in chunks:
        try:
            doc = yaml.load(chunk, Loader=_LOADER) if chunk.strip() else None  # nosec B506  # noqa: S506
        except yaml.YAMLError:
            doc = None
        if is_cluster(doc) and object_name(doc) in live_clusters:
            chart[object_name(doc)] = rendered_pools(doc)
            chunk = "\n" + yaml.dump(carry_live(doc, live_clusters[object_name(doc)]),
                                     Dumper=_DUMPER, sort_keys=False)
        elif is_cluster(doc):
            chart[object_name(doc)] = rendered_pools(doc)
        out.append(chunk)
    return "---".join(out), chart


def chart_changes(previous, rendered):
    """{entry: {component: {option: value}}}: the component settings the chart renders
    differently now than before (both {entry: component_view}). A Pod template that moved is
    listed as ``pod_template_changed`` (its content stays out of results); new entries are not
    listed, the operator creates their pools from the rendering itself."""
    changes = {}
    for entry, after in sorted((rendered or {}).items()):
        if entry not in (previous or {}):
            continue
        before = previous[entry] or {}
        for component, options in COMPONENT_OPTIONS.items():
            old, new = before.get(component) or {}, (after or {}).get(component) or {}
            moved = dict((option, new[field]) for field, option in options.items()
                         if field in new and field != "podTemplate" and old.get(field) != new[field])
            if "podTemplate" in new and old.get("podTemplate") != new["podTemplate"]:
                moved["pod_template_changed"] = True
            if moved:
                changes.setdefault(entry, {})[component] = moved
    return changes


def pod_templates_changed(pool_changes):
    """{"<cluster>/<entry>": [components]} whose Pod template the new chart renders differently,
    from helm_release's chart_pool_changes ({cluster: chart_changes()}): the pools step does not
    roll them (their content, which may hold secrets, is never passed on)."""
    out = {}
    for cluster, entries in sorted((pool_changes or {}).items()):
        for entry, components in sorted((entries or {}).items()):
            changed = sorted(c for c, opts in (components or {}).items() if (opts or {}).get("pod_template_changed"))
            if changed:
                out["%s/%s" % (cluster, entry)] = changed
    return out


def previous_rendering(live_cluster, release_manifest_cluster):
    """What the chart rendered for the pools last time: the record of the last chart step through
    the post-renderer, else the release's manifest (then rendered by the chart alone)."""
    recorded = recorded_chart_pools(live_cluster or {})
    if recorded is not None:
        return recorded
    return rendered_pools(release_manifest_cluster or {})


PLUGIN_NAME = "tfops-keep-pools"


def program_source():
    """This file's source: written out as the post-renderer program (inside a module it is read
    from the module's payload)."""
    return inspect.getsource(sys.modules[__name__])


def install_post_renderer(directory, python, helm_major, live_clusters):
    """Write the post-renderer into ``directory`` (a private temporary folder): (the helm flags,
    the environment helm needs, the path where the chart's pool rendering will be). Helm 3 runs
    an executable; helm 4 runs post-renderer plugins only, found through HELM_PLUGINS."""
    program = os.path.join(directory, "tfops_post_render.py")
    with open(program, "w", encoding="utf-8") as handle:
        handle.write("#!%s\n%s" % (python, program_source()))
    os.chmod(program, 0o700)
    live = os.path.join(directory, "live-clusters.json")
    with open(live, "w", encoding="utf-8") as handle:
        json.dump(live_clusters, handle)
    chart_out = os.path.join(directory, "chart-pools.json")
    args = ["--post-renderer-args", live, "--post-renderer-args", chart_out]
    if int(helm_major) < 4:
        return ["--post-renderer", program] + args, {}, chart_out
    plugins = os.path.join(directory, "helm-plugins")
    plugin = os.path.join(plugins, PLUGIN_NAME)
    os.makedirs(plugin)
    with open(os.path.join(plugin, "plugin.yaml"), "w", encoding="utf-8") as handle:
        handle.write("apiVersion: v1\ntype: postrenderer/v1\nname: %s\nversion: 1.0.0\n"
                     "runtime: subprocess\nruntimeConfig:\n  platformCommand:\n"
                     "    - command: %s\n" % (PLUGIN_NAME, json.dumps(program)))
    return ["--post-renderer", PLUGIN_NAME] + args, {"HELM_PLUGINS": plugins}, chart_out


def main(argv):
    """``post-render LIVE_JSON CHART_OUT``: helm's rendering on stdin, the rendering with the live
    pools on stdout; the chart's own pool rendering written to CHART_OUT."""
    if not HAS_YAML:
        sys.stderr.write("tensorfusion.ops post-renderer: PyYAML is missing\n")
        return 2
    if len(argv) != 2:
        sys.stderr.write("usage: post-render LIVE_JSON CHART_OUT\n")
        return 2
    with open(argv[0], encoding="utf-8") as handle:
        live = json.load(handle)
    manifest, chart = post_render(sys.stdin.read(), live)
    with open(argv[1], "w", encoding="utf-8") as handle:
        json.dump(chart, handle)
    sys.stdout.write(manifest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
