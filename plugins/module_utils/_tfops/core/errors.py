# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Typed errors of the collection. Raised in module_utils; turned into fail_json only in main()."""

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
