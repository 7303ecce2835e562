# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain values checked by name: what a value is in words (a message never shows a value that may
be secret), strict booleans and whole numbers as a survey or ``-e`` gives them (text), and lists
given as comma-separated text. Each check raises InvalidInput naming the option or variable."""

from __future__ import annotations

import copy

from ansible.module_utils.parsing.convert_bool import BOOLEANS_FALSE, BOOLEANS_TRUE

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput


def kind_of(value):
    """``a mapping``, ``a list``, ``a string``, ... - the type of a value, never the value."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "a number"
    return "a %s" % type(value).__name__


def boolean(value, name):
    """True or False from a boolean or its usual spellings (yes/no, true/false, on/off, 1/0);
    anything else (``perhaps``) is refused instead of read as false."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        text = value.strip().lower() if isinstance(value, str) else value
        if text in BOOLEANS_TRUE:
            return True
        if text in BOOLEANS_FALSE:
            return False
    raise InvalidInput("%s: %r is not a boolean (true or false)" % (name, value))


def whole_number(value, name, low=None, high=None, unit=""):
    """An int from an int or its decimal text (a survey answer), within [low, high]; a boolean,
    a fraction or other text is refused instead of turned into 0 or 1."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    span = _span(low, high, unit)
    if number is None:
        raise InvalidInput("%s: %r is not a whole number%s" % (name, value, " (%s)" % span if span else ""))
    if (low is not None and number < low) or (high is not None and number > high):
        raise InvalidInput("%s: %s is out of range (%s)" % (name, number, span))
    return number


def _span(low, high, unit):
    if low is not None and high is not None:
        text = "%d-%d" % (low, high)
    elif low is not None:
        text = "%d or more" % low
    elif high is not None:
        text = "%d or less" % high
    else:
        return unit.strip()
    return text + unit


def text_list(value, name):
    """A list as it is, or text split at commas and newlines (a survey answer); None is []."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [v for v in value if v not in (None, "")]
    if isinstance(value, str):
        return [part.strip() for part in value.replace("\n", ",").split(",") if part.strip()]
    raise InvalidInput("%s: %s, not a list (or comma-separated text)" % (name, kind_of(value)))


def mapping(value, name, example=""):
    if not isinstance(value, dict):
        raise InvalidInput("%s: %s, not a mapping%s" % (name, kind_of(value), example))
    return value


def with_spec(spec, value, name, **rules):
    """``value`` (a mapping) checked against a module's argument spec (``rules``: its
    mutually_exclusive, required_together, ...), as AnsibleModule checks its options: the checked
    value with the spec's defaults, or InvalidInput with every refusal, after ``name:`` when given.
    ``value`` itself is not changed."""
    # Imported here: on the controller ansible-core's argument spec loads YAML, which the filters
    # that use this file must not cost every task (tests/unit/plugins/filter/test_runbook.py).
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
    from ansible.module_utils.errors import UnsupportedError
    try:
        result = ArgumentSpecValidator(spec, **rules).validate(copy.deepcopy(value))
    except (OverflowError, ValueError, TypeError) as exc:  # a number past any int (inf, 1e400), ...
        raise InvalidInput("%s: a value that is not of its kind (%s)" % (name or "the value", exc))
    if result.error_messages:
        # ansible-core's message of an unknown option starts with its name: say what it is.
        text = "; ".join(("unknown key %s" % error.msg if isinstance(error, UnsupportedError) else error.msg)
                         for error in result.errors)
        raise InvalidInput("%s: %s" % (name, text) if name else text)
    return result.validated_parameters


def pruned(value):
    """A mapping without the None that a spec fills in for every option left out."""
    if isinstance(value, dict):
        return dict((k, pruned(v)) for k, v in value.items() if v is not None)
    return value


def describe_changes(changes):
    """``hypervisor.image a -> b, batchPercentage 34 -> 17, worker.podTemplate changed`` (a Pod
    template is named, never shown): what a change or restore sets, from and to, of
    ``[{field, from, to} or {field, hidden: true}]``."""
    return ", ".join("%s changed" % c["field"] if c.get("hidden") else
                     "%s %s -> %s" % (c["field"], _shown(c.get("from")), _shown(c.get("to"))) for c in changes)


def _shown(value):
    return "unset" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
