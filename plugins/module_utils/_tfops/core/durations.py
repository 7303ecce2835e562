# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Go durations (``time.ParseDuration``), the one parser of the collection: the GPUPool's
``batchInterval`` and ``maxDuration`` are Go durations, and so are the window options."""

from __future__ import annotations

import re

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

# A number (``1``, ``1.5``, ``.5``, ``5.``) and a unit; Go accepts both spellings of micro.
_PART = re.compile(r"([0-9]+\.?[0-9]*|\.[0-9]+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)")
_UNIT = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "\u03bcs": 1e-6, "ms": 1e-3, "s": 1.0,
         "m": 60.0, "h": 3600.0}
EXAMPLES = "such as 1s, 90s, 1m30s or 1.5h (units h, m, s, ms, us, ns)"


def go_duration_seconds(value, what="duration"):
    """Seconds of a Go duration; ``+`` and a bare ``0`` are allowed as in Go. A negative one is
    refused with its own message: nothing this collection times can run backwards."""
    if isinstance(value, bool) or not isinstance(value, str):
        raise InvalidInput("%s: %r is not a Go duration %s" % (what, value, EXAMPLES))
    text = value.strip()
    if text != value or not text:
        raise InvalidInput("%s: %r is not a Go duration %s" % (what, value, EXAMPLES))
    sign, body = (text[0], text[1:]) if text[0] in "+-" else ("", text)
    if body == "0":
        seconds = 0.0
    else:
        pos, seconds = 0, 0.0
        while pos < len(body) or pos == 0:
            match = _PART.match(body, pos)
            if not match:
                raise InvalidInput("%s: %r is not a Go duration %s" % (what, value, EXAMPLES))
            seconds += float(match.group(1)) * _UNIT[match.group(2)]
            pos = match.end()
    if sign == "-" and seconds:
        raise InvalidInput("%s: %r is negative; it must be 0 or more" % (what, value))
    return seconds
