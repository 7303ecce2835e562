# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the runbooks and their roles decide between two module calls (runbook/decisions.py)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.core.errors import InvalidInput
from ansible_collections.tensorfusion.ops.plugins.module_utils._tfops.runbook import decisions


def _checked(decide, *args):
    """A decision's refusal (a time that is not ISO 8601, a component the result lacks) as a filter's error."""
    try:
        return decide(*args)
    except InvalidInput as exc:
        raise AnsibleFilterError(exc.msg)
    except (KeyError, TypeError, ValueError) as exc:
        raise AnsibleFilterError("%s: %s: %s" % (decide.__name__, type(exc).__name__, exc))


def run_deadline(window_deadline, now, timeout):
    return _checked(decisions.run_deadline, window_deadline, now, timeout)


def lock_renewal_due(expires, ttl, now):
    return _checked(decisions.lock_renewal_due, expires, ttl, now)


def run_resumable(pool_results):
    return _checked(decisions.resumable, pool_results)


def change_unverified(error, verify_info=None, verify_acceptance=None):
    return _checked(decisions.unverified, error, verify_info, verify_acceptance)


def rbac_runbooks(playbook, rollback_on_failure=True):
    return _checked(decisions.rbac_runbooks, playbook, rollback_on_failure)


def rollback_bundle(given, planned=None, handed_run=None):
    return _checked(decisions.rollback_bundle, given, planned, handed_run)


def nothing_to_roll_back(given, handed_run=None):
    return _checked(decisions.nothing_to_roll_back, given, handed_run)


def rollout_step(batch, watch, target, shown, check_mode=False):
    return _checked(decisions.rollout_step, batch, watch, target, shown, check_mode)


def split_findings(findings, downgrade_codes=None, asked=None):
    return _checked(decisions.split_findings, findings, downgrade_codes, asked)


class FilterModule:
    def filters(self):
        return {"run_deadline": run_deadline, "lock_renewal_due": lock_renewal_due, "run_resumable": run_resumable,
                "change_unverified": change_unverified, "rbac_runbooks": rbac_runbooks,
                "rollback_bundle": rollback_bundle, "nothing_to_roll_back": nothing_to_roll_back,
                "rollout_step": rollout_step, "split_findings": split_findings}
