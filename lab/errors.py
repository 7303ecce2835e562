"""The lab's errors, in a module of their own so that every part of the lab (the cluster core,
the installer, the add-ons) can raise them without importing one another."""


class LabError(RuntimeError):
    """The lab could not be brought up or down; the message says which part and why."""


class AddonError(LabError):
    """An add-on of the lab failed; ``addon`` names it and the message starts with its name."""

    def __init__(self, addon: str, message: str):
        super().__init__(message)
        self.addon = addon


class InstallError(RuntimeError):
    """A step of the installation (packages, the kube-apiserver build, helm) failed; the message
    says which and why."""
