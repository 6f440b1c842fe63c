"""A treedist worker: one process with one Spark application, running the units the leader
assigns to it (`treedist worker`; everything here runs in the worker's driver process).

Start (`start`):

1. connect to etcd (bounded retries with backoff; one line per attempt naming the endpoint);
2. the deployment id, generated once per prefix; the deployment stored as live config
   (seeded from the file when etcd has none; when etcd has one, etcd's is used and a file
   that differs is reported);
3. the metadata cache (watch + periodic resync) and the membership (lease, registration);
4. client settings checked; in exactly_once, the transactions of every cluster that answers
   (one that answers without them: exit 2, one line; one that is down: a logged line, and
   checked when it answers: treedist.control.later_checks); then Spark started and the distribution application begun with no unit
   (`DistributionApp.begin`).
Each part is registered on the command's `DriverProcess` (treedist.driver.process) as it
starts, so that a failure half-way stops what started.

Loop (`step`, every `tick_s` and whenever the cache changes):

1. a new stored deployment is validated and applied live (`DistributionApp.apply`); an
   invalid one (only possible when written around `treedist config`) is reported and the
   current one kept. One that turns exactly_once on (or adds or changes a cluster under it)
   has those clusters' transactions checked first, off the loop (`_apply_config`); with an
   answering cluster without them it is reported, the current one kept, and it is checked
   again (applied once they run transactions, while it is still the stored one);
2. no leader key: campaign; leading: one round of the load manager (at most every
   `manage_every_s`);
3. the unit runner reconciles this worker's units with its assignments (claims, starts,
   stops; fenced when the lease is not valid);
4. every `report_interval`: the load report (per unit: records/s, bytes/s, lag; process tree
   CPU and RSS; leader or not) under `load/<name>`, bound to the lease;
5. the application's own supervision (`DistributionApp.check`), and the transactions of the
   clusters that did not answer when they were to be checked (treedist.control.later_checks).
etcd being unreachable skips steps 2-4 (one condensed line per outage); the units keep
running, the data path does not need etcd, until the lease would have expired (fencing).

Stop (the `DriverProcess` unwinding): every unit stopped (batches settle) and released,
leadership resigned (a successor takes over at once), the lease revoked, the metadata cache
stopped, the application and Spark stopped, the etcd client closed.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from treedist.config import Deployment, parse_deployment
from treedist.config.errors import ConfigError
from treedist.config.secrets import local_rule
from treedist.control import live
from treedist.control.cache import MetadataCache
from treedist.control.election import Election
from treedist.control.errors import ControlError, EtcdUnavailable
from treedist.control.connect import etcd_client
from treedist.control.identity import ensure_deployment_id
from treedist.control.keys import Keys
from treedist.control.manager import LoadManager
from treedist.control.membership import Membership
from treedist.ops.procstat import CpuMeter
from treedist.control.runner import UnitRunner
from treedist.driver.unit_kinds import Unit
from treedist.errors import first_line

if TYPE_CHECKING:
    from treedist.driver.process import DriverProcess

log = logging.getLogger(__name__)


@dataclass
class WorkerOptions:
    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    state_dir: Path = Path(".treedist/worker")
    connect_timeout_s: float | None = None  # None: retry until stopped
    tick_s: float = 0.5
    manage_every_s: float = 1.0
    # how often clusters whose transactions could not be checked (or refused a live config) are
    # checked again (treedist.control.later_checks)
    transactions_recheck_s: float = 30.0


class Worker:
    def __init__(self, spec: Mapping[str, Any], file_name: str, options: WorkerOptions,
                 stopping: Callable[[], bool] = lambda: False) -> None:
        file_deployment = parse_deployment(dict(spec), source=file_name)
        if file_deployment.control is None:
            raise ControlError(f"{file_name}: control: a worker needs a control section "
                               "(control: {etcd: [http://127.0.0.1:2379]}); see docs/control-plane.md")
        self.file_spec, self.file_name, self.options = dict(spec), file_name, options
        # the file's control section, never etcd's: how to reach etcd (TLS, credentials) and
        # whether spark.conf may leave the allow-list are not for whoever writes etcd to choose
        self.control = file_deployment.control
        self.file_deployment = file_deployment
        # the references a live config may resolve on this host (secrets.local_rule)
        self._references = local_rule(self.file_spec, self.control.allowed_references)
        self.keys = Keys(self.control.prefix)
        self.client = etcd_client(self.control, file_name, timeout_s=5.0, attempts=1)
        self._stopping = stopping
        self._wake = threading.Event()
        self.deployment: Deployment = file_deployment
        self.deployment_revision = 0
        self.deployment_id = ""
        self.app = None
        self.spark = None
        self.cache: MetadataCache | None = None
        self.membership: Membership | None = None
        self.election: Election | None = None
        self.manager: LoadManager | None = None
        self.runner: UnitRunner | None = None
        self._cpu = CpuMeter()
        self._last_report = 0.0
        self._last_manage = 0.0
        self._etcd_down_since: float | None = None
        self._rates: dict[str, tuple[float, int]] = {}
        self.later = None  # LaterTransactions, from start (it imports the Kafka clients)
        self._config_check = None  # later_checks.ConfigCheck of a live config not applied yet
        self._config_refused: dict[str, str] = {}  # cluster -> why it refused the stored live config
        self.started_at = time.time()

    # -- start ------------------------------------------------------------------------------

    def start(self, process: "DriverProcess") -> None:
        """Steps 1-4; each part registered on `process` to stop in reverse order."""
        process.callback(self.client.close)
        # Spark and the application stop after the etcd session's parts: the units are handed
        # over and leadership and lease given back first (a successor takes over at once),
        # Spark's stop (seconds) after. Their place in the stop order is taken here.
        application_parts = process.reserve()
        self._connect()  # step 1
        self.deployment_id = ensure_deployment_id(self.client, self.control.prefix)  # step 2
        stored, seeded = live.seed(self.client, self.keys, self.file_spec)
        if seeded:
            log.info("deployment %s: stored %s as the live config under %s", self.deployment_id, self.file_name, self.keys.config)
        elif json.dumps(stored, sort_keys=True, default=str) != json.dumps(self.file_spec, sort_keys=True, default=str):
            log.warning("the deployment in etcd (%s) differs from %s; running etcd's. Replace it with: "
                        "treedist config push -c %s", self.keys.config, self.file_name, self.file_name)
        self.deployment = live.parse(stored, self.keys, allow_unsafe_spark_conf=self.control.allow_unsafe_spark_conf,
                                     allowed=self._references)
        self.cache = MetadataCache(self.client, self.control.prefix, self.deployment.control.resync_interval).start()  # step 3
        process.callback(self.cache.stop)
        self.cache.on_change(self._wake.set)
        if not self.cache.wait_loaded(30):
            raise ControlError(f"etcd at {', '.join(self.control.etcd)} answered but its keys could not be read in 30 s")
        kv = self.cache.get(self.keys.config)
        self.deployment_revision = kv.mod_revision if kv is not None else 0
        self.membership = Membership(self.client, self.keys, self.options.name, self.options.labels,
                                     self.deployment.control.lease_ttl)
        self.membership.join()
        process.callback(self.membership.leave)
        self.election = Election(self.client, self.keys, self.options.name, self.cache, self.membership.valid)
        process.callback(self.election.resign)
        self.manager = LoadManager(self.keys, self.cache, self.election)
        from treedist.control.later_checks import LaterTransactions
        from treedist.driver.preflight import check_answering_transactions, check_clients

        check_clients(self.deployment)  # step 4
        self.later = LaterTransactions(every_s=self.options.transactions_recheck_s)
        self._check_later(check_answering_transactions(self.deployment))
        self.spark = process.session(self._session_deployment(), stack=application_parts)
        self.app = process.application(self.deployment, self.spark, jobs=[], live_dir=self.options.state_dir / "live",
                                       stack=application_parts)
        self.app.begin()
        self.runner = UnitRunner(self.client, self.keys, self.options.name, self.cache, self.app,
                                 lease=lambda: self.membership.lease_id, lease_valid=self.membership.valid)
        process.callback(self._stop_units)

    def _session_deployment(self) -> Deployment:
        """What this worker's Spark session is built from: the live deployment with the local
        file's `spark.master` and `spark.app_name`, and the live `spark.conf` checked against
        the allow-list once more (treedist.config.spark_conf), whatever reached it from etcd."""
        from treedist.config.spark_conf import refusal, unsafe_keys

        conf = dict(self.deployment.spark.conf)
        refused = [] if self.control.allow_unsafe_spark_conf else unsafe_keys(conf)
        if refused:
            raise ConfigError(f"{live.source_name(self.keys)}: {refusal(refused[0])}")
        spark = self.file_deployment.spark.model_copy(update={"conf": conf})
        return self.deployment.model_copy(update={"spark": spark})

    def _connect(self) -> None:
        started, attempt, backoff = time.monotonic(), 0, 1.0
        while True:
            attempt += 1
            try:
                self.client.status()
                self._etcd_down_since = None
                if attempt > 1:
                    log.info("etcd at %s answers (attempt %d)", ", ".join(self.control.etcd), attempt)
                return
            except EtcdUnavailable as err:
                self._etcd_down_since = self._etcd_down_since or started  # for /readyz meanwhile
                waited = time.monotonic() - started
                limit = self.options.connect_timeout_s
                if self._stopping() or (limit is not None and waited + backoff > limit):
                    raise ControlError(f"{first_line(err)}; gave up after {attempt} attempts in {waited:.0f} s") from None
                log.warning("%s; retrying in %.0f s (attempt %d)", first_line(err), backoff, attempt)
                deadline = time.monotonic() + backoff
                while time.monotonic() < deadline and not self._stopping():
                    time.sleep(0.1)
                backoff = min(30.0, backoff * 2)

    # -- the loop ---------------------------------------------------------------------------

    def run(self, until: Callable[[], bool] = lambda: False) -> None:
        while not until() and not self._stopping():
            self._wake.wait(self.options.tick_s)
            self._wake.clear()
            self.step()

    def step(self) -> None:
        try:
            self._apply_config()  # step 1
            if self.membership.valid():
                self._lead()  # step 2
            self.runner.reconcile()  # step 3
            self._report()  # step 4
            if self._etcd_down_since is not None:
                log.info("etcd answers again after %.0f s", time.monotonic() - self._etcd_down_since)
                self._etcd_down_since = None
        except EtcdUnavailable as err:
            if self._etcd_down_since is None:
                self._etcd_down_since = time.monotonic()
                log.warning("%s; units keep running (the data path does not need etcd) while the lease "
                            "holds; leading and assignment changes wait", first_line(err))
            if not self.membership.valid():
                self.runner.reconcile()  # fencing needs no etcd: stop every unit
        except ControlError as err:
            log.warning("control plane: %s", first_line(err))
        self.app.check()  # step 5
        self.later.poll(self.deployment)

    def _apply_config(self) -> None:
        """Loop step 1. A config whose transactions need checking (`transactions_to_check`) is
        checked off the loop (later_checks.ConfigCheck, why there) and applied when the check
        ends; a refused one is kept out, and checked again every `transactions_recheck_s` while
        it is the stored one."""
        kv = self.cache.get(self.keys.config)
        if kv is None or kv.mod_revision == self.deployment_revision:
            return
        revision = kv.mod_revision
        from treedist.control.later_checks import ConfigCheck
        from treedist.driver.preflight import transactions_to_check
        from treedist.records.transactions import TransactionsUnsupported

        check = self._config_check
        if check is not None and check.revision == revision:
            if not check.done():
                return
            if check.error is None:
                self._config_check = None
                if check.again:
                    log.info("live config revision %d: %s run Kafka transactions now", revision,
                             ", ".join(repr(c) for c in sorted(self._config_refused)) or "its clusters")
                self._apply(check.deployment, revision, check.unchecked)
            elif not check.reported:
                check.reported = True
                err = check.error
                # a worker started with a refused exactly_once exits 2: say how out
                hint = (" (a worker started with it exits 2: set distributor.delivery=at_least_once, or give the "
                        "cluster transactions: it is checked again every "
                        f"{self.options.transactions_recheck_s:g} s)" if isinstance(err, TransactionsUnsupported) else "")
                line = f"the live config at revision {revision} is refused, keeping the current one: {err}{hint}"
                log.error("%s", line)
                self._config_refused = {c: line for c in getattr(err, "clusters", ())} or {"": line}
            elif time.monotonic() - check.ended >= self.options.transactions_recheck_s:
                self._config_check = ConfigCheck(revision, check.deployment, check.names, again=True)
            return
        try:
            deployment = live.load(kv, self.keys, allow_unsafe_spark_conf=self.control.allow_unsafe_spark_conf,
                                   allowed=self._references)
        except (ConfigError, ControlError) as err:
            log.error("the live config at revision %d is invalid, keeping the current one: %s", revision, err)
            self.deployment_revision = revision
            return
        names = transactions_to_check(self.deployment, deployment)
        if names:
            self._config_check = ConfigCheck(revision, deployment, names)
            return
        self._apply(deployment, revision, {})

    def _apply(self, deployment: Deployment, revision: int, unchecked: Mapping[str, str]) -> None:
        changed = self.app.apply(deployment)
        self._check_later(unchecked)
        self._config_check, self._config_refused = None, {}
        self.deployment, self.deployment_revision = deployment, revision
        log.info("live config revision %d applied%s", revision,
                 ": " + ", ".join(f"{u} ({what})" for u, what in sorted(changed.items())) if changed else " (no unit here changed)")

    def _check_later(self, unchecked: Mapping[str, str]) -> None:
        for why in unchecked.values():
            log.warning("%s; its transactions (distributor.delivery: exactly_once) are checked when it answers", why)
        self.later.add(unchecked)

    def _lead(self) -> None:
        if self.election.leader() is None:
            self.election.campaign(self.membership.lease_id)
        if self.election.acting() and time.monotonic() - self._last_manage >= self.options.manage_every_s:
            self._last_manage = time.monotonic()
            self.manager.run_once(self.deployment)

    def _report(self) -> None:
        now = time.monotonic()
        if now - self._last_report < self.deployment.control.report_interval or not self.membership.valid():
            return
        self._last_report = now
        self.client.put(self.keys.load(self.options.name), json.dumps(self.load_report()), lease=self.membership.lease_id)

    # -- what it tells ----------------------------------------------------------------------

    def load_report(self) -> dict:
        cores, rss = self._cpu.sample()
        return {
            "worker": self.options.name, "at": time.time(), "cpu": cores, "rss_bytes": rss,
            "leader": bool(self.election and self.election.term), "term": self.election.term if self.election else 0,
            "units": self.unit_loads(), "waiting": dict(self.runner.waiting) if self.runner else {},
            "errors": dict(self.runner.errors) if self.runner else {},
            "config_revision": self.deployment_revision,
        }

    def unit_loads(self) -> dict[str, dict]:
        """Per started unit: state, records/s and bytes/s since the previous report, lag."""
        out = {}
        now = time.monotonic()
        for unit in self.app.units():
            entry: dict[str, Any] = {"since": self.runner.started.get(unit) if self.runner else None,
                                     "records_per_s": 0.0, "bytes_per_s": 0.0, "lag_records": None, "state": "running"}
            parsed = Unit.parse(unit)
            run = self.app.running.get(parsed.query_name) if parsed.kind == "messages" else None
            if run is not None:
                counts = run.counters.snapshot()
                first = counts[run.plan.levels[0].name]
                read, nbytes = first["records_in"], first.get("bytes", 0)
                then, read_then, bytes_then = self._rates.get(unit, (0.0, read, nbytes))
                if then and now > then:
                    entry["records_per_s"] = round((read - read_then) / (now - then), 1)
                    entry["bytes_per_s"] = round((nbytes - bytes_then) / (now - then), 1)
                self._rates[unit] = (now, read, nbytes)
                entry["lag_records"] = query_lag(run.query)
                entry["state"] = run.supervision.state.value
            out[unit] = entry
        return out

    def etcd_down_since(self) -> float | None:
        """Since when (monotonic) etcd has not answered the worker's loop; None while it does."""
        return self._etcd_down_since

    def view(self) -> dict:
        """This worker's own view (`/api/worker`): what it believes and does, with history."""
        return {
            "worker": self.options.name, "labels": dict(self.options.labels), "deployment_id": self.deployment_id,
            "started": self.runner is not None,  # etcd joined, Spark and the application up (the view answers before)
            "lease": self.membership.lease_id if self.membership else 0,
            "lease_valid": bool(self.membership and self.membership.valid()),
            "leader": bool(self.election and self.election.term), "term": self.election.term if self.election else 0,
            "leader_terms": list(self.election.terms) if self.election else [],
            "units": self.app.units() if self.app else [],
            "runs": list(self.runner.history) if self.runner else [],
            "waiting": dict(self.runner.waiting) if self.runner else {},
            "config_revision": self.deployment_revision,
            # clusters that refused transactions: in the running config (later checks), or the
            # stored live config, which is kept out meanwhile
            "transactions_refused": {**(self.later.refused if self.later else {}), **self._config_refused},
            "transactions_pending": dict(self.later.pending) if self.later else {},
            "targets": self.app.targets.links({run.plan.cluster for run in self.app.running.values()}) if self.app else {},
        }

    # -- stop -------------------------------------------------------------------------------

    def _stop_units(self) -> None:
        try:
            self.runner.stop_all(settle_s=10.0, release=self.membership.valid())
        except ControlError as err:
            log.warning("releasing units: %s (their claims go with the lease)", err)


def query_lag(query) -> int | None:
    """Records of the source not yet copied by every level of the query, from its last
    progress: latest offsets (reported by the source) minus the lowest level's position."""
    from treedist.records.errors import PipelineError
    from treedist.records.positions import LevelPositions
    from treedist.kafka.errors import ReadPositionError
    from treedist.kafka.read_positions import KafkaOffsets

    progress = query.lastProgress or {}
    sources = progress.get("sources") or []
    if not sources:
        return None
    try:
        end = LevelPositions.from_dict(json.loads(sources[0]["endOffset"]) if isinstance(sources[0]["endOffset"], str)
                                       else sources[0]["endOffset"])
        latest_raw = sources[0].get("latestOffset")
        latest = KafkaOffsets.from_dict(json.loads(latest_raw) if isinstance(latest_raw, str) else latest_raw)
    except (KeyError, TypeError, ValueError, PipelineError, ReadPositionError):
        return None  # no batch yet, or a form this version does not know: unknown, not zero
    lag = 0
    for tp, offset in latest.positions.items():
        start = end.window_start(tp)
        lag += max(0, offset - (start if start is not None else offset))
    return lag
