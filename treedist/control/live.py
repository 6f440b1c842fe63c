"""The deployment as live config in etcd (`<prefix>/config`): seeded once from the deployment
file, changed by `treedist config set|push`, followed by every worker through its metadata
cache (driver of each worker; the CLI process for changes).

A change is written in one step that either happens whole or not at all:

1. read the stored deployment and its mod revision;
2. apply the change to a copy (`set_values`: `path=value` pairs, values in YAML);
3. validate the result with the same loader as the deployment file (every error names the
   field, e.g. `etcd:/treedist/config: targets[0].target: ...`); an invalid change is refused
   and nothing is written;
   Then the caller's `check` of the stored deployment and the new one (`treedist config
   set|push`: the transactions check of `distributor.delivery: exactly_once`,
   treedist.cli.config_cmd): a change it refuses is refused the same way, nothing written;
4. write it with a transaction guarded by the mod revision read in step 1, so two changes
   made at the same time cannot overwrite each other (the second is refused: run it again).

The stored form is the deployment file's own (a mapping, as YAML gives it), as JSON:
`${env:NAME}` and `${file:/path}` references (treedist.config.secrets) are stored as
written and resolved by each worker when it loads the deployment, so a deployment that
references its credentials keeps them out of etcd; credentials written into the file
itself are stored in the clear: restrict access to etcd as you do to the deployment file
(docs/security.md). A change is validated with its references checked for form only (the
machine making it need not hold the workers' secrets); a reference a worker cannot resolve
is logged there and the worker keeps its current deployment.
"""

from __future__ import annotations

import json
import re
from copy import deepcopy
from typing import Any, Callable, Mapping, Sequence

import yaml

from treedist.config import Deployment, parse_deployment
from treedist.config.errors import ConfigError
from treedist.config.secrets import ReferenceRule
from treedist.control.errors import ControlError
from treedist.control.etcd import Compare, EtcdClient, KeyValue, Op
from treedist.control.keys import Keys

_INDEX = re.compile(r"^(.*)\[(\d+)\]$")
# check(stored spec or None, new spec): raises to refuse a change (step 3)
Check = Callable[[Mapping[str, Any] | None, Mapping[str, Any]], None]


def source_name(keys: Keys) -> str:
    """How errors name the stored deployment."""
    return f"etcd:{keys.config}"


def seed(client: EtcdClient, keys: Keys, spec: Mapping[str, Any]) -> tuple[dict, bool]:
    """Store `spec` unless a deployment is stored already; return (the stored spec, seeded)."""
    value = json.dumps(spec, sort_keys=True)
    result = client.txn([Compare.absent(keys.config)], [Op.put(keys.config, value)], [Op.get(keys.config)])
    if result.succeeded:
        return dict(spec), True
    return stored_spec(result.ranges[0][0], keys), False


def stored_spec(kv: KeyValue, keys: Keys) -> dict:
    try:
        spec = kv.json()
    except ValueError as err:
        raise ControlError(f"{source_name(keys)} holds no JSON ({err}); replace it with `treedist config push`") from None
    if not isinstance(spec, dict):
        raise ControlError(f"{source_name(keys)} holds {type(spec).__name__}, not a deployment mapping")
    return spec


def load(kv: KeyValue, keys: Keys, resolve: bool = True, allow_unsafe_spark_conf: bool = False,
         allowed: ReferenceRule = None) -> Deployment:
    """The stored deployment, validated (ConfigError naming `etcd:<key>` and the field);
    its references resolved unless `resolve` is False (showing it: references, not values).
    `allow_unsafe_spark_conf` and `allowed` come from the local file (see `parse`)."""
    return parse(stored_spec(kv, keys), keys, resolve, allow_unsafe_spark_conf, allowed)


def parse(spec: Mapping[str, Any], keys: Keys, resolve: bool = True, allow_unsafe_spark_conf: bool = False,
          allowed: ReferenceRule = None) -> Deployment:
    """A deployment spec read from (or bound for) etcd, validated with the local file's
    `control.allow_unsafe_spark_conf` in place of its own: etcd cannot lift the allow-list
    of Spark settings (treedist.config.spark_conf) for the workers that read it. `allowed`
    (`treedist.config.secrets.local_rule` of the worker's file) limits the references it may
    resolve here: etcd cannot make a worker read other files or variables."""
    spec = dict(spec)
    if isinstance(spec.get("control"), Mapping):
        spec["control"] = {**spec["control"], "allow_unsafe_spark_conf": allow_unsafe_spark_conf}
    return parse_deployment(spec, source=source_name(keys), resolve=resolve, allowed=allowed)


def set_values(spec: Mapping[str, Any], assignments: Sequence[str]) -> dict:
    """Step 2 (pure): `spec` with each `path=value` applied, in order. A path is dotted
    (`targets.overrides`, `distributor.trigger_interval`, `clusters.c1.client.sasl.mechanism`:
    where a mapping already has a key containing dots, the longest such key wins), with
    `[i]` for list items; a value is YAML (`c4`, `3`, `[{cluster: c1, level: 3, target: c4}]`);
    `path=` with nothing after it removes the key. `targets.overrides` on a deployment whose
    `targets` is a list (the overrides alone) sets that list."""
    out = deepcopy(dict(spec))
    for item in assignments:
        path, eq, text = item.partition("=")
        if not eq or not path.strip():
            raise ControlError(f"{item!r}: expected PATH=VALUE, e.g. distributor.trigger_interval='500 milliseconds'")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as err:
            raise ControlError(f"{path}: the value is not YAML: {str(err).splitlines()[0]}") from None
        _set(out, path.strip(), value, remove=not text.strip())
    return out


def _set(root: dict, path: str, value: Any, remove: bool) -> None:
    if path == "targets.overrides" and isinstance(root.get("targets"), list):
        root["targets"] = {"overrides": root["targets"]}
    node: Any = root
    rest = path
    while True:
        key, rest = _next_segment(node, rest)
        match = _INDEX.match(key)
        if match:  # list item
            name, index = match.group(1), int(match.group(2))
            items = node.setdefault(name, []) if isinstance(node, dict) else None
            if not isinstance(items, list) or index >= len(items) + (0 if rest else 1):
                raise ControlError(f"{path}: {name}[{index}] does not exist")
            if not rest:
                if remove:
                    items.pop(index)
                elif index == len(items):
                    items.append(value)
                else:
                    items[index] = value
                return
            node = items[index]
            continue
        if not isinstance(node, dict):
            raise ControlError(f"{path}: {key!r} is inside a {type(node).__name__}, not a mapping")
        if not rest:
            if remove:
                node.pop(key, None)
            else:
                node[key] = value
            return
        child = node.get(key)
        if child is None:
            child = node[key] = {}
        node = child


def _next_segment(node: Any, rest: str) -> tuple[str, str]:
    """The next path segment: the longest dotted prefix of `rest` that is a key of `node`
    (so `sasl.mechanism` is one key of a client mapping), else up to the next dot."""
    parts = rest.split(".")
    if isinstance(node, dict):
        for n in range(len(parts), 1, -1):
            candidate = ".".join(parts[:n])
            if candidate in node:
                return candidate, ".".join(parts[n:])
    return parts[0], ".".join(parts[1:])


def change(client: EtcdClient, keys: Keys, assignments: Sequence[str],
           allow_unsafe_spark_conf: bool = False, check: Check | None = None) -> tuple[Deployment, int]:
    """Steps 1-4 of `config set`; returns the new deployment and the revision written."""
    kv = client.get(keys.config)
    if kv is None:
        raise ControlError(f"no deployment in etcd under {keys.config}: start a worker, or store one with `treedist config push`")
    stored = stored_spec(kv, keys)
    spec = set_values(stored, assignments)
    return replace(client, keys, spec, expected=kv.mod_revision, allow_unsafe_spark_conf=allow_unsafe_spark_conf,
                   check=check, stored=stored)


def replace(client: EtcdClient, keys: Keys, spec: Mapping[str, Any], expected: int | None,
            allow_unsafe_spark_conf: bool = False, check: Check | None = None,
            stored: Mapping[str, Any] | None = None) -> tuple[Deployment, int]:
    """Steps 3-4 (also `config push`: `expected` None means "whatever is stored", or with
    `check`, what is stored when the check reads it).
    `allow_unsafe_spark_conf` is the flag of the file of the command making the change;
    `stored`: the stored spec `check` compares with (read here when not given)."""
    # raises ConfigError naming the field; references checked for form, not resolved (see above)
    deployment = parse(spec, keys, resolve=False, allow_unsafe_spark_conf=allow_unsafe_spark_conf)
    if check is not None:
        if stored is None:
            kv = client.get(keys.config)
            stored = stored_spec(kv, keys) if kv is not None else None
            if expected is None:
                # `config push`: the check judged the change against what is stored now, so
                # write only over that (a change made meanwhile was not checked against it)
                expected = kv.mod_revision if kv is not None else 0
        check(stored, spec)
    guard = ([] if expected is None else [Compare.absent(keys.config)] if expected == 0
             else [Compare.mod_at(keys.config, expected)])
    result = client.txn(guard, [Op.put(keys.config, json.dumps(spec, sort_keys=True))])
    if not result.succeeded:
        raise ControlError(f"{source_name(keys)} changed while this change was made; nothing written: run it again")
    return deployment, result.revision


__all__ = ["ConfigError", "change", "load", "parse", "replace", "seed", "set_values", "source_name", "stored_spec"]
