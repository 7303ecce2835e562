"""Deployments, StatefulSets and DaemonSets: rollout decisions and kubectl-style rollout restart."""
