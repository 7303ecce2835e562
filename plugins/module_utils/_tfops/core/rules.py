# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Findings and the user's own rules over a gathered picture: a finding's shape and severities,
and rules written as JMESPath expressions (checked, then run), shared by tf_cluster_info's
findings (cluster/findings.py) and the health gates between a pool's batches (gpupool/gates.py)."""

from __future__ import annotations

from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput

SEVERITIES = ("blocking", "warning", "info")

try:
    import jmespath
    HAS_JMESPATH = True
except ImportError:  # only user rules need it; reported when they are used
    HAS_JMESPATH = False


def finding(code, severity, obj, message):
    return {"code": code, "severity": severity, "object": obj, "message": message}


def validate_rules(rules):
    for rule in rules or []:
        if rule.get("severity") not in SEVERITIES:
            raise InvalidInput("rule %s: severity must be one of %s" % (rule.get("code"), ", ".join(SEVERITIES)))
        if not HAS_JMESPATH:
            raise InvalidInput("custom rules need the Python library jmespath")
        try:
            jmespath.compile(rule["expression"])
        except jmespath.exceptions.JMESPathError as exc:
            raise InvalidInput("rule %s: %r is not a JMESPath expression: %s" % (rule["code"], rule["expression"], exc))


def custom_findings(data, rules):
    """User rules: a JMESPath expression over the gathered data. A list result yields one finding
    per item (its ``name`` names the object); a true scalar yields one finding."""
    out = []
    for rule in rules or []:
        result = jmespath.search(rule["expression"], data)
        items = result if isinstance(result, list) else ([result] if result else [])
        for item in items:
            name = item.get("name") if isinstance(item, dict) else str(item)
            out.append(finding(rule["code"], rule["severity"], name or rule["code"],
                               rule.get("description") or "rule %s matched" % rule["code"]))
    return out
