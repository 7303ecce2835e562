# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # What each attribute means, said once; a module gives its own support and details. Every
    # module runs in check mode (core/module.py), so its support is said here; a module says how.
    DOCUMENTATION = r"""
options: {}
attributes:
  check_mode:
    description:
      - Runs in check mode and says whether it would change anything, without changing it.
    support: full
  diff_mode:
    description:
      - Returns what changed (or would change, in check mode) as C(diff), exactly when diff mode
        is on (C(--diff)); never a Secret value.
  idempotent:
    description:
      - Run again with the same arguments on an unchanged cluster, reports C(changed=false) and
        writes nothing.
  platform:
    description: What the module runs against.
    support: N/A
"""

    # The support and details of a module that only reads (after DOCUMENTATION).
    READ_ONLY = r"""
options: {}
attributes:
  check_mode:
    details: Only reads, so it runs the same in check mode.
  diff_mode:
    support: none
    details: Changes nothing, so there is no diff.
  idempotent:
    support: full
    details: Only reads.
"""
