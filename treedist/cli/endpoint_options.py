"""The options of every command that serves HTTP (`run`, `status`, `worker`, `registry serve`),
each declared once here: where it listens and how it is protected (treedist.endpoints), which
ports it serves, and where it logs. The flag names and defaults are a contract.

A command takes the six exposure flags (--bind, --tls-cert, --tls-key, --auth-user,
--auth-password, --insecure) as one checked `Exposure`: a parameter
`exposed: Exposure = EXPOSURE_FLAGS` and the `@exposed_by_flags()` decorator, which declares
the flags in its place and checks them before the command does any work (EndpointError,
exit 2, naming the flag)."""

from __future__ import annotations

import functools
import inspect
import typing
from pathlib import Path
from typing import Any, Callable

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

UiPortOption = typer.Option(0, "--ui-port", help="Serve the live web view on 127.0.0.1:PORT (or --bind; 0: off).")
StatusPortOption = typer.Option(0, "--status-port", help="Serve this worker's own view on "
                                                         "127.0.0.1:PORT/api/worker, /healthz and /readyz "
                                                         "(or --bind; 0: off).")
RunStatusPortOption = typer.Option(0, "--status-port", help="Serve /healthz, /readyz (every query running) and "
                                                            "/api/status on 127.0.0.1:PORT (or --bind; 0: off), "
                                                            "from before the queries start.")
LogLevelOption = typer.Option("warning", "--log-level", help="debug, info, warning or error (long-running commands).")
LogFileOption = typer.Option(None, "--log-file", help="Also write the log to this file.")


class _ExposureFlags:
    """The placeholder default of a command's `exposed` parameter (see exposed_by_flags)."""

    def __repr__(self) -> str:
        return "EXPOSURE_FLAGS"


EXPOSURE_FLAGS: Any = _ExposureFlags()


def metrics_port_option(what: str = "") -> Any:
    """--metrics-port (default 0: off); `what` says whose metrics, e.g. " of the units this
    worker runs"."""
    return typer.Option(0, "--metrics-port", help=f"Serve Prometheus metrics{what} on 127.0.0.1:PORT/metrics "
                                                  "(or --bind; 0: off).")


def exposed_by_flags(bind: Any = BindOption) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator of a command with a parameter `exposed: Exposure = EXPOSURE_FLAGS`: typer sees the six
    exposure flags in its place (`bind`: the --bind option, `registry serve` adds --host);
    the command gets them checked as one Exposure, before its own first line."""
    flags = {"bind": (str, bind), "tls_cert": (Path, TlsCertOption), "tls_key": (Path, TlsKeyOption),
             "auth_user": (str, AuthUserOption), "auth_password": (str, AuthPasswordOption),
             "insecure": (bool, InsecureOption)}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command)
        own = list(inspect.signature(command).parameters.values())
        names = [p.name for p in own if p.default is EXPOSURE_FLAGS]
        if len(names) != 1:
            raise TypeError(f"{command.__name__}: @exposed_by_flags needs one parameter defaulting to EXPOSURE_FLAGS")
        params: list[inspect.Parameter] = []
        for param in own:
            if param.default is EXPOSURE_FLAGS:  # the six flags in its place, in this order
                params += [inspect.Parameter(flag, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=option, annotation=kind)
                           for flag, (kind, option) in flags.items()]
            else:
                params.append(param.replace(annotation=hints.get(param.name, param.annotation)))

        @functools.wraps(command)
        def wrapper(**kwargs: Any) -> Any:
            exposed = exposure(*(kwargs.pop(flag) for flag in flags))  # refused before any work
            return command(**kwargs, **{names[0]: exposed})

        wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params}
        return wrapper

    return decorate


def exposure(bind: str, tls_cert: Path | None, tls_key: Path | None, auth_user: str | None, auth_password: str | None,
             insecure: bool) -> Exposure:
    """The checked Exposure of the options above (EndpointError, exit 2, naming the flag)."""
    return from_flags(bind, tls_cert, tls_key, auth_user, auth_password, insecure)
