"""`treedist acls diff|sync`: the ACLs of distributed topics across the clusters (treedist.acls).

diff exits 0 when every cluster holds the same ACLs, 1 on drift, 2 on errors (e.g. an
unreachable cluster, or one without an authorizer: a diff without it would not be a diff).
sync runs one pass (with --dry-run, only plans it) and prints what it created or would
create; a pass that could not create everything exits 2 naming each failure.
"""

from __future__ import annotations

from pathlib import Path

import typer

from treedist.cli.common import (
    ConfigOption, JsonOption, console, dry_run_option, exit_if_failed, load, print_json, print_skipped,
)

acls_app = typer.Typer(help="ACLs of the distributed topics across the clusters: diff and sync.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(acls_app, name="acls")


def _acl_dict(acl) -> dict:
    return {"pattern": acl.pattern, "name": acl.name, "principal": acl.principal, "host": acl.host,
            "operation": acl.operation, "permission": acl.permission}


@acls_app.command("diff")
def diff_command(config: Path = ConfigOption, as_json: bool = JsonOption) -> None:
    """Per cluster: the synced ACLs it lacks (physical names) and the ones none of its names can hold; exit 1 on drift.

    Example: treedist acls diff -c deploy.yaml"""
    from treedist.acls import AclSyncError
    from treedist.acls.sync import AclSync

    sync = AclSync(load(config))
    result = sync.run_once(dry_run=True)
    if result.unreachable:
        raise AclSyncError("; ".join(result.unreachable.values()))
    plan = result.plan
    missing = {cluster: list(acls) for cluster, acls in plan.creates.items()}
    drift = any(missing.values()) or bool(plan.untranslatable)
    if as_json:
        print_json({
            "drift": drift,
            "clusters": {c: {"missing": [_acl_dict(a) for a in acls], "synced": len(plan.keys[c])} for c, acls in missing.items()},
            "untranslatable": [{"cluster": cluster, **_acl_dict(key)}
                               for cluster, keys in plan.untranslatable.items() for key in keys],
        })
    else:
        for cluster, acls in missing.items():
            if not acls:
                console.print(f"{cluster}: [green]in sync[/] ({len(plan.keys[cluster])} synced ACL(s))")
            for acl in acls:
                console.print(f"{cluster}: [red]missing[/] {acl}")
        for cluster, keys in plan.untranslatable.items():
            for key in keys:
                console.print(f"{cluster}: [red]cannot hold[/] {key} (no legal name under its topic_format)")
        console.print("[red]ACLs drift[/]" if drift else "[green]every cluster holds the same ACLs[/]")
    if drift:
        raise typer.Exit(1)


@acls_app.command("sync")
def sync_command(config: Path = ConfigOption, dry_run: bool = dry_run_option("create")) -> None:
    """One ACL sync pass: create on each cluster the synced ACLs it lacks; print what it did.

    Example: treedist acls sync -c deploy.yaml --dry-run"""
    from treedist.acls.sync import AclSync

    result = AclSync(load(config)).run_once(dry_run=dry_run, raise_errors=False)
    print_skipped(result.unreachable.values())
    done = result.plan.creates if dry_run else result.created
    verb = "would create" if dry_run else "created"
    count = 0
    for cluster, acls in done.items():
        for acl in acls:
            count += 1
            console.print(f"{verb} on {cluster}: {acl}")
    console.print(f"{count} ACL(s) {'to create (dry run)' if dry_run else 'created'}")
    exit_if_failed(result.errors)
