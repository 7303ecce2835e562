# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The text every module option and runbook variable may hold, whatever else its own check asks:
a name, a path, an image or a code is one line of printable text of at most MAX_TEXT characters
(it reaches log lines, reports and object fields; a line break there forges lines); the few
options that hold prose or an expression (FREE_TEXT) may span lines, up to MAX_FREE_TEXT.

Mappings carry documents (Helm values, Secret content) and ``raw`` options are their own
checks'; a ``no_log`` option is never looked at here (its refusal would have to show it)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

MAX_TEXT = 4096
MAX_FREE_TEXT = 65536
# Options (by their own name, at any depth) that hold prose, an expression, or a document as
# text: gates' and rules' expressions and descriptions, a Prometheus query, a --set value.
FREE_TEXT = frozenset(("expression", "description", "query", "value"))


def check(value, name, free=False):
    """Refuse text that is too long or, unless ``free``, not one printable line."""
    if not isinstance(value, str):
        return value
    limit = MAX_FREE_TEXT if free else MAX_TEXT
    if len(value) > limit:
        raise InvalidInput("%s is %d characters long; text is at most %d" % (name, len(value), limit))
    allowed = "\n\r\t" if free else ""
    if any(not ch.isprintable() and ch not in allowed for ch in value):
        raise InvalidInput("%s holds a line break or another control character; one line of text is "
                           "expected" % name if not free else
                           "%s holds a control character other than a line break or a tab" % name)
    return value


def problems(spec, params, prefix=""):
    """Every refusal (text) of ``params`` against an argument spec: its str and path options, the
    str and path elements of its lists, its suboptions at any depth."""
    found = []
    for option, entry in spec.items():
        value = (params or {}).get(option)
        if value is None or entry.get("no_log"):
            continue
        kind, name, free = entry.get("type", "str"), prefix + option, option in FREE_TEXT
        try:
            if kind in ("str", "path"):
                check(value, name, free)
            elif kind == "list" and entry.get("elements") in ("str", "path"):
                for index, item in enumerate(value or []):
                    check(item, "%s[%d]" % (name, index), free)
        except InvalidInput as exc:
            found.append(exc.msg)
        sub = entry.get("options")
        if sub and kind == "dict" and isinstance(value, dict):
            found += problems(sub, value, name + ".")
        elif sub and kind == "list" and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    found += problems(sub, item, "%s[%d]." % (name, index))
    return found
