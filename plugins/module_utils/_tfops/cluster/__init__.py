"""The read-only picture of an installation, its findings, the collection's own access, and acceptance with a real Pod."""
