"""The control plane as `treedist status` shows it (any process with the deployment file):
workers (labels, lease age, CPU, RSS), the leader, every unit's assignment and claim, and per
unit its rate and lag from the load reports. One range read of the deployment's prefix.

Shape (`status --json`, key `control`; documented in docs/control-plane.md):
{"deployment_id", "leader", "term", "workers": [{"name", "labels", "pid", "host", "lease_age_s",
 "cpu", "rss_bytes", "leader", "units", "report_age_s"}], "units": [{"unit", "assigned_to",
 "running_on", "state", "records_per_s", "bytes_per_s", "lag_records"}], "balance": {...},
 "config_revision"}
"""

from __future__ import annotations

import time

from treedist.control.etcd import EtcdClient, mapping
from treedist.control.keys import Keys


def control_snapshot(client: EtcdClient, keys: Keys, now: float | None = None) -> dict:
    now = time.time() if now is None else now
    _, kvs = client.get_prefix(keys.root)
    by_key = {kv.key: kv for kv in kvs}
    leader_kv = by_key.get(keys.leader)
    leader = leader_kv.text() if leader_kv is not None else None
    reports = {key[len(keys.load_prefix):]: mapping(kv) for key, kv in by_key.items() if key.startswith(keys.load_prefix)}
    workers = []
    for key, kv in sorted(by_key.items()):
        if not key.startswith(keys.workers_prefix):
            continue
        name = key[len(keys.workers_prefix):]
        reg, report = mapping(kv), reports.get(name, {})
        workers.append({
            "name": name, "labels": reg.get("labels", {}), "pid": reg.get("pid"), "host": reg.get("host"),
            "lease_age_s": round(now - reg["started_at"], 1) if reg.get("started_at") else None,
            "cpu": report.get("cpu"), "rss_bytes": report.get("rss_bytes"), "leader": name == leader,
            "units": sorted((report.get("units") or {}).keys()),
            "report_age_s": round(now - report["at"], 1) if report.get("at") else None,
        })
    assigned = {}
    for key in by_key:
        if key.startswith(keys.assignments_prefix):
            worker, unit = keys.parse_assignment(key)
            assigned[unit] = worker
    running = {key[len(keys.running_prefix):]: mapping(kv).get("worker") for key, kv in by_key.items()
               if key.startswith(keys.running_prefix)}
    units = []
    for unit in sorted(set(assigned) | set(running)):
        owner = running.get(unit)
        load = (reports.get(owner, {}).get("units") or {}).get(unit, {}) if owner else {}
        units.append({
            "unit": unit, "assigned_to": assigned.get(unit), "running_on": owner,
            "state": load.get("state") or ("handing over" if owner and owner != assigned.get(unit) else
                                           "starting" if not owner else "running"),
            "records_per_s": load.get("records_per_s"), "bytes_per_s": load.get("bytes_per_s"),
            "lag_records": load.get("lag_records"),
        })
    config = by_key.get(keys.config)
    id_kv = by_key.get(keys.id)
    return {
        "deployment_id": id_kv.text() if id_kv is not None else None,
        "leader": leader, "term": leader_kv.create_revision if leader_kv is not None else None,
        "workers": workers, "units": units, "balance": mapping(by_key.get(keys.balance)),
        "config_revision": config.mod_revision if config is not None else None,
    }

