"""WebHDFS (HDFS's HTTP REST API) as a pyarrow file system: the files treedist keeps beside an
`hdfs://` checkpoint, without libhdfs or a JVM.

Runs in every process that opens a `treedist.spark.checkpoint_fs.Store` on an hdfs://
location: executors (copy-ahead intents), the query's planner, the driver and `treedist
status`. pyarrow's own `HadoopFileSystem` needs libhdfs, libjvm and a Hadoop installation,
which PySpark does not ship; WebHDFS needs only HTTP to the namenode (metadata, and a redirect
for data) and to the datanodes (data). It is on by default in Hadoop 3 (`dfs.webhdfs.enabled`).

Where the namenode's HTTP address comes from (`http_address`): `dfs.namenode.http-address`
(`spark.hadoop.dfs.namenode.http-address` in the deployment's `spark.conf`) when set, else the
namenode host of the location with Hadoop 3's default port 9870. The user (simple
authentication's `user.name`): `hadoop.user.name`, else `HADOOP_USER_NAME`, else the OS user;
plans carry the driver's (`checkpoint_fs.plan_options`).
Kerberos (SPNEGO) and HTTPS are not supported.

Each request is bounded: a timeout, and up to `ATTEMPTS` attempts when the server cannot be
reached, answers 503, or names a standby, safe-mode or retriable state (`RETRIABLE`), with a
short back-off. Other error answers are not retried: a missing file (WebHDFS's
FileNotFoundException) is `FileNotFoundError`, anything else `OSError` naming the operation,
the path and the server's exception, or saying the answer is not WebHDFS's.
"""

from __future__ import annotations

import getpass
import http.client
import io
import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.fs as pafs

DEFAULT_HTTP_PORT = 9870  # Hadoop 3's dfs.namenode.http-address port
HTTP_ADDRESS = "dfs.namenode.http-address"  # (checkpoint_fs._HDFS_KEYS names both)
USER = "hadoop.user.name"
ATTEMPTS = 3
TIMEOUT_S = 20.0
BACKOFF_S = 0.3
# RemoteException names of a namenode that cannot answer now but will (Hadoop's WebHDFS sends
# them as 403, so the status code alone does not tell them from a refusal)
RETRIABLE = frozenset({"StandbyException", "RetriableException", "SafeModeException"})


def http_address(authority: str, options: Mapping[str, str]) -> str:
    """`http://host:port` of the namenode's WebHDFS for an hdfs:// location's authority
    (pure). A configured wildcard host (0.0.0.0, the bind address) is replaced by the
    location's host. ValueError when neither names a host."""
    host = authority.rpartition("@")[2].partition(":")[0]
    configured = options.get(HTTP_ADDRESS, "").strip()
    if configured:
        if "://" in configured:
            return configured.rstrip("/")
        conf_host, _, port = configured.rpartition(":") if ":" in configured else (configured, "", "")
        if conf_host in ("", "0.0.0.0", "[::]", "::"):
            conf_host = host
        if not conf_host:
            raise ValueError(f"{HTTP_ADDRESS}={configured!r} names no host and the location names none")
        return f"http://{conf_host}:{port or DEFAULT_HTTP_PORT}"
    if not host:
        raise ValueError(f"the location names no namenode host: set spark.hadoop.{HTTP_ADDRESS}")
    return f"http://{host}:{DEFAULT_HTTP_PORT}"


def user(options: Mapping[str, str]) -> str:
    return options.get(USER) or os.environ.get("HADOOP_USER_NAME") or getpass.getuser()


class WebHdfs(pafs.FileSystemHandler):
    """A pyarrow file system handler over WebHDFS (wrap it in `pyarrow.fs.PyFileSystem`).
    Paths are absolute HDFS paths (`/td/messages/c1`). Only what `Store` uses is implemented."""

    def __init__(self, base: str, user_name: str, timeout_s: float = TIMEOUT_S, attempts: int = ATTEMPTS):
        self.base = base.rstrip("/")
        self.user_name = user_name
        self.timeout_s = timeout_s
        self.attempts = attempts

    # -- requests ------------------------------------------------------------------------

    def _url(self, path: str, op: str, **params: str) -> str:
        query = urllib.parse.urlencode({"op": op, "user.name": self.user_name, **params})
        return f"{self.base}/webhdfs/v1{urllib.parse.quote(path)}?{query}"

    def _call(self, method: str, path: str, op: str, data: bytes | None = None, **params: str) -> bytes:
        """One operation, its answer's body. CREATE follows the namenode's 307 to a datanode
        by hand (urllib follows redirects for GET only; OPEN's GET is followed by urllib)."""
        url = self._url(path, op, **params)
        for attempt in range(1, self.attempts + 1):
            try:
                if op == "CREATE":
                    return self._send("PUT", self._redirect(url), data or b"")
                return self._send(method, url, data)
            except urllib.error.HTTPError as err:
                name, failure = _error(err, op, path)
                # 503, or a namenode that says "not now" (standby, safe mode: Hadoop answers those
                # with 403 and names them); any other error answer is final
                if (err.code != 503 and name not in RETRIABLE) or attempt == self.attempts:
                    raise failure from None
                cause: Exception = failure
            except (urllib.error.URLError, http.client.HTTPException, OSError) as err:
                if attempt == self.attempts:
                    raise OSError(f"WebHDFS at {self.base} did not answer {op} {path} "
                                  f"after {self.attempts} attempts: {getattr(err, 'reason', err)}") from None
                cause = err
            time.sleep(BACKOFF_S * attempt)  # then again: the namenode restarting or failing over
        raise AssertionError(cause)  # not reached: the last attempt returns or raises

    def _redirect(self, url: str) -> str:
        """The datanode URL the namenode sends a CREATE to (its 307's Location)."""
        try:
            self._send("PUT", url, None)
        except urllib.error.HTTPError as err:
            if err.code == 307 and err.headers.get("Location"):
                err.close()  # the answer's socket, not left to the garbage collector
                return err.headers["Location"]
            raise
        raise http.client.HTTPException(f"the namenode did not redirect {url}")

    def _send(self, method: str, url: str, data: bytes | None) -> bytes:
        request = urllib.request.Request(url, data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/octet-stream")
        with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
            return answer.read()

    def _status(self, path: str) -> dict[str, Any] | None:
        try:
            return json.loads(self._call("GET", path, "GETFILESTATUS"))["FileStatus"]
        except FileNotFoundError:
            return None

    # -- pyarrow's FileSystemHandler ---------------------------------------------------------

    def get_type_name(self) -> str:
        return "webhdfs"

    def equals(self, other: Any) -> bool:
        return isinstance(other, WebHdfs) and (other.base, other.user_name) == (self.base, self.user_name)

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        return [_info(path, self._status(path)) for path in paths]

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.rstrip("/") or "/"
        try:
            listed = json.loads(self._call("GET", base, "LISTSTATUS"))["FileStatuses"]["FileStatus"]
        except FileNotFoundError:
            if selector.allow_not_found:
                return []
            raise
        out = []
        for status in listed:
            info = _info(f"{base.rstrip('/')}/{status['pathSuffix']}", status)
            out.append(info)
            if selector.recursive and info.type == pafs.FileType.Directory:
                out.extend(self.get_file_info_selector(pafs.FileSelector(info.path, recursive=True)))
        return out

    def create_dir(self, path: str, recursive: bool) -> None:
        self._call("PUT", path, "MKDIRS")  # always with its parents, as HDFS's mkdirs does

    def delete_dir(self, path: str) -> None:
        self._delete(path, recursive=True)

    def delete_file(self, path: str) -> None:
        self._delete(path, recursive=False)

    def _delete(self, path: str, recursive: bool) -> None:
        answer = json.loads(self._call("DELETE", path, "DELETE", recursive=str(recursive).lower()))
        if not answer.get("boolean"):  # WebHDFS answers false, not 404, for a missing path
            raise FileNotFoundError(f"{self.base}{path}: no such file")

    def move(self, src: str, dest: str) -> None:
        """HDFS's rename with OVERWRITE (`rename2`): atomic, replacing a file at `dest`.
        WebHDFS's documented RENAME refuses an existing destination; `renameoptions` is what
        Hadoop's own WebHdfsFileSystem sends for the overwriting rename."""
        self._call("PUT", src, "RENAME", destination=dest, renameoptions="OVERWRITE")

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self._call("GET", path, "OPEN"))

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        """Bytes gathered in memory and sent by one CREATE (overwrite) when the stream closes:
        the files beside a checkpoint are small."""
        return pa.PythonFile(_Upload(self, path), mode="w")

    def open_input_file(self, path: str) -> pa.NativeFile:
        raise NotImplementedError("WebHdfs: random access is not needed beside a checkpoint")

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        raise NotImplementedError("WebHdfs: appending is not needed beside a checkpoint")

    def copy_file(self, src: str, dest: str) -> None:
        raise NotImplementedError("WebHdfs: copying is not needed beside a checkpoint")

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        raise NotImplementedError("WebHdfs: not needed beside a checkpoint")

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError("WebHdfs: not needed beside a checkpoint")


class _Upload(io.BytesIO):
    """An output stream's bytes, sent by one CREATE when it is closed."""

    def __init__(self, client: WebHdfs, path: str):
        super().__init__()
        self.client, self.path = client, path

    def close(self) -> None:
        if not self.closed:
            data = self.getvalue()
            super().close()
            self.client._call("PUT", self.path, "CREATE", data, overwrite="true")


def _info(path: str, status: Mapping[str, Any] | None) -> pafs.FileInfo:
    if status is None:
        return pafs.FileInfo(path, pafs.FileType.NotFound)
    kind = pafs.FileType.Directory if status.get("type") == "DIRECTORY" else pafs.FileType.File
    return pafs.FileInfo(path, kind, size=int(status.get("length", 0)),
                         mtime_ns=int(status.get("modificationTime", 0)) * 1_000_000)


def _error(err: urllib.error.HTTPError, op: str, path: str) -> tuple[str, OSError]:
    """The server's RemoteException's name, and the answer as an exception:
    FileNotFoundError only when WebHDFS says FileNotFoundException. A 404 without one is not
    WebHDFS's answer (a wrong port, WebHDFS off, a proxy): reading it as "no such file" would
    make status show nothing instead of naming the location."""
    try:
        remote = json.loads(err.read() or b"{}").get("RemoteException", {})
    except (ValueError, OSError, AttributeError):
        remote = {}
    finally:
        err.close()
    name, message = remote.get("exception", ""), remote.get("message", err.reason)
    if not name:
        return "", OSError(f"WebHDFS {op} {path}: HTTP {err.code} {err.reason}: not an answer of WebHDFS "
                           f"(check dfs.namenode.http-address)")
    text = f"WebHDFS {op} {path}: HTTP {err.code} {name}: {message}"
    return name, (FileNotFoundError(text) if name == "FileNotFoundException" else OSError(text))
