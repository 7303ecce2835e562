"""GPU-pool component rollouts through the TensorFusionCluster: the plan, editing the cluster, watching pools, health gates and the task."""
