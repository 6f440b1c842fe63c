"""`treedist registry serve`: one cluster's Confluent-compatible schema registry."""

from __future__ import annotations

from pathlib import Path

import typer

from treedist.cli.endpoint_options import (AuthPasswordOption, AuthUserOption, InsecureOption, TlsCertOption, TlsKeyOption,
                                          exposure)
from treedist.cli.status_cmd import LogFileOption, LogLevelOption
from treedist.config import load_deployment

registry_app = typer.Typer(help="The Confluent-compatible schema registry kept in a cluster's _schemas topic.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(registry_app, name="registry")


@registry_app.command("serve")
def serve(
    config: Path = typer.Option(..., "--config", "-c", help="Deployment YAML."),
    cluster: str = typer.Option(..., "--cluster", help="The cluster whose _schemas topic holds this registry's state."),
    port: int = typer.Option(None, "--port", help="Port (default: the port of schemas.registries.<cluster>, else 8081)."),
    host: str = typer.Option("127.0.0.1", "--bind", "--host", help="Address to listen on (loopback by default); any "
                                                                "other needs --auth-user/--auth-password, or --insecure."),
    tls_cert: Path = TlsCertOption,
    tls_key: Path = TlsKeyOption,
    auth_user: str = AuthUserOption,
    auth_password: str = AuthPasswordOption,
    insecure: bool = InsecureOption,
    log_level: str = LogLevelOption,
    log_file: Path = LogFileOption,
) -> None:
    """Replay the cluster's _schemas topic, then serve the REST API until SIGINT/SIGTERM.

    Clients give the basic-auth user and password as `basic.auth.user.info` (or in the URL)
    and trust --tls-cert's CA with `ssl.ca.location`.

    Example: treedist registry serve -c deploy.yaml --cluster c1 --port 8081"""
    from treedist.ops.logs import setup_logging
    from treedist.registry.serve import serve_forever

    exposed = exposure(host, tls_cert, tls_key, auth_user, auth_password, insecure)  # refused before any work
    setup_logging(log_level, log_file)
    deployment = load_deployment(config)
    deployment.cluster(cluster)
    serve_forever(deployment, cluster, port, exposure=exposed)
