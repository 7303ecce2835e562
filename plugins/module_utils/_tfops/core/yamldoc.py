# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""YAML documents in and out (Helm manifests), with libyaml's C parser and emitter when PyYAML
has them: a chart's manifest parses about ten times faster than with the pure-Python loader, and
a run parses several. The same safe schema either way."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

# A YAML input file on the controller larger than this is none of the files this collection reads
# (a chart's own values.yaml, a kubeconfig: tens of kB).
MAX_FILE_BYTES = 4 * 1024 * 1024

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


def load_file(path, what="file"):
    """The YAML document in the controller's file ``path`` (``~`` expanded), read at most
    MAX_FILE_BYTES of it. A file that is missing, unreadable, too large or not YAML is an
    InvalidInput that says so and where the YAML breaks (line, column), never its content (it
    may be any file a survey answer names, /etc/shadow)."""
    import os

    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.isfile(full):
        raise InvalidInput("%s is not a file on the controller" % path)
    try:
        with open(full, "rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise InvalidInput("%s cannot be read: %s" % (path, exc.strerror))
    if len(raw) > MAX_FILE_BYTES:
        raise InvalidInput("%s is over %d bytes: not a %s" % (path, MAX_FILE_BYTES, what))
    try:
        return load(raw)
    except YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise InvalidInput("%s is not YAML%s (its content is not shown)" % (
            path, " (line %d, column %d)" % (mark.line + 1, mark.column + 1) if mark else ""))
