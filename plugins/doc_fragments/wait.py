# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # A module with other defaults names only the option and its default; the text stays here.
    # (Each fragment is one string literal: ansible-test's yamllint reads them as literals.)
    # A module that waits unless told not to takes both: tensorfusion.ops.wait and
    # tensorfusion.ops.wait.TIMEOUT.
    DOCUMENTATION = r"""
options:
  wait:
    description:
      - Whether to wait until the change is done. Waiting follows a watch, not a poll.
    type: bool
    default: true
"""

    # How long a wait may last: every module that waits (with or without O(wait) to turn it off).
    TIMEOUT = r"""
options:
  wait_timeout:
    description:
      - How many seconds to wait at most.
    type: int
    default: 600
  deadline:
    description:
      - An absolute time (ISO 8601, for example the end of a maintenance window as returned by
        M(tensorfusion.ops.maintenance_window)) after which no wait goes on.
      - The earlier of O(deadline) and O(wait_timeout) ends the wait; a wait that ends this way
        fails and says what it was waiting for and what was still missing.
      - A deadline that has already passed is refused before anything is written.
    type: str
"""
