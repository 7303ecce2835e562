# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment:
    # The Helm release a module acts on, and the helm it runs (helm_release, helm_snapshot).
    DOCUMENTATION = r"""
options:
  name:
    description: Release name.
    type: str
    default: tensor-fusion-sys
    aliases: [release_name]
  namespace:
    description: Release namespace.
    type: str
    default: tensor-fusion-sys
    aliases: [release_namespace]
  binary_path:
    description: Path of the helm binary; C(helm) on E(PATH) when left out.
    type: path
"""
