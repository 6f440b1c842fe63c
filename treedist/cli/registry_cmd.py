"""`treedist registry serve`: one cluster's Confluent-compatible schema registry."""

from __future__ import annotations

from pathlib import Path

import typer

from treedist.cli.endpoint_options import EXPOSURE_FLAGS, LogFileOption, LogLevelOption, exposed_by_flags
from treedist.config import load_deployment
from treedist.endpoints import LOOPBACK, Exposure

registry_app = typer.Typer(help="The Confluent-compatible schema registry kept in a cluster's _schemas topic.", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(registry_app, name="registry")


# --host too: the registry's flag before --bind was shared
HostOption = typer.Option(LOOPBACK, "--bind", "--host", help="Address to listen on (loopback by default); any other needs "
                                                            "--auth-user/--auth-password, or --insecure.")


@registry_app.command("serve")
@exposed_by_flags(bind=HostOption)
def serve(
    config: Path = typer.Option(..., "--config", "-c", help="Deployment YAML."),
    cluster: str = typer.Option(..., "--cluster", help="The cluster whose _schemas topic holds this registry's state."),
    port: int = typer.Option(None, "--port", help="Port (default: the port of schemas.registries.<cluster>, else 8081)."),
    exposed: Exposure = EXPOSURE_FLAGS,  # --bind/--host, --tls-cert, --tls-key, --auth-user, --auth-password, --insecure
    log_level: str = LogLevelOption,
    log_file: Path = LogFileOption,
) -> None:
    """Replay the cluster's _schemas topic, then serve the REST API until SIGINT/SIGTERM.

    Clients give the basic-auth user and password as `basic.auth.user.info` (or in the URL)
    and trust --tls-cert's CA with `ssl.ca.location`.

    Example: treedist registry serve -c deploy.yaml --cluster c1 --port 8081"""
    from treedist.ops.logs import setup_logging
    from treedist.registry.serve import serve_forever

    setup_logging(log_level, log_file)
    deployment = load_deployment(config)
    deployment.cluster(cluster)
    serve_forever(deployment, cluster, port, exposure=exposed)
