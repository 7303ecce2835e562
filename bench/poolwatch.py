"""The GPUPools' componentStatus as the API server shows it, recorded from a watch, in the form of
the double's log (bench/oplog.py): for an operator that logs no such lines, TensorFusion's own.

Each change of a component's (hash, progress, synced) is one write, ``sent`` and ``acked`` both
the time the watch delivered it: later than the operator's write by the watch's latency, the
same for a campaign's first and last write, so a campaign's span is as long."""
import threading
import time

from kubernetes import client, watch

GROUP, VERSION = "tensor-fusion.ai", "v1"
COMPONENTS = ("hypervisor", "worker", "client")


class PoolStatusRecorder:
    def __init__(self, api_client):
        self.co = client.CustomObjectsApi(api_client)
        self.writes = []
        self.last = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.stopped.set()

    def status_writes(self):
        return list(self.writes)

    def _record(self, pool):
        now = time.time()
        status = ((pool.get("status") or {}).get("componentStatus") or {})
        for comp in COMPONENTS:
            seen = (status.get(comp, ""), int(status.get("%sUpdateProgress" % comp) or 0),
                    bool(status.get("%sConfigSynced" % comp)))
            key = (pool["metadata"]["name"], comp)
            if self.last.get(key) != seen:
                self.last[key] = seen
                self.writes.append({"pool": key[0], "component": comp, "hash": seen[0], "progress": seen[1],
                                    "synced": seen[2], "sent": now, "acked": now})

    def _run(self):
        while not self.stopped.is_set():
            try:
                listing = self.co.list_cluster_custom_object(GROUP, VERSION, "gpupools")
                for pool in listing["items"]:
                    self._record(pool)
                for event in watch.Watch().stream(self.co.list_cluster_custom_object, GROUP, VERSION, "gpupools",
                                                  resource_version=listing["metadata"]["resourceVersion"],
                                                  timeout_seconds=30):
                    if event["type"] != "DELETED":
                        self._record(event["object"])
                    if self.stopped.is_set():
                        return
            except Exception:  # the harness's own watch: list again, as an informer would
                time.sleep(1)
