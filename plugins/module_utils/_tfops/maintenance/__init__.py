"""Maintenance windows, the maintenance lock and fencing a run by that lock."""
