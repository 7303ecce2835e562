"""The base every module stands on: typed errors, module glue, auth, the kube client, retry,
deadlines, watch-based waiting, predicates, durations, redaction."""
