"""Secrets in a deployment: references resolved at load, and masking for everything printed
(driver and CLI processes: wherever a deployment is loaded or shown).

References follow Kafka's config providers: `${env:NAME}` is the environment variable NAME,
`${file:/absolute/path}` the content of that file (one trailing newline dropped, as an
editor or `echo` leaves it). They may stand anywhere in a string value of the deployment,
alone or inside a longer string (`http://svc:${env:REG_PW}@registry:8081`); keys are never
resolved, and a resolved value is not resolved again (a secret that happens to contain
`${env:...}` stays as it is). Other `${...}` text is left alone, as Kafka leaves a variable
of an unknown provider. The deployment file, etcd and every output hold the reference; only
the loaded, in-memory deployment holds the value, and no error names it.

Masking: a value under a secret key (`is_secret_key`) is printed as `***` unless it is only
references; a URL's `user:password@` has its password printed as `***`.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Callable, Mapping, Sequence

from treedist.config.errors import ConfigError

# Keys whose values are credentials (librdkafka, Schema Registry clients, deployment fields):
# kept as SecretStr in the model and never printed. `sasl.oauthbearer.config` holds a client
# secret among other settings; `basic.auth.user.info` is `user:password`; `sasl.jaas.config`
# (Java clients) carries a password inline.
SECRET_KEY = re.compile(
    r"(password|secret|token|credentials|\.key\.pem$|sasl\.oauthbearer\.config$|basic\.auth\.user\.info$"
    r"|sasl\.jaas\.config$)",
    re.I,
)
REFERENCE = re.compile(r"\$\{(env|file):([^}]*)\}")
MASK = "***"
# scheme://user:password@ ; userinfo ends at '@' and holds no '/', '?' or '#' (RFC 3986)
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^:/?#@\s]*:)(?P<password>[^/?#@\s]*)@")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_FILE_BYTES = 1 << 20  # a secret is small; `${file:/dev/zero}` must not read forever


def is_secret_key(key: object) -> bool:
    """Whether a value under `key` is a credential."""
    return SECRET_KEY.search(str(key)) is not None


def mask_url(text: str) -> str:
    """`text` with the password of every `scheme://user:password@` replaced by `***`."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group('head')}{MASK}@" if m.group("password") else m.group(0), text)


def is_reference_only(value: object) -> bool:
    """Whether `value` is nothing but references (then it names where a secret is, not the secret)."""
    return isinstance(value, str) and bool(value) and REFERENCE.sub("", value) == "" and REFERENCE.search(value) is not None


def mask_value(key: object, value: Any) -> Any:
    """How `value` under `key` may be printed."""
    if isinstance(value, (dict, list, tuple)):
        return mask_spec(value)
    if is_secret_key(key) and value is not None and value != "" and not is_reference_only(value):
        return MASK
    return mask_url(value) if isinstance(value, str) else value


def mask_spec(spec: Any) -> Any:
    """A copy of a deployment mapping (or any part of it) safe to print."""
    if isinstance(spec, Mapping):
        return {k: mask_value(k, v) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [mask_spec(v) for v in spec]
    return mask_url(spec) if isinstance(spec, str) else spec


def mask_assignment(assignment: str) -> str:
    """A `PATH=VALUE` of `treedist config set`, safe to echo: the value is masked as a value
    under the path's last key would be (the path may end in a dotted key like
    `sasl.password`), and masked whole when it mentions a secret key itself (a mapping such
    as `clusters.c1.client={sasl.password: x}`: its text, not its parse, decides, so a
    value YAML reads unexpectedly is never echoed either)."""
    path, eq, value = assignment.partition("=")
    if not eq:
        return mask_url(assignment)
    if is_secret_key(path):
        return f"{path}={mask_value(path, value)}"
    return f"{path}={MASK if is_secret_key(value) else mask_url(value)}"


@dataclass
class Resolved:
    """A deployment mapping with its references resolved, and what each resolved value came
    from (so that an error message can name the reference instead of the value)."""

    spec: Any
    values: dict[str, str] = field(default_factory=dict)  # resolved value -> its reference

    def redact(self, message: str) -> str:
        """`message` with every resolved value replaced by its reference; longest first, so
        that a value containing another is replaced whole."""
        for value in sorted(self.values, key=len, reverse=True):
            if value:
                message = message.replace(value, self.values[value])
        return message


# Which references a spec from elsewhere (etcd) may resolve on this host: None allows all.
ReferenceRule = Callable[[str], bool] | None


def references(spec: Any) -> frozenset[str]:
    """Every reference (`${env:..}`, `${file:..}`) written in `spec`'s string values."""
    found: set[str] = set()

    def one(text: str, where: str) -> str:
        found.update(match.group(0) for match in REFERENCE.finditer(text))
        return text

    try:
        _walk(spec, "", one)
    except RecursionError:
        pass  # too deep to hold references the loader would accept either
    return frozenset(found)


def local_rule(local_spec: Any, patterns: Sequence[str] = ()) -> Callable[[str], bool]:
    """Worker (driver side): the references a deployment read from etcd may resolve here:
    those the worker's own file uses, and those matching `patterns` (fnmatch, from the
    worker's own `control.allowed_references`).

    Why: a worker resolves references with its own environment and files, so whoever can
    write etcd could otherwise point a credential field at `${file:/root/.ssh/id_rsa}` or
    `${env:AWS_SECRET_ACCESS_KEY}` and, with a bootstrap server of their own, receive it."""
    known = references(local_spec)
    return lambda ref: ref in known or any(fnmatchcase(ref, pattern) for pattern in patterns)


def resolve(spec: Any, source: str, environ: Mapping[str, str] | None = None, allowed: ReferenceRule = None) -> Resolved:
    """`spec` (a deployment mapping as YAML gives it) with every reference resolved.

    A reference that cannot be resolved is a ConfigError naming the file, the field and the
    reference: an unset variable, an unreadable file, one `allowed` refuses; never a value."""
    resolved = Resolved(None)
    env = os.environ if environ is None else environ
    try:
        resolved.spec = _walk(spec, "", lambda text, where: _resolve_text(text, where, source, env, resolved, allowed))
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply") from None
    return resolved


def check(spec: Any, source: str) -> None:
    """Check every reference's form without resolving it (a change validated on a machine
    that need not hold the worker's secrets): ConfigError naming the field and reference."""
    def one(text: str, where: str) -> str:
        for match in REFERENCE.finditer(text):
            _check_form(match, where, source)
        return text

    try:
        _walk(spec, "", one)
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply") from None


def _walk(node: Any, where: str, on_text, path: frozenset[int] = frozenset()) -> Any:
    if isinstance(node, (Mapping, list)):
        if id(node) in path:
            return node  # a YAML alias inside itself: left for validation to name, as without references
        path = path | {id(node)}
        if isinstance(node, Mapping):
            return {k: _walk(v, f"{where}.{k}" if where else str(k), on_text, path) for k, v in node.items()}
        return [_walk(v, f"{where}[{i}]", on_text, path) for i, v in enumerate(node)]
    if isinstance(node, str) and "${" in node:
        return on_text(node, where or "<top level>")
    return node


def _check_form(match: re.Match, where: str, source: str) -> None:
    provider, arg = match.group(1), match.group(2)
    ref = match.group(0)
    if provider == "env" and not _ENV_NAME.match(arg):
        raise ConfigError(f"{source}: {where}: {ref}: not an environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
    if provider == "file" and not os.path.isabs(arg):
        raise ConfigError(f"{source}: {where}: {ref}: the file must be an absolute path")


def _resolve_text(text: str, where: str, source: str, env: Mapping[str, str], resolved: Resolved,
                  allowed: ReferenceRule = None) -> str:
    def one(match: re.Match) -> str:
        _check_form(match, where, source)
        provider, arg, ref = match.group(1), match.group(2), match.group(0)
        if allowed is not None and not allowed(ref):
            raise ConfigError(f"{source}: {where}: {ref}: not resolved here: this worker's own file neither uses it "
                              f"nor allows it (control.allowed_references)")
        if provider == "env":
            if arg not in env:
                raise ConfigError(f"{source}: {where}: {ref}: environment variable {arg} is not set")
            value = env[arg]
        else:
            value = _read_secret_file(arg, f"{source}: {where}: {ref}")
        resolved.values.setdefault(value, ref)
        return value

    out = REFERENCE.sub(one, text)  # one pass: a resolved value is never resolved again
    if out != text:
        resolved.values.setdefault(out, text)  # the whole string too (a URL with a password in it)
    return out


def _read_secret_file(path: str, what: str) -> str:
    try:
        # O_NONBLOCK: opening a FIFO that nobody writes to blocked forever (found by
        # tests/fuzz/test_config.py); only a regular file is read (a device could stream forever)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            os.close(fd)
            if stat.S_ISDIR(mode):
                raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
            raise ConfigError(f"{what}: not a regular file (a FIFO, socket or device)")
        with open(fd, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError as err:
        raise ConfigError(f"{what}: cannot read: {err.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError(f"{what}: larger than {MAX_FILE_BYTES} bytes; not a secret file")
    try:
        text = data.decode()
    except UnicodeDecodeError as err:
        raise ConfigError(f"{what}: not UTF-8 text (byte {err.start})") from None
    return text.removesuffix("\n").removesuffix("\r")
