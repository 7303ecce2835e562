"""A runbook's tfops_* variables: their one specification, checked all at once before anything is written; the cluster's part read only."""
