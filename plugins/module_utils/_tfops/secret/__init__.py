"""Secret rotation: the plan, the consumers and their references, the Helm-values consumer and the task."""
