# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typed errors of the collection, all of them: the base ones first, then each sub-package's own.
Raised in module_utils; turned into fail_json only in main() (core/module.py)."""

from __future__ import annotations


class TfopsError(Exception):
    """Base of every error the collection raises on purpose; ``details`` go into the result."""

    def __init__(self, msg, **details):
        super().__init__(msg)
        self.msg = msg
        self.details = details


class MissingDependency(TfopsError):
    """A Python library the module needs is not installed where the module runs."""


class AuthError(TfopsError):
    """No usable credentials, or the given ones are inconsistent."""


class InvalidInput(TfopsError):
    """The task's arguments cannot be carried out; nothing was written."""


class ApiError(TfopsError):
    """The Kubernetes API refused or failed a request."""

    def __init__(self, msg, status=None, reason=None, verb=None, resource=None, **details):
        super().__init__(msg, status=status, reason=reason, verb=verb, resource=resource, **details)
        self.status = status
        self.reason = reason
        self.verb = verb
        self.resource = resource


class Forbidden(ApiError):
    """RBAC denied a request: the message names the verb and the resource."""


class WaitTimeout(TfopsError):
    """A wait reached its deadline; the message says what is stuck and why."""


class RolloutFailed(TfopsError):
    """A rollout that cannot finish by waiting longer (a Deployment past its progress deadline):
    the wait ends at once with the cause instead of at its deadline."""


class AcceptanceFailed(TfopsError):
    """The acceptance Pod ran, but a check of what the webhook injected or of its readiness
    failed: ``checks`` in the result say which."""


# ---- GPU-pool rollouts (gpupool/) --------------------------------------------
class GateFailed(TfopsError):
    """A batch's health gate failed: the pool was paused before any further node rolled."""


class BusinessChangesPaused(TfopsError):
    """Business workloads changed their Pod templates during the rollout at the scale the
    business_changes gate pauses at: the pool was paused as at a deadline (resumable)."""


class Stalled(TfopsError):
    """Progress did not move for stall_timeout: something (a node, a Pod) is stuck."""


class Superseded(TfopsError):
    """Another change replaced the configuration this task was rolling out."""


# ---- Secret rotation (secret/) -----------------------------------------------
class VerifyFailed(TfopsError):
    """A consumer's Pods do not run on the new Secret."""


class RotationFailed(TfopsError):
    """A step failed; references and content were put back and the old Secret kept."""


# ---- Run reports (report/) ---------------------------------------------------
class ReportNotWritten(TfopsError):
    """The report or the plan could not be written where the task asked."""


# ---- Change plans (changeplan/) ----------------------------------------------
class PlanRefused(InvalidInput):
    """A saved plan that may not be applied (expired, altered, made elsewhere, or the cluster or
    the inputs drifted since): nothing was written. ``details['drift']`` lists what differs."""


# ---- Maintenance windows and the lock (maintenance/) -------------------------
class LockHeld(TfopsError):
    """Someone else holds the lock and keeps renewing it."""


class NotLockHolder(TfopsError):
    """Release of a lock that another holder holds."""


class OutsideWindow(TfopsError):
    """Now is not inside the maintenance window (or too close to its end to start work)."""


class LockLost(TfopsError):
    """The maintenance lock this run took is no longer its own: nothing more is written."""


class ControllerGone(TfopsError):
    """The ansible-playbook process that started this module is gone (killed): nothing more is
    written."""


# ---- Helm and snapshot bundles (helm/) ---------------------------------------
class HelmError(TfopsError):
    """helm exited with an error; the message carries its (masked) stderr."""


class ReleaseNotFound(TfopsError):
    """The release has no revision in the namespace."""


class PendingRelease(TfopsError):
    """The release's last revision is pending-*: another operation is (or was) in progress."""


class UnusableBundle(InvalidInput):
    """A bundle that fails verification (tampered, incomplete, another cluster)."""
