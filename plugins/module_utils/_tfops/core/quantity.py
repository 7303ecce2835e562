# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes resource quantities in their canonical form, as Go's ``resource.Quantity`` writes
them once read: ``1000m`` is ``1``, ``1024Mi`` is ``1Gi``, ``0.5`` is ``500m``, ``1000`` is ``1k``.

The operator hashes a pod template after reading it into Go's types (docs/operator-behaviour.md
3.1), so two templates whose quantities differ only in how they are written have one hash and
start no rollout. ``canonical_pod_spec`` rewrites the quantities of a pod spec (containers',
init and ephemeral containers' and the Pod's resources, ``overhead``, ``emptyDir.sizeLimit``, an
ephemeral volume's claim) the same way. Pure."""

from __future__ import annotations

import math
import re
from fractions import Fraction

_QUANTITY = re.compile(r"^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:(Ki|Mi|Gi|Ti|Pi|Ei)|([numkMGTPE]?)|[eE]([+-]?[0-9]+))$")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = dict((e, s) for s, e in _DECIMAL.items())
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"


def parse(text):
    """(value as a Fraction, format) of a quantity, or None when it is not one."""
    if isinstance(text, bool) or not isinstance(text, (str, int, float)):
        return None
    match = _QUANTITY.match(str(text).strip())
    if not match:
        return None
    sign, number, binary, decimal, exponent = match.groups()
    value = Fraction(number)
    if binary:
        value, fmt = value * 1024 ** _BINARY.index(binary), BINARY_SI
    elif exponent is not None:
        value, fmt = value * Fraction(10) ** int(exponent), DECIMAL_EXPONENT
    else:
        value, fmt = value * Fraction(10) ** _DECIMAL[decimal], DECIMAL_SI
    return (-value if sign == "-" else value), fmt


def canonical(text):
    """The canonical text of a quantity; anything that is not one comes back as it was."""
    parsed = parse(text)
    if parsed is None:
        return text
    value, fmt = parsed
    if value == 0:
        return "0"
    if fmt == BINARY_SI and (abs(value) < 1024 or value.denominator != 1):
        fmt = DECIMAL_SI  # Go shows these as decimal rather than round them
    sign = "-" if value < 0 else ""
    value = abs(value)
    if fmt == BINARY_SI:
        number, power = int(value), 0
        while number % 1024 == 0 and power < len(_BINARY) - 1:
            number, power = number // 1024, power + 1
        return "%s%d%s" % (sign, number, _BINARY[power])
    # Nano is the finest a quantity keeps: finer values are rounded up.
    number, exponent = int(math.ceil(value * 10 ** 9)), -9
    while number % 1000 == 0 and number:
        number, exponent = number // 1000, exponent + 3
    if fmt == DECIMAL_EXPONENT:
        return "%s%d%s" % (sign, number, "e%d" % exponent if exponent else "")
    suffix = _DECIMAL_SUFFIX.get(exponent)
    return "%s%d%s" % (sign, number, suffix if suffix is not None else "e%d" % exponent)


def _canonical_map(mapping):
    return dict((k, canonical(v)) for k, v in mapping.items()) if isinstance(mapping, dict) else mapping


def _resources(resources):
    if not isinstance(resources, dict):
        return resources
    return dict(resources, **dict((k, _canonical_map(resources[k])) for k in ("limits", "requests")
                                  if k in resources))


def _container(container):
    if not isinstance(container, dict) or "resources" not in container:
        return container
    return dict(container, resources=_resources(container["resources"]))


def _volume(volume):
    if not isinstance(volume, dict):
        return volume
    out = dict(volume)
    if isinstance(out.get("emptyDir"), dict) and "sizeLimit" in out["emptyDir"]:
        out["emptyDir"] = dict(out["emptyDir"], sizeLimit=canonical(out["emptyDir"]["sizeLimit"]))
    claim = ((out.get("ephemeral") or {}).get("volumeClaimTemplate") or {}).get("spec")
    if isinstance(claim, dict) and "resources" in claim:
        template = dict(out["ephemeral"]["volumeClaimTemplate"], spec=dict(claim, resources=_resources(claim["resources"])))
        out["ephemeral"] = dict(out["ephemeral"], volumeClaimTemplate=template)
    return out


def canonical_pod_spec(spec):
    """``spec`` (a pod spec, a dict) with every quantity in its canonical form; not changed in place."""
    if not isinstance(spec, dict):
        return spec
    out = dict(spec)
    for key in ("containers", "initContainers", "ephemeralContainers"):
        if isinstance(out.get(key), list):
            out[key] = [_container(c) for c in out[key]]
    if isinstance(out.get("volumes"), list):
        out["volumes"] = [_volume(v) for v in out["volumes"]]
    if "overhead" in out:
        out["overhead"] = _canonical_map(out["overhead"])
    if "resources" in out:
        out["resources"] = _resources(out["resources"])
    return out
