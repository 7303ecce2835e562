# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A chart repository's index (``<repository>/index.yaml``, as helm reads it): whether the version a
run pins is there, asked before the run takes its lock (runbook_inputs). The decisions are pure;
``fetch`` is one bounded HTTP GET."""

from __future__ import annotations

import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import TfopsError

MAX_BYTES = 32 * 1024 * 1024  # helm's own limit on an index is larger; a chart repository's is far smaller
TIMEOUT_SECONDS = 15
# An exact version (a constraint such as ~1.8 is helm's to resolve).
EXACT = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$")


def plain_chart_name(ref):
    """The chart's name when ``ref`` names a chart of the repository (not a path, a packaged chart or
    an oci:// reference, nor repo/name), else None."""
    if not isinstance(ref, str) or not re.match(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", ref):
        return None
    return ref


def versions_of(index, chart):
    """The versions the parsed ``index`` lists for ``chart`` (None: the index names no such chart)."""
    entries = (index or {}).get("entries") if isinstance(index, dict) else None
    if not isinstance(entries, dict) or chart not in entries:
        return None
    return [str(e.get("version")) for e in entries[chart] or [] if isinstance(e, dict) and e.get("version")]


def missing(index, chart, version, name="tfops_chart_version"):
    """Why ``version`` of ``chart`` cannot be installed from this index, or None (it can, or the
    version is a constraint that helm resolves)."""
    if not EXACT.match(str(version)):
        return None
    versions = versions_of(index, chart)
    if versions is None:
        return "tfops_chart: the chart repository's index has no chart %s" % chart
    if str(version) in versions or str(version).lstrip("v") in [v.lstrip("v") for v in versions]:
        return None
    shown = sorted(set(versions))[-10:]
    return "%s: %s is not a version of chart %s in the chart repository's index (it has %s)" % (
        name, version, chart, ", ".join(shown) or "none")


def fetch(repository, timeout=TIMEOUT_SECONDS):
    """The repository's index, parsed; TfopsError when it cannot be read."""
    from ansible.module_utils.urls import open_url
    import yaml

    url = repository.rstrip("/") + "/index.yaml"
    try:
        response = open_url(url, timeout=timeout, validate_certs=True, follow_redirects="safe")
        text = response.read(MAX_BYTES + 1)
    except Exception as exc:  # pylint: disable=broad-except  # any failure: the index is not known
        raise TfopsError("the chart repository's index %s cannot be read: %s" % (url, exc))
    if len(text) > MAX_BYTES:
        raise TfopsError("the chart repository's index %s is over %d bytes" % (url, MAX_BYTES))
    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        raise TfopsError("the chart repository's index %s is not YAML (%s)" % (url, type(exc).__name__))
