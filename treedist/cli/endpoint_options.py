"""The options of every command that serves HTTP (`run`, `status`, `worker`, `registry serve`):
where it listens and how it is protected (treedist.endpoints)."""

from __future__ import annotations

from pathlib import Path

import typer

from treedist.endpoints import LOOPBACK, Exposure, from_flags

BindOption = typer.Option(LOOPBACK, "--bind", help="Address the HTTP endpoints listen on (loopback by default); "
                                                   "any other needs --auth-user/--auth-password, or --insecure.")
TlsCertOption = typer.Option(None, "--tls-cert", help="Serve HTTPS with this PEM certificate (chain) file; with --tls-key.")
TlsKeyOption = typer.Option(None, "--tls-key", help="The certificate's unencrypted PEM private key file.")
AuthUserOption = typer.Option(None, "--auth-user", help="Require HTTP basic auth with this user (and --auth-password).")
AuthPasswordOption = typer.Option(None, "--auth-password", help="The basic-auth password; give it as ${env:NAME} or "
                                                                "${file:/path} (a literal one shows in `ps`).")
InsecureOption = typer.Option(False, "--insecure", help="Serve on a non-loopback --bind without authentication.")


def exposure(bind: str, tls_cert: Path | None, tls_key: Path | None, auth_user: str | None, auth_password: str | None,
             insecure: bool) -> Exposure:
    """The checked Exposure of the options above (EndpointError, exit 2, naming the flag)."""
    return from_flags(bind, tls_cert, tls_key, auth_user, auth_password, insecure)
