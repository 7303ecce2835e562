# -*- coding: utf-8 -*-
# Copyright (c) tensorfusion.ops contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a runbook variable may name a file or folder on the controller (issue 46: a survey
answer of ``../../etc/shadow`` read the controller's files into the cluster).

A path is resolved (``~``, ``..``, symbolic links) before it is compared, and it counts only
when it lies in one of the folders its kind allows:

- files read (values files, a chart, a plan, a snapshot bundle, helm's TLS files): the project
  (the playbook's folder and ansible-playbook's working directory), the runbook's own folders
  (tfops_snapshot_dir, tfops_artifacts_dir);
- a kubeconfig file: those, ``~/.kube`` and the folders of the files that KUBECONFIG and
  K8S_AUTH_KUBECONFIG name (AWX's Kubernetes credential sets the latter);
- folders written (reports, snapshots, a plan): the project and the home folder;
- programs run (helm, the modules' Python): the folders of PATH, the project and the home folder,
  and only a program named like what it stands for (helm..., python...).

TFOPS_ALLOWED_PATHS, in the controller's environment (``:``-separated folders), adds folders for
every kind: the opt-in of whoever runs the controller (an AWX administrator sets it in the
execution environment or a credential's injector), never of a survey's answers. ``/`` never
counts as a folder here. Pure but for resolving paths and reading the environment it is given."""

from __future__ import annotations

import os

ALLOWED_ENV = "TFOPS_ALLOWED_PATHS"
READ, KUBECONFIG, WRITE, RUN = "read", "kubeconfig", "write", "run"
# What a program a variable names must be called (its name, without the folder).
PROGRAM_NAMES = {"tfops_helm_binary": ("helm",), "tfops_python_interpreter": ("python",)}


def resolved(path, base=None):
    """``path`` as the file system sees it: ``~`` expanded, relative to ``base`` (else the working
    directory), ``..`` and symbolic links resolved."""
    path = os.path.expanduser(str(path))
    if base and not os.path.isabs(path):
        path = os.path.join(base, path)
    return os.path.realpath(path)


def within(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


class Places:
    """The folders each kind of path may name (resolved; ``/`` left out), and why each counts."""

    def __init__(self, project=(), environ=None, snapshot_dir=None, artifacts_dir=None):
        environ = os.environ if environ is None else environ
        home = os.path.expanduser("~")
        self.folders = {READ: [], KUBECONFIG: [], WRITE: [], RUN: []}
        for folder in project:
            self._add((READ, KUBECONFIG, WRITE, RUN), folder, "the project")
        for name, folder in (("tfops_snapshot_dir", snapshot_dir), ("tfops_artifacts_dir", artifacts_dir)):
            if folder:
                self._add((READ, KUBECONFIG), folder, name)
        self._add((KUBECONFIG,), os.path.join(home, ".kube"), "~/.kube")
        for name in ("KUBECONFIG", "K8S_AUTH_KUBECONFIG"):
            for part in filter(None, (environ.get(name) or "").split(os.pathsep)):
                self._add((KUBECONFIG,), os.path.dirname(resolved(part)), "the folder of %s" % name)
        self._add((WRITE, RUN), home, "the home folder")
        for folder in filter(None, (environ.get("PATH") or "").split(os.pathsep)):
            self._add((RUN,), folder, "PATH")
        for folder in filter(None, (environ.get(ALLOWED_ENV) or "").split(os.pathsep)):
            self._add((READ, KUBECONFIG, WRITE, RUN), folder, ALLOWED_ENV)

    def _add(self, kinds, folder, why):
        folder = resolved(folder)
        if folder == os.sep:
            return
        for kind in kinds:
            if folder not in [f for f, _w in self.folders[kind]]:
                self.folders[kind].append((folder, why))

    def problem(self, kind, path, name, base=None):
        """Why ``path`` (as given in variable ``name``) may not be named, or None. A program's
        folder is resolved, not its name: a PATH entry may be a link to where helm is installed."""
        if kind == RUN:
            full = os.path.join(resolved(os.path.dirname(os.path.expanduser(str(path))) or ".", base),
                                os.path.basename(str(path)))
        else:
            full = resolved(path, base)
        if any(within(full, folder) for folder, _why in self.folders[kind]):
            return self._name_problem(name, path)
        shown = ", ".join("%s (%s)" % (folder, why) for folder, why in self.folders[kind][:6]) or "none"
        return ("%s: %s%s is outside the folders a runbook may %s: %s; a folder of the controller's "
                "environment variable %s counts too (set by whoever runs the controller, never by a "
                "survey)" % (name, path, "" if full == str(path) else " (%s)" % full,
                             {READ: "read files from", KUBECONFIG: "read a kubeconfig from",
                              WRITE: "write to", RUN: "run a program from"}[kind], shown, ALLOWED_ENV))

    @staticmethod
    def _name_problem(name, path):
        names = PROGRAM_NAMES.get(name)
        base = os.path.basename(str(path))
        if names and not base.startswith(names):
            return "%s: %s is not %s (its name does not begin with %s)" % (
                name, path, names[0], " or ".join(names))
        return None
