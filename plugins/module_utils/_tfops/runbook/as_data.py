# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Input is data, never code: which runbook variables carry a template (Jinja) as they were
given, looked at before anything renders them. A value marked unsafe (``!unsafe``, as AWX marks
survey answers) is text Ansible never renders, and passes. Pure: the caller says what is unsafe."""

from __future__ import annotations

# What starts a Jinja expression, statement or comment: Ansible renders a string holding any.
MARKERS = ("{{", "{%", "{#")
MAX_DEPTH = 32


def holds_template(value, unsafe, depth=0):
    """Whether ``value`` (strings, mappings and lists, keys included) holds a template that Ansible
    would render; ``unsafe(v)`` tells a value marked unsafe (never rendered, nor what it holds)."""
    if unsafe(value) or depth > MAX_DEPTH:
        return False
    if isinstance(value, str):
        return any(marker in value for marker in MARKERS)
    if isinstance(value, dict):
        return any(holds_template(k, unsafe, depth + 1) or holds_template(v, unsafe, depth + 1)
                   for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(holds_template(v, unsafe, depth + 1) for v in value)
    return False


def templated(given, unsafe):
    """The names, sorted, of the variables in ``given`` ({name: raw value}) that hold a template."""
    return sorted(name for name, value in given.items() if holds_template(value, unsafe))


def refusal(names):
    """The message of a run refused for ``names``."""
    return ("%s: %s Jinja ('{{', '{%%' or '{#'), which a runbook never renders from its inputs "
            "(input is data, never code; nothing was rendered or written): give the value itself, or "
            "mark it !unsafe (as AWX marks survey answers) to pass the text as written" % (
                ", ".join(names), "holds" if len(names) == 1 else "hold"))
