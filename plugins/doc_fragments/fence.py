# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  fence:
    description:
      - The maintenance lock (see M(tensorfusion.ops.maintenance_lock)) of the run this task is
        part of. The runbooks set it for every task they run under their lock.
      - Before each write the module checks that the Lease still names O(fence.holder), and while
        it waits it renews the Lease (every third of its TTL). When the lock is no longer this
        run's (released by force, taken over), or the C(ansible-playbook) process that started the
        module is gone (killed; its worker and module live on), the module stops before its next
        write and fails saying why.
      - The check is a read before each write, not a server-side precondition.
      - Ignored in check mode (nothing is written; a check-mode run takes no lock).
    type: dict
    suboptions:
      namespace:
        description: The Lease's namespace.
        type: str
        required: true
      name:
        description: The Lease's name.
        type: str
        required: true
      holder:
        description: The holder identity of this run (RV(tensorfusion.ops.maintenance_lock#module:holder)).
        type: str
        required: true
"""
