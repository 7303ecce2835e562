# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""YAML documents in and out (Helm manifests), with libyaml's C parser and emitter when PyYAML
has them: a chart's manifest parses about ten times faster than with the pure-Python loader, and
a run parses several. The same safe schema either way."""

from __future__ import annotations

try:
    import yaml
    HAS_YAML = True
    YAMLError = yaml.YAMLError
    _LOADER = getattr(yaml, "CSafeLoader", None) or yaml.SafeLoader
    _DUMPER = getattr(yaml, "CSafeDumper", None) or yaml.SafeDumper
except ImportError:  # the callers say what is missing
    HAS_YAML = False
    YAMLError = ValueError
    _LOADER = _DUMPER = None


def load(text):
    return yaml.load(text, Loader=_LOADER)  # nosec B506 - a safe loader  # noqa: S506


def load_all(text):
    return yaml.load_all(text, Loader=_LOADER)  # nosec B506 - a safe loader  # noqa: S506


def dump(doc, **options):
    return yaml.dump(doc, Dumper=_DUMPER, **options)
