"""`treedist config set|show|push`: the deployment as live config in etcd
(treedist.control.live). Workers follow a change without a restart: a target switch at the
next micro-batch, other changes by restarting only the units they concern.

`treedist config schema`: the deployment file's JSON Schema (treedist.config.docs), no etcd."""

from __future__ import annotations

from pathlib import Path

import typer

from treedist.cli.common import ConfigOption, JsonOption, console, print_json
from treedist.control.errors import ControlError

config_app = typer.Typer(help="The deployment file's schema, and the deployment as live config in etcd (control plane).",
                         no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")


def _client(config: Path):
    from treedist.config import load_spec, parse_deployment
    from treedist.control.connect import etcd_client
    from treedist.control.keys import Keys

    # references unresolved: these commands need the control section, not the workers' secrets
    # (only control.auth.password, resolved by etcd_client)
    deployment = parse_deployment(load_spec(config), source=str(config), resolve=False)
    if deployment.control is None:
        raise ControlError(f"{config}: control: no control section; `treedist config` changes the live config in etcd")
    client = etcd_client(deployment.control, str(config), unresolved=True)
    # the third: this file's allow_unsafe_spark_conf, never etcd's (treedist.control.live.parse)
    return client, Keys(deployment.control.prefix), deployment.control.allow_unsafe_spark_conf


SkipTransactionsCheck = typer.Option(
    False, "--skip-transactions-check",
    help="Write a change that turns distributor.delivery: exactly_once on (or adds or changes a cluster under it) "
         "without checking the clusters' transactions from here; each worker still checks them before applying it.")


def _transactions_check(config: Path, keys, unsafe_spark: bool):
    """live.Check of `config set|push` (CLI): in exactly_once, the clusters a worker would check
    before applying the change (`preflight.transactions_to_check`) must run Kafka transactions
    now (`preflight.check_change_transactions`), else the change is refused, naming them,
    before etcd is written. The clusters are reached from this host with the new deployment's
    settings, its references resolved here as a worker resolves them (only those of this file
    and its control.allowed_references)."""
    def check(stored, spec) -> None:
        from treedist.config import load_spec
        from treedist.config.errors import ConfigError
        from treedist.config.secrets import local_rule
        from treedist.control import live
        from treedist.driver.preflight import check_change_transactions, transactions_to_check

        new = live.parse(spec, keys, resolve=False, allow_unsafe_spark_conf=unsafe_spark)
        try:
            current = live.parse(stored, keys, resolve=False, allow_unsafe_spark_conf=unsafe_spark) if stored else None
        except ConfigError:
            current = None  # a stored deployment this version cannot read: check every cluster
        names = transactions_to_check(current, new)
        if not names:
            return
        file_spec = load_spec(config)
        allowed = local_rule(file_spec, (file_spec.get("control") or {}).get("allowed_references") or ())
        try:
            resolved = live.parse(spec, keys, resolve=True, allow_unsafe_spark_conf=unsafe_spark, allowed=allowed)
        except ConfigError as err:
            raise ConfigError(f"{err} (the transactions check of distributor.delivery: exactly_once reaches the clusters "
                              f"from here; --skip-transactions-check leaves it to the workers)") from None
        check_change_transactions(resolved, names)

    return check


@config_app.command("set")
def set_(
    config: Path = ConfigOption,
    changes: list[str] = typer.Argument(..., help="PATH=VALUE (YAML value), e.g. "
                                                  "'targets.overrides=[{cluster: c1, level: 3, target: c4}]'"),
    skip_transactions_check: bool = SkipTransactionsCheck,
) -> None:
    """Change the live deployment: validated like the deployment file (an invalid change is
    refused, naming the field, and nothing is written). In distributor.delivery: exactly_once, a
    change that a worker would check the transactions of (turning it on, a cluster added or
    changed) is refused when such a cluster does not run them or cannot be checked now.

    Example: treedist config set -c deploy.yaml distributor.trigger_interval=1s"""
    from treedist.control import live

    client, keys, unsafe_spark = _client(config)
    check = None if skip_transactions_check else _transactions_check(config, keys, unsafe_spark)
    try:
        _, revision = live.change(client, keys, changes, allow_unsafe_spark_conf=unsafe_spark, check=check)
    finally:
        client.close()
    from treedist.config.secrets import mask_assignment

    # a value under a secret key is not echoed: it would land in terminals and CI logs
    console.print(f"live config updated (etcd revision {revision}): {', '.join(mask_assignment(c) for c in changes)}",
                  markup=False, highlight=False)


@config_app.command("show")
def show(config: Path = ConfigOption, as_json: bool = JsonOption) -> None:
    """The live deployment (credentials masked).

    Example: treedist config show -c deploy.yaml --json"""
    import yaml

    from treedist.control import live

    client, keys, unsafe_spark = _client(config)
    try:
        kv = client.get(keys.config)
    finally:
        client.close()
    if kv is None:
        raise ControlError(f"no deployment in etcd under {keys.config}: start a worker, or store one with `treedist config push`")
    from treedist.config.secrets import mask_spec

    # unresolved: references are shown, never the values they stand for; SecretStr masks
    # secret keys, mask_spec the passwords in URLs
    masked = mask_spec(live.load(kv, keys, resolve=False, allow_unsafe_spark_conf=unsafe_spark)
                       .model_dump(mode="json", exclude_defaults=True))
    if as_json:
        print_json({"revision": kv.mod_revision, "deployment": masked})
    else:
        console.print(f"# {live.source_name(keys)} at revision {kv.mod_revision}")
        console.print(yaml.safe_dump(masked, sort_keys=False).rstrip(), markup=False, highlight=False)


@config_app.command("push")
def push(config: Path = ConfigOption, skip_transactions_check: bool = SkipTransactionsCheck) -> None:
    """Replace the live deployment with the file's (validated first; the transactions check as
    for `config set`).

    Example: treedist config push -c deploy.yaml"""
    from treedist.config import load_spec
    from treedist.control import live

    client, keys, unsafe_spark = _client(config)
    check = None if skip_transactions_check else _transactions_check(config, keys, unsafe_spark)
    try:
        _, revision = live.replace(client, keys, load_spec(config), expected=None,
                                   allow_unsafe_spark_conf=unsafe_spark, check=check)
    finally:
        client.close()
    console.print(f"live config replaced by {config} (etcd revision {revision})")


@config_app.command("schema")
def schema() -> None:
    """Print the JSON Schema of a deployment file, every key with its description.

    For editors: YAML language servers complete and check keys with it (a first line
    `# yaml-language-server: $schema=treedist.schema.json` in the deployment file).
    docs/configuration.md is the same reference as a page.

    Example: treedist config schema > treedist.schema.json"""
    from treedist.config.docs import json_schema

    print_json(json_schema())
