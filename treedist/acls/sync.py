"""One ACL sync pass over a deployment: observe every cluster, plan, create, log, count.

Runs on the driver (the `acl-sync` background job, treedist.driver.running, and `treedist acls
sync|diff`). A pass:

1. describes every cluster's topic ACLs in parallel; a cluster that does not answer after the
   bounded retries, or has no authorizer, is skipped for this pass (logged once until it
   answers again, and counted);
2. plans with `treedist.acls.decisions.plan_acls` (pure): the union of the clusters' keys;
3. unless dry-run, creates on each cluster the ACLs it lacks, one request per cluster; every
   ACL created is logged with its cluster and counted;
4. raises AclSyncError naming every ACL that could not be created, after everything else
   was done (the next pass tries them again: creating is idempotent).
"""

from __future__ import annotations

import logging
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from treedist.acls.admin import AclAdmin
from treedist.acls.errors import AclSyncError
from treedist.acls.decisions import Acl, AclPlan, AclRules, plan_acls
from treedist.config import Deployment
from treedist.kafka.every_cluster import EveryCluster

log = logging.getLogger(__name__)


@dataclass
class AclPassResult:
    """What one pass saw and did."""

    plan: AclPlan
    observed: dict[str, list[Acl]]  # reachable cluster -> its topic ACLs (physical names)
    unreachable: dict[str, str]  # cluster -> why
    created: dict[str, list[Acl]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    dry_run: bool = False


def acl_rules(deployment: Deployment) -> AclRules:
    acls = deployment.acls
    return AclRules(tuple(deployment.clusters), deployment.naming(), deployment.topics.filter(),
                    acls.downgrade_write, frozenset(acls.exclude_principals))


class AclSync:
    """ACL sync of one deployment (driver). No state between passes: each pass converges."""

    def __init__(self, deployment: Deployment, attempts: int = 4, timeout_s: float = 10.0) -> None:
        self.deployment = deployment
        self.rules = acl_rules(deployment)
        # ACLs created, clusters skipped, failed creations, passes: for status and metrics.
        self.counters: Counter = Counter()
        self._attempts, self._timeout_s = attempts, timeout_s
        self._admins: dict[str, AclAdmin] = {}  # made on first use: building a job connects nowhere
        # Clusters are read in parallel; one that does not answer (or has no authorizer:
        # AclsUnreadable, AuthorizerMissing) is skipped for the pass.
        self._every = EveryCluster("acl sync", AclSyncError, self.counters, log)

    def run_once(self, dry_run: bool = False, raise_errors: bool = True) -> AclPassResult:
        """Steps 1-4 of the module docstring; `dry_run` stops after step 2. With
        `raise_errors=False` failures are left in `AclPassResult.errors` for the caller."""
        observed, unreachable = self.observe()  # step 1
        plan = plan_acls(observed, self.rules)  # step 2
        for cluster, keys in plan.untranslatable.items():
            for key in keys:
                log.warning("acl sync: cluster %r cannot hold %s: the name has no legal form under its topic_format",
                            cluster, key)
        result = AclPassResult(plan, observed, unreachable, dry_run=dry_run)
        if dry_run:
            return result
        self.counters["passes"] += 1
        todo = {cluster: acls for cluster, acls in plan.creates.items() if acls}
        if todo:  # step 3
            with ThreadPoolExecutor(max_workers=len(todo), thread_name_prefix="treedist-acl-sync") as pool:
                failures = dict(zip(todo, pool.map(lambda item: self._admin(item[0]).create(item[1]), todo.items())))
            for cluster, acls in todo.items():
                for acl in acls:
                    why = failures[cluster].get(acl)
                    if why is not None:
                        self.counters["failed"] += 1
                        result.errors.append(f"creating {acl} on cluster {cluster!r}: {why}")
                        continue
                    self.counters["created"] += 1
                    result.created.setdefault(cluster, []).append(acl)
                    log.info("acl sync: created on cluster %r: %s", cluster, acl)
        if result.errors and raise_errors:  # step 4
            raise AclSyncError(f"acl sync: {len(result.errors)} ACL(s) not created: " + "; ".join(result.errors))
        return result

    def observe(self) -> tuple[dict[str, list[Acl]], dict[str, str]]:
        """Every cluster's topic ACLs; clusters that did not answer (or have no authorizer) apart."""
        return self._every.ask(self.deployment.clusters, lambda name: self._admin(name).describe())

    def _admin(self, cluster: str) -> AclAdmin:
        if cluster not in self._admins:  # dict assignment is atomic; at worst two threads build one each
            config = self.deployment.cluster(cluster).client_config()
            self._admins[cluster] = AclAdmin(cluster, config, attempts=self._attempts, timeout_s=self._timeout_s)
        return self._admins[cluster]

    def close(self) -> None:
        self._admins.clear()  # AdminClient has no close(); dropping it ends its threads
