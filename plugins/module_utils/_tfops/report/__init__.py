"""The record of a runbook run: built from the steps' results, rendered, and stored in the cluster."""
