"""The tensorfusion.ops lab: a real Kubernetes control plane as local processes.

Run ``python -m lab --help`` from the repository root.
"""
