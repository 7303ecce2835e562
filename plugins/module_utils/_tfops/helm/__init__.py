"""Helm: the CLI, releases, snapshot bundles (capture, store, sign) and restoring from them."""
