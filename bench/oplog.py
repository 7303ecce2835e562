"""The operator double's log: its componentStatus writes, each with epoch timestamps
(``status-write pool=... component=... hash=... progress=... synced=... sent=... acked=...``)."""
import re

_WRITE = re.compile(r"status-write pool=(?P<pool>\S+) component=(?P<component>\S+) hash=(?P<hash>\S*) "
                    r"progress=(?P<progress>\d+) synced=(?P<synced>true|false) "
                    r"sent=(?P<sent>[\d.]+) acked=(?P<acked>[\d.]+)")


def status_writes(text):
    out = []
    for match in _WRITE.finditer(text):
        item = match.groupdict()
        item.update(progress=int(item["progress"]), synced=item["synced"] == "true",
                    sent=float(item["sent"]), acked=float(item["acked"]))
        out.append(item)
    return out


def campaign(writes, pool, component, old_hash, after=0.0):
    """(first write of the campaign that replaced ``old_hash``, its final synced write) among the
    writes sent after ``after``; either is None when not (yet) in the log."""
    mine = [w for w in writes if w["pool"] == pool and w["component"] == component
            and w["sent"] >= after and w["hash"] and w["hash"] != old_hash]
    if not mine:
        return None, None
    first = mine[0]
    final = next((w for w in mine if w["hash"] == first["hash"] and w["synced"] and w["progress"] == 100), None)
    return first, final
