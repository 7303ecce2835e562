# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # Modules that only read: an API server outage is ridden out as the waits ride it out.
    DOCUMENTATION = r"""
options:
  retry_timeout:
    description:
      - Seconds during which a read that fails in a way that can heal (the API server refuses or
        resets connections while it restarts, answers 429 or 5xx, or denies for a moment right
        after it came back) is tried again, with capped exponential backoff; each outage ridden
        out becomes a warning. A failure that cannot heal (a missing permission, a wrong
        certificate, an object that does not exist) ends the task at once.
      - V(0) tries nothing again (a module with a C(deadline) option tries until that deadline).
      - The runbooks set it for every step that only reads.
    type: int
    default: 0
"""
