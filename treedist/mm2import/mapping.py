"""An MM2 configuration -> a treedist deployment mapping and its report (pure; CLI process).

1. parse the .properties text; a value with a trailing ` # ...` (a comment to the eye, part of
   the value to Java) loses it, noted;
2. sort every key: `clusters`, a flow's (`A->B.x`), a cluster's (`A.x`: bootstrap servers,
   client settings, `A.consumer.x` ...) or a top-level one;
3. the enabled flows give the clusters; each needs bootstrap servers;
4. per cluster its librdkafka client settings (clients.py), credentials as `${env:...}`;
5. topics, groups and MM2's own settings, each flow's effective value (its own, else the top
   level's, else MM2's default), one value for the deployment;
6. a tree (tree.py), receive-only clusters passive where the tree allows it;
7. the result validated by treedist's own model (references checked, not resolved).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from treedist.config import ConfigError, parse_deployment
from treedist.config.clusters import CLUSTER_NAME
from treedist.config.secrets import is_secret_key
from treedist.mm2import.clients import CLIENT_KEYS, ROLES, Given, cluster_client
from treedist.mm2import.errors import Mm2ImportError
from treedist.mm2import.passive import place_passive
from treedist.mm2import.properties import Setting, parse_properties
from treedist.mm2import.report import Report, shown
from treedist.mm2import.settings import (
    MAPPED, MM2_GROUPS_DEFAULT, MM2_GROUPS_EXCLUDE_DEFAULT, MM2_TOPICS_DEFAULT, split_list, unmapped_todo,
)
from treedist.mm2import.tree import dc_of_names, propose_tree
from treedist.topology.selection import regex_error

_TRAILING_COMMENT = re.compile(r"\s+#.*$", re.S)


@dataclass
class Imported:
    """The deployment mapping (ready for yaml) and the report of the import."""

    spec: dict
    report: Report
    clusters: list[str]
    dc: dict[str, str]
    passive: list[str]
    source: str = "mm2.properties"
    flows: list[tuple[str, str]] = field(default_factory=list)

    def yaml(self) -> str:
        """The deployment file: a header (origin, the references to set, the report as
        comments), then the deployment."""
        head = [f"# Imported from {self.source} by `treedist import mm2`: review before use.",
                "# Check it with: treedist topology show -c <this file>"]
        if self.report.secrets.names:
            head.append("# Set these environment variables (credentials, never written here):")
            head += [f"#   {name}  ({what})" for name, what in self.report.secrets.names.items()]
        head += ["#"] + [f"# {line}" for line in self.report.message().splitlines()]
        body = yaml.safe_dump(self.spec, sort_keys=False, default_flow_style=False, width=110, allow_unicode=True)
        return "\n".join(head) + "\n" + body


@dataclass
class _Sorted:
    clusters: list[str]
    flows: dict[tuple[str, str], dict[str, Setting]] = field(default_factory=dict)
    cluster: dict[str, dict[str, Setting]] = field(default_factory=dict)
    top: dict[str, Setting] = field(default_factory=dict)


def import_mm2(text: str, dc_labels: dict[str, str] | None = None, source: str = "mm2.properties") -> Imported:
    """The deployment for MM2 configuration `text`; `dc_labels` (cluster -> data centre, the
    `--dc` options) keep clusters of one data centre under one subtree. Raises
    Mm2ImportError naming the setting or cluster when the configuration cannot be imported."""
    report = Report()
    settings = _strip_comments(parse_properties(text), report)
    known = _aliases(settings, report)
    sorted_ = _sort(settings, known, report)
    flows = _enabled_flows(sorted_, report)
    clusters = [c for c in known if any(c in f for f in flows)]
    for c in known:
        if c not in clusters:
            report.note(f"cluster {c} is in no enabled flow: left out of the deployment")
    dc = _data_centres(clusters, dc_labels or {}, report)
    spec: dict = {"clusters": {}}
    for c in clusters:
        spec["clusters"][c] = _cluster(c, sorted_, report)
        if c in dc:
            spec["clusters"][c]["labels"] = {"dc": dc[c]}
    tree = propose_tree(clusters, dc)
    spec["tree"] = tree
    spec["topics"] = _topics(sorted_, flows, report)
    passive, overrides = place_passive(tree, _receive_only(clusters, flows), report)
    _send_only(clusters, flows, set(passive), report)
    for c in passive:
        spec["clusters"][c]["passive"] = True
    if overrides:
        spec["targets"] = overrides
    _missing_flows(clusters, flows, set(passive), report)
    _mm2_settings(spec, sorted_, flows, clusters, report)
    try:
        parse_deployment(spec, source=source, resolve=False)
    except ConfigError as err:
        raise Mm2ImportError(f"the imported deployment does not validate: {err}") from None
    return Imported(spec, report, clusters, dc, passive, source, flows)


def _strip_comments(settings: dict[str, Setting], report: Report) -> dict[str, Setting]:
    out = {}
    for key, s in settings.items():
        value = s.value
        head = _TRAILING_COMMENT.sub("", value)
        # never inside a credential or a quoted string (a JAAS password may hold ` #`)
        if head != value and head.strip() and not is_secret_key(key) and head.count('"') % 2 == 0:
            value = _TRAILING_COMMENT.sub("", value)
            report.note(f"line {s.line}: {key}: the text from `#` on was taken as a comment (Java's .properties keeps "
                        f"it in the value: MM2 reads {shown(key, s.value)!r})")
        out[key] = Setting(key, value.strip(), s.line)
    return out


def _aliases(settings: dict[str, Setting], report: Report) -> list[str]:
    if "clusters" in settings:
        aliases = split_list(settings["clusters"].value)
    else:
        aliases = []
        for key in settings:
            flow = re.match(r"^(.+?)->(.+?)\.enabled$", key)
            if flow:
                found = list(flow.groups())
            elif key.endswith(".bootstrap.servers") and not re.search(r"\.(consumer|producer|admin)\.bootstrap\.servers$", key):
                found = [key[:-len(".bootstrap.servers")]]
            else:
                found = []
            aliases += [a for a in found if a not in aliases]
        if not aliases:
            raise Mm2ImportError("no `clusters` setting and no `<alias>.bootstrap.servers`: nothing names a cluster")
        report.note(f"no `clusters` setting (MM2 requires one): took the aliases the file uses, {', '.join(aliases)}")
    for alias in aliases:
        if not re.match(CLUSTER_NAME, alias):
            raise Mm2ImportError(f"clusters: alias {alias!r} is not a treedist cluster name ({CLUSTER_NAME})")
    return aliases


def _longest_alias(text: str, aliases: list[str]) -> str | None:
    """The longest alias that `text` starts with, followed by a dot."""
    found = [a for a in aliases if text.startswith(a + ".")]
    return max(found, key=len) if found else None


def _sort(settings: dict[str, Setting], aliases: list[str], report: Report) -> _Sorted:
    out = _Sorted(aliases)
    misspelt: list[tuple[str, str, Setting]] = []  # `Us-east.x` for alias us-east
    for key, s in settings.items():
        if key == "clusters":
            continue
        if "->" in key:
            source, _, rest = key.partition("->")
            target = _longest_alias(rest, aliases)
            if source not in aliases or target is None:
                report.skip(key, s.value, f"names no flow between the clusters {aliases} (MM2 ignores it too)")
                continue
            out.flows.setdefault((source, target), {})[rest[len(target) + 1:]] = s
            continue
        alias = _longest_alias(key, aliases)
        if alias is not None:
            out.cluster.setdefault(alias, {})[key[len(alias) + 1:]] = s
            continue
        first, _, sub = key.partition(".")
        near = [a for a in aliases if a.lower() == first.lower()]
        if near and sub.startswith(("bootstrap.", "consumer.", "producer.", "admin.", "security.", "sasl.", "ssl.")):
            misspelt.append((near[0], sub, s))
            continue
        out.top[key] = s
    for alias, sub, s in misspelt:
        if sub == "bootstrap.servers" and sub not in out.cluster.get(alias, {}):
            out.cluster.setdefault(alias, {})[sub] = s
            report.note(f"line {s.line}: {s.key} taken for cluster {alias} (aliases are case-sensitive: MM2 would "
                        f"not connect {alias} there)")
        else:
            report.skip(s.key, s.value, f"{s.key.split('.')[0]!r} is not a cluster of `clusters` (aliases are "
                                        f"case-sensitive: {alias!r}?)")
    return out


def _enabled_flows(sorted_: _Sorted, report: Report) -> list[tuple[str, str]]:
    flows = []
    for (source, target), subs in sorted_.flows.items():
        if source == target:
            for sub, s in subs.items():
                report.skip(s.key, s.value, "a flow from a cluster to itself: ignored (as by MM2)")
            continue
        if "enabled" in subs and subs["enabled"].value.strip().lower() == "true":
            flows.append((source, target))
        else:
            for sub, s in subs.items():
                if sub != "enabled":
                    report.skip(s.key, s.value, f"flow {source}->{target} is not enabled: ignored (as by MM2)")
    if not flows:
        raise Mm2ImportError("no flow is enabled (`<source>-><target>.enabled = true`): nothing to replicate")
    return flows


def _data_centres(clusters: list[str], labels: dict[str, str], report: Report) -> dict[str, str]:
    for c in labels:
        if c not in clusters:
            raise Mm2ImportError(f"--dc {c}={labels[c]}: {c!r} is not a cluster of an enabled flow; known: {clusters}")
    if labels:
        return dict(labels)
    found = dc_of_names(clusters)
    if found:
        report.note("data centres read from the cluster names (each kept under one subtree; `--dc CLUSTER=DC` to "
                    "say otherwise): " + ", ".join(f"{c}={d}" for c, d in found.items()))
    return found


def _cluster(alias: str, sorted_: _Sorted, report: Report) -> dict:
    own = sorted_.cluster.get(alias, {})
    if "bootstrap.servers" not in own:
        raise Mm2ImportError(f"{alias}.bootstrap.servers: cluster {alias!r} has no bootstrap servers")
    out: dict = {"bootstrap_servers": ",".join(split_list(own["bootstrap.servers"].value))}
    top = {k: Given(s.key, s.value) for k, s in sorted_.top.items() if k in CLIENT_KEYS}
    mine: dict[str, Given] = {}
    roles: dict[str, dict[str, Given]] = {r: {} for r in ROLES}
    for key, s in sorted_.top.items():  # `consumer.x` at the top level: every cluster's consumers
        role, _, sub = key.partition(".")
        if role in ROLES and sub:
            roles[role][sub] = Given(s.key, s.value)
    for sub, s in own.items():
        role, _, rest = sub.partition(".")
        if sub == "bootstrap.servers":
            continue
        if role in ROLES and rest:
            roles[role][rest] = Given(s.key, s.value)
        elif sub in CLIENT_KEYS:
            mine[sub] = Given(s.key, s.value)
        elif sub in ("exactly.once.source.support",):
            continue  # read with the MM2 settings
        else:
            report.skip(s.key, s.value, unmapped_todo(sub))
    client = cluster_client(alias, top, mine, roles, report)
    if client:
        out["client"] = client
    return out


def _effective(name: str, sorted_: _Sorted, flows: list[tuple[str, str]], aliases: tuple[str, ...] = ()):
    """Per enabled flow, (the setting as written, value) of MM2 setting `name` (or one of its
    `aliases`, legacy names): the flow's own, else the top level's, else None."""
    out = {}
    for flow in flows:
        found = None
        for source in (sorted_.flows.get(flow, {}), sorted_.top):
            for n in (name, *aliases):
                if n in source:
                    found = (source[n].key, source[n].value)
                    break
            if found:
                break
        out[flow] = found
    return out


def _one_value(name: str, per_flow: dict, report: Report):
    """The one value of a per-flow setting: all flows agree, else the first flow's, reported."""
    given = {v for v in per_flow.values() if v is not None}
    if not given:
        return None
    values = {v[1] for v in given}
    chosen = next(v for v in per_flow.values() if v is not None)
    if None in per_flow.values():
        report.note(f"{name}: set for the flows {sorted(f'{a}->{b}' for (a, b), v in per_flow.items() if v)} only; "
                    f"treedist takes {chosen[0]} = {chosen[1]} for every cluster")
    if len(values) > 1 or None in per_flow.values():
        for v in sorted(given):
            if v != chosen:
                report.skip(v[0], v[1], f"{name} differs between flows: treedist has one value for the deployment; "
                                        f"took {chosen[0]} = {chosen[1]}")
    return chosen


def _regexes(setting: str, values: list[str]) -> list[str]:
    for pattern in values:
        reason = regex_error(pattern)
        if reason is not None:
            raise Mm2ImportError(f"{setting}: regex {pattern!r} is not one treedist (Python's re) reads: {reason}")
    return values


def _topics(sorted_: _Sorted, flows: list[tuple[str, str]], report: Report) -> dict:
    include = _effective("topics", sorted_, flows, ("topics.whitelist",))
    exclude = _effective("topics.exclude", sorted_, flows, ("topics.blacklist",))
    inc = {f: tuple(split_list(v[1])) if v else MM2_TOPICS_DEFAULT for f, v in include.items()}
    exc = {f: tuple(split_list(v[1])) if v else None for f, v in exclude.items()}
    regex: list[str] = []
    for f in flows:
        regex += [p for p in inc[f] if p not in regex]
    if len(set(inc.values())) > 1:
        report.note("topics differ between flows: treedist selects one set for every cluster, the union "
                    f"{regex} (a topic one flow copies is copied everywhere)")
    out: dict = {"regex": _regexes("topics", regex)}
    if not regex:
        raise Mm2ImportError("topics: selects no topic")
    excludes = set(exc.values())
    if excludes == {None}:
        report.note("topics.exclude unset: treedist's default is MM2's plus `_schemas` and names starting with a dot "
                    "(schemas are copied by a `schemas` section, docs/schemas.md)")
    else:
        lists = [e for e in exc.values() if e is not None]
        common = [p for p in lists[0] if all(p in e for e in lists)]
        if len(excludes) > 1:
            report.note(f"topics.exclude differs between flows: took the excludes every flow has, {common}")
        out["exclude"] = _regexes("topics.exclude", common)
    return out


def _groups(sorted_: _Sorted, flows: list[tuple[str, str]], report: Report) -> dict:
    include = _effective("groups", sorted_, flows, ("groups.whitelist",))
    exclude = _effective("groups.exclude", sorted_, flows, ("groups.blacklist",))
    inc = {f: tuple(split_list(v[1])) if v else MM2_GROUPS_DEFAULT for f, v in include.items()}
    exc = {f: tuple(split_list(v[1])) if v else MM2_GROUPS_EXCLUDE_DEFAULT for f, v in exclude.items()}
    groups: list[str] = []
    for f in flows:
        groups += [p for p in inc[f] if p not in groups]
    if len(set(inc.values())) > 1:
        report.note(f"groups differ between flows: treedist follows one set on every cluster, the union {groups}")
    lists = list(exc.values())
    common = [p for p in lists[0] if all(p in e for e in lists)]
    if len(set(exc.values())) > 1:
        report.note(f"groups.exclude differs between flows: took the excludes every flow has, {common}")
    return {"include": _regexes("groups", groups), "exclude": _regexes("groups.exclude", common)}


def _bool(value: str) -> bool:
    return value.strip().lower() == "true"


def _seconds(setting: str, value: str) -> str:
    if not re.fullmatch(r"\d+", value.strip()):
        raise Mm2ImportError(f"{setting}: {value!r} is not a number of seconds")
    return f"{int(value)}s"


def _mm2_settings(spec: dict, sorted_: _Sorted, flows: list[tuple[str, str]], clusters: list[str],
                  report: Report) -> None:
    """MM2's own settings: the mapped ones into `spec`, every other one reported."""
    def one(name: str, *aliases: str):
        return _one_value(name, _effective(name, sorted_, flows, aliases), report)

    sync: dict = {}
    if (v := one("sync.topic.configs.enabled")) is not None:
        sync["enabled"] = _bool(v[1])
    if (v := one("sync.topic.configs.interval.seconds")) is not None:
        sync["interval"] = _seconds(v[0], v[1])
    if (v := one("config.properties.exclude", "config.properties.blacklist")) is not None:
        sync["exclude_configs"] = split_list(v[1])
        report.note("config.properties.exclude: treedist never copies MM2's default list either, and adds these")
    if (v := one("replication.factor")) is not None and v[1].strip() != "-1":
        if not re.fullmatch(r"\d+", v[1].strip()) or int(v[1]) < 1:
            raise Mm2ImportError(f"{v[0]}: {v[1]!r} is not a replication factor")
        sync["replication_factor"] = {c: int(v[1]) for c in clusters}
    if sync:
        spec["topics"]["sync"] = sync
    acls: dict = {}
    if (v := one("sync.topic.acls.enabled")) is not None:
        acls["sync"] = _bool(v[1])
    else:
        report.note("MM2 syncs topic ACLs by default (sync.topic.acls.enabled); treedist's acls.sync is off: turn it on "
                    "where every cluster has an authorizer (docs/acls.md)")
    if (v := one("sync.topic.acls.interval.seconds")) is not None:
        acls["interval"] = _seconds(v[0], v[1])
    if acls:
        spec["acls"] = acls
    distributor: dict = {}
    if (v := one("refresh.topics.interval.seconds")) is not None:
        distributor["topic_refresh_seconds"] = _seconds(v[0], v[1])
    eos = one("exactly.once.support")
    targets_eos = [s for c in clusters for k, s in [*sorted_.cluster.get(c, {}).items(), *sorted_.top.items()]
                   if k == "exactly.once.source.support" and s.value.strip().lower() == "enabled"]
    if (eos is not None and eos[1].strip().lower() in ("required", "requested")) or targets_eos:
        distributor["delivery"] = "exactly_once"
        report.note("exactly-once: distributor.delivery: exactly_once, on every link; consumers read with "
                    "isolation.level=read_committed (docs/faults.md)")
    if distributor:
        spec["distributor"] = distributor
    offsets: dict = {"groups": _groups(sorted_, flows, report)}
    sync_groups, checkpoints = one("sync.group.offsets.enabled"), one("emit.checkpoints.enabled")
    if sync_groups is not None and not _bool(sync_groups[1]) and checkpoints is not None and not _bool(checkpoints[1]):
        offsets["enabled"] = False
    elif sync_groups is None or not _bool(sync_groups[1]):
        report.note("offsets: MM2 here emits checkpoints without syncing group offsets; treedist commits each group's "
                    "translated position on every cluster (offsets.enabled: true; false to leave them alone)")
    if (v := one("sync.group.offsets.interval.seconds")) is not None:
        offsets["poll_interval"] = _seconds(v[0], v[1])
    spec["offsets"] = offsets
    policy = one("replication.policy.class")
    if policy is None:
        report.note("MM2's default DefaultReplicationPolicy names a copy `<source>.<topic>` (A.orders); treedist copies "
                    "under the same name (orders on every cluster): point consumers of remote topics at the topic")
    _report_rest(sorted_, flows, policy, report)


def _report_rest(sorted_: _Sorted, flows: list[tuple[str, str]], policy, report: Report) -> None:
    identity = policy is not None and policy[1].strip().endswith("IdentityReplicationPolicy")
    for key, s in sorted_.top.items():
        role = key.partition(".")[0]
        if key in CLIENT_KEYS or (role in ROLES and "." in key):
            continue  # client settings: clients.py
        if key in MAPPED and not (key == "replication.policy.class" and not identity):
            continue
        report.skip(key, s.value, unmapped_todo(key))
    for flow in flows:
        for sub, s in sorted_.flows.get(flow, {}).items():
            if sub == "enabled" or (sub in MAPPED and not (sub == "replication.policy.class" and not identity)):
                continue
            report.skip(s.key, s.value, unmapped_todo(sub))


def _receive_only(clusters: list[str], flows: list[tuple[str, str]]) -> list[str]:
    sources = {s for s, _ in flows}
    return [c for c in clusters if c not in sources]


def _send_only(clusters: list[str], flows: list[tuple[str, str]], passive: set[str], report: Report) -> None:
    for c in clusters:
        others = [o for o in clusters if o != c and o not in passive]
        if others and any(s == c for s, _ in flows) and not any(t == c for _, t in flows):
            report.note(f"{c} only sends in MM2 (no flow into it); in treedist it also receives the records of "
                        f"{', '.join(others)}")


def _missing_flows(clusters: list[str], flows: list[tuple[str, str]], passive: set[str], report: Report) -> None:
    """treedist delivers every active cluster's records to every cluster: name the pairs MM2
    has no direct flow for (MM2 may still carry them on, as remote topics of remote topics)."""
    missing = [f"{s}->{t}" for s in clusters if s not in passive for t in clusters if t != s and (s, t) not in flows]
    if missing:
        shown_pairs = ", ".join(missing[:6]) + (f" and {len(missing) - 6} more" if len(missing) > 6 else "")
        report.note(f"treedist delivers every active cluster's records to every cluster, through the tree; MM2 has no "
                    f"direct flow for {shown_pairs}")
