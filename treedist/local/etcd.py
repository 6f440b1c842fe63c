"""A local etcd server on loopback for the control plane of local runs and tests (driver of
the process that starts it).

Debian's `etcd-server` package gives `/usr/bin/etcd` (3.4 here; `scripts/bootstrap` installs it
when missing). One member, client and peer URLs on free 127.0.0.1 ports, its own data dir and
log file, its own session (a Ctrl-C in the terminal does not reach it), stopped by PID after
checking the PID is still our etcd. `restart()` starts it again on the same data dir and ports
(what an operator's restart does; tests restart etcd under load). A state file beside the
data dir lets `treedist local status|down` find it.

Secured (`secured=True`, what `treedist local up` and the demo start unless asked for a plain
one): TLS on the client URL with client certificates (`--client-cert-auth`) and etcd's
authentication on. Made once per state dir and kept with the data (a restart or a second
`local up` re-uses them): a CA, a server certificate for 127.0.0.1/localhost and a client
certificate without a Common Name (treedist.local.secured), under `tls/`; a `root` user and a
user USER whose role may read and write only `<prefix>/`; their passwords in 0600 files beside
the data, which the deployment names as `${file:...}` references (`LocalEtcd.control`).
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import ssl
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from treedist.local.errors import LocalClusterError
from treedist.local.launcher import HOST, free_port, live_cmdline, pid_alive, stop_pid
from treedist.local.secured import TlsFiles, create_tls, make_client_cert
from treedist.local.statefile import read_state, write_state

STATE_FILE = "etcd.json"
SECURED, PLAIN = "secured", "plain"  # `--etcd-mode` of `treedist local up` and `treedist run`
MODES = (SECURED, PLAIN)
USER = "treedist"  # the user a deployment logs in as, and its role
PREFIX = "/treedist"  # control.prefix's default: the role may touch PREFIX + "/"
PASSWORD_FILE, ROOT_PASSWORD_FILE = "treedist.password", "root.password"


def etcd_binary() -> str:
    found = shutil.which("etcd")
    if found is None:
        raise LocalClusterError("etcd is not installed: install Debian's etcd-server package "
                                "(apt-get install etcd-server; scripts/bootstrap does it) or put etcd on the PATH")
    return found


@dataclass
class LocalEtcd:
    pid: int
    client_port: int
    peer_port: int
    data_dir: str
    log_file: str
    base_dir: str
    secured: bool = False  # TLS, client certificates and authentication (state files before it: plain)
    prefix: str = PREFIX  # secured: USER's role may read and write `<prefix>/` only
    token_ttl_s: int | None = None  # etcd's --auth-token-ttl (None: its default, 300 s)

    @property
    def client_url(self) -> str:
        return f"{'https' if self.secured else 'http'}://{HOST}:{self.client_port}"

    @property
    def tls(self) -> TlsFiles:
        """The CA and the server's pair (secured; made by `start_etcd`)."""
        return _tls_files(Path(self.base_dir))

    @property
    def client_cert(self) -> Path:
        return Path(self.base_dir, "tls", "client", "client.crt")

    @property
    def client_key(self) -> Path:
        return Path(self.base_dir, "tls", "client", "client.key")

    @property
    def password_file(self) -> Path:
        return Path(self.base_dir, PASSWORD_FILE)

    def password(self, user: str = USER) -> str:
        return Path(self.base_dir, PASSWORD_FILE if user == USER else ROOT_PASSWORD_FILE).read_text()

    def ssl_context(self, client_cert: bool = True) -> ssl.SSLContext:
        """Trusts the local CA; presents the client certificate unless `client_cert` is False."""
        context = ssl.create_default_context(cafile=str(self.tls.ca_cert))
        if client_cert:
            context.load_cert_chain(str(self.client_cert), str(self.client_key))
        return context

    def control(self) -> dict:
        """The `control:` section of a deployment on this etcd: secured, with its TLS files
        and USER, whose password is a `${file:...}` reference to the 0600 file (never the value)."""
        if not self.secured:
            return {"etcd": [self.client_url]}
        return {"etcd": [self.client_url], "prefix": self.prefix,
                "etcd_tls": {"ca": str(self.tls.ca_cert), "cert": str(self.client_cert), "key": str(self.client_key)},
                "auth": {"user": USER, "password": f"${{file:{self.password_file}}}"}}

    def is_ours(self) -> bool:
        """The PID is still an etcd process on our data dir (a state file outlives its processes)."""
        args = live_cmdline(self.pid)
        return bool(args) and Path(args[0]).name == "etcd" and self.data_dir in args

    def stop(self, grace: float = 5.0) -> None:
        if self.is_ours():
            stop_pid(self.pid, grace)

    def restart(self, timeout: float = 20.0) -> "LocalEtcd":
        """Stop (SIGTERM) and start again on the same data dir and ports."""
        self.stop()
        self.pid = _spawn(self)
        wait_ready(self, timeout)
        self.save()
        return self

    def save(self) -> None:
        write_state(self.base_dir, STATE_FILE, asdict(self))

    def status(self) -> dict:
        return {"url": self.client_url, "pid": self.pid, "running": self.is_ours(), "data_dir": self.data_dir,
                "secured": self.secured}

    @classmethod
    def load(cls, base_dir: str | Path) -> "LocalEtcd | None":
        raw = read_state(base_dir, STATE_FILE)
        return None if raw is None else cls(**raw)


def start_etcd(base_dir: str | Path, timeout: float = 20.0, attempts: int = 3, *, secured: bool = False,
               prefix: str = PREFIX, token_ttl_s: int | None = None) -> LocalEtcd:
    """Start etcd with its data under `base_dir`; wait until it answers. A port another process
    took between choosing it and binding it is chosen again (bounded attempts).

    Secured: 1. the certificates and passwords, made once (kept ones are re-used); 2. etcd
    started with TLS and `--client-cert-auth`; 3. users, role and authentication set up
    (`_enable_auth`, which finds them in kept data already done)."""
    base = Path(base_dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    data_dir, log_file = base / "data", base / "etcd.log"
    _check_mode(base, secured)
    if secured:
        _secure_files(base)
    for attempt in range(1, attempts + 1):
        etcd = LocalEtcd(0, free_port(), free_port(), str(data_dir), str(log_file), str(base),
                         secured=secured, prefix=prefix, token_ttl_s=token_ttl_s)
        etcd.pid = _spawn(etcd)
        try:
            wait_ready(etcd, timeout)
            if secured:
                _enable_auth(etcd)
        except LocalClusterError:
            etcd.stop(grace=1.0)
            if attempt == attempts:
                raise
            continue
        etcd.save()
        return etcd
    raise AssertionError("unreachable")


def _spawn(etcd: LocalEtcd) -> int:
    # the peer URL stays plain: one member, on loopback, and it never has peers
    client, peer = etcd.client_url, f"http://{HOST}:{etcd.peer_port}"
    secured: list[str] = []
    if etcd.secured:
        secured = ["--cert-file", str(etcd.tls.broker_cert), "--key-file", str(etcd.tls.broker_key),
                   "--trusted-ca-file", str(etcd.tls.ca_cert), "--client-cert-auth", "--auth-token", "simple"]
        if etcd.token_ttl_s is not None:
            secured += ["--auth-token-ttl", str(etcd.token_ttl_s)]
    with open(etcd.log_file, "ab") as log:
        proc = subprocess.Popen(
            [etcd_binary(), "--name", "treedist", "--data-dir", etcd.data_dir,
             "--listen-client-urls", client, "--advertise-client-urls", client,
             "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
             "--initial-cluster", f"treedist={peer}", *secured, "--log-level", "warn"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
    return proc.pid


def _tls_files(base: Path) -> TlsFiles:
    tls = base / "tls"
    return TlsFiles(tls / "ca.crt", tls / "ca.key", tls / "broker.crt", tls / "broker.key")


def _secure_files(base: Path) -> None:
    """The CA, server and client certificates and both passwords, each made only when missing
    (kept ones are what the kept data and running clients already use)."""
    tls = create_tls(base / "tls")  # CA + server certificate for 127.0.0.1/localhost
    client_dir = base / "tls" / "client"
    if not ((client_dir / "client.crt").exists() and (client_dir / "client.key").exists()):
        make_client_cert(client_dir, tls.ca_cert, tls.ca_key)
    for key in (tls.ca_key, tls.broker_key, client_dir / "client.key"):
        key.chmod(0o600)
    for name in (PASSWORD_FILE, ROOT_PASSWORD_FILE):
        path = base / name
        if not path.exists():
            # created 0600 (never world-readable, not even between create and chmod); no newline
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(18))


def _check_mode(base: Path, secured: bool) -> None:
    """Kept data is started in the mode it was made in: a plain start of an etcd whose data has
    authentication on would refuse every client, a secured start of plain data would reach it
    over a new TLS URL with an old data dir: both are one line naming the directory."""
    previous = LocalEtcd.load(base)
    if previous is not None and Path(previous.data_dir).exists() and previous.secured != secured:
        kept, asked = (SECURED, PLAIN) if previous.secured else (PLAIN, SECURED)
        raise LocalClusterError(f"the etcd data in {base} was made {kept}, and {asked} was asked: "
                                f"use --etcd-mode {kept}, or another --state-dir")


def _enable_auth(etcd: LocalEtcd) -> None:
    """Steps, each one repeatable (an interrupted set-up is finished by the next start):
    1. log in as root: if etcd accepts, authentication is on already (kept data): done;
    2. add `root` (role root), a role USER that may read and write `<prefix>/` and nothing
       else (the trailing '/' keeps `<prefix>2` out), and the user USER with that role;
    3. turn authentication on."""
    import httpx

    from treedist.control.etcd import prefix_end

    def b64(text: str) -> str:
        return base64.b64encode(text.encode("latin-1")).decode()

    with httpx.Client(verify=etcd.ssl_context(), timeout=10) as http:
        login = http.post(etcd.client_url + "/v3/auth/authenticate", json={"name": "root", "password": etcd.password("root")})
        if login.status_code == 200:
            return
        if "not enabled" not in login.text:
            raise LocalClusterError(f"local etcd at {etcd.client_url}: root could not log in with "
                                    f"{Path(etcd.base_dir, ROOT_PASSWORD_FILE)}: {login.text[:200]}")
        keys = etcd.prefix + "/"
        for path, body in (
            ("/v3/auth/user/add", {"name": "root", "password": etcd.password("root")}),
            ("/v3/auth/user/grant", {"user": "root", "role": "root"}),
            ("/v3/auth/role/add", {"name": USER}),
            ("/v3/auth/role/grant", {"name": USER, "perm": {"permType": "READWRITE", "key": b64(keys),
                                                           "range_end": b64(prefix_end(keys))}}),
            ("/v3/auth/user/add", {"name": USER, "password": etcd.password()}),
            ("/v3/auth/user/grant", {"user": USER, "role": USER}),
            ("/v3/auth/enable", {}),
        ):
            answer = http.post(etcd.client_url + path, json=body)
            if answer.status_code != 200 and "already exists" not in answer.text:
                raise LocalClusterError(f"local etcd at {etcd.client_url}: {path} failed: {answer.text[:200]}")


def wait_ready(etcd: LocalEtcd, timeout: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    last = "no answer"
    verify = etcd.ssl_context() if etcd.secured else True
    while time.monotonic() < deadline:
        if not pid_alive(etcd.pid):
            raise LocalClusterError(f"local etcd exited at start; see {etcd.log_file}")
        try:
            answer = httpx.get(etcd.client_url + "/health", timeout=1.0, verify=verify)
            if answer.status_code == 200 and answer.json().get("health") in ("true", True):
                return
            last = answer.text[:200]
        except httpx.HTTPError as err:
            last = str(err)
        time.sleep(0.1)
    raise LocalClusterError(f"local etcd at {etcd.client_url} did not become healthy in {timeout:.0f} s: {last}; "
                            f"see {etcd.log_file}")
