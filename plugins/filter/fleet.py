# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a cluster of a fleet workflow's wave hands on to the waves after it (runbook/fleet.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core import values
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import fleet


def fleet_outcome(status, wave, host):
    """The set_stats data of one cluster of wave ``wave``: tfops_fleet_passed or tfops_fleet_failed
    ({} when the run is no wave of a fleet workflow: ``wave`` unset, null or blank)."""
    if wave in (None, ""):
        return {}
    try:
        number = values.whole_number(wave, "tfops_fleet_wave", 0)
    except InvalidInput as exc:
        raise AnsibleFilterError(exc.msg)
    return fleet.outcome(status, number, host)


class FilterModule:
    def filters(self):
        return {"fleet_outcome": fleet_outcome}
