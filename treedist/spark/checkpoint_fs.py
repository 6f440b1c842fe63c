"""The files treedist keeps beside Spark's checkpoints, on whatever file system holds them.

`checkpoint_location` is a plain path (a local directory, resolved against the working
directory), or a `file://`, `hdfs://` or `s3a://` URI. Spark's own checkpoint
(offset and commit logs) is opened by the driver's JVM through Hadoop's `FileSystem` (S3A
from `treedist.spark.hadoop_aws`). treedist's own files beside it, and where each is read and
written:

| file | written by | read by | here |
|---|---|---|---|
| copy-ahead intents `<checkpoint>/copied-ahead/<topic>~<partition>` | executor (task) | the query's planner (a Python process the driver's JVM starts) | `Store` |
| Spark's offset/commit logs, read for status and lag (`treedist.ops.checkpoint`) | driver's JVM | the driver, `treedist status`, the web view | `Store` |
| interrupted log writes, removed before a query starts (`treedist.spark.checkpoint_repair`) | driver's JVM | driver | `Store` |
| old per-(cluster, level) checkpoints (`treedist.records.legacy`) | (old versions) | planner | `Store` |
| live targets `<live_dir>/<cluster>-targets.json`, start-up holds | driver | planner, on the driver's host | stay local: not beside the checkpoint |

None of the processes that read or write through `Store` except the driver has a py4j
gateway (executors, planners and `treedist status` have no JVM at all), so a `Store` does not
use the JVM:

| location | a Store goes through | configured by (`spark.conf`, via `store_options`) |
|---|---|---|
| a path, `file://` | the local file system | - |
| `s3a://` | pyarrow's native `S3FileSystem` | the `spark.hadoop.fs.s3a.*` settings that configure the JVM's S3A (endpoint, keys, region, path style): one bucket, one key layout |
| `hdfs://` | WebHDFS, HTTP to the namenode and datanodes (`treedist.spark.webhdfs`, wrapped in pyarrow's `PyFileSystem`) | `spark.hadoop.dfs.namenode.http-address` (else the namenode's host, port 9870); user `spark.hadoop.hadoop.user.name` (read by treedist only), else the driver's `HADOOP_USER_NAME`, else its OS user (`plan_options`) |

Why not pyarrow's `HadoopFileSystem` for hdfs://: it needs libhdfs, libjvm and a Hadoop
installation (`HADOOP_HOME`, `CLASSPATH`) on every host, which PySpark does not ship
("Unable to load libjvm"); WebHDFS needs HTTP only (on by default in Hadoop 3). The
driver's JVM opens Spark's own hdfs:// checkpoint with PySpark's HDFS client: no jars to add.
Where a store cannot be reached, a Store raises `CheckpointStoreError` naming the location
and the callers degrade as for a missing file (no copying ahead; status without rates).

The live targets and holds stay driver-local files: the driver writes them and the planner
reads them, and the planner always runs on the driver's host (in spark-submit's cluster mode
too: it is started by the driver's JVM), so the checkpoint's file system would only add a
round trip to a store per batch.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from treedist.locations import URI as _URI
from treedist.locations import scheme
from treedist.spark.errors import SparkLayerError

# spark.conf keys (`spark.hadoop.` + the Hadoop key) that pyarrow's S3FileSystem needs.
_S3A_PREFIX = "spark.hadoop.fs.s3a."
# ... and the Hadoop keys a Store on hdfs:// reads (treedist.spark.webhdfs, which imports
# pyarrow: not imported here, so that a process with local checkpoints does not pay for it).
_HDFS_KEYS = ("dfs.namenode.http-address", "hadoop.user.name")


class CheckpointStoreError(SparkLayerError):
    """A file beside a checkpoint cannot be read or written; names the location."""


def root(location: str | Path) -> str:
    """The checkpoint root as Spark gets it: a local location as an absolute path (a
    `file://` URI as its path), a remote one unchanged without a trailing '/'."""
    text = str(location)
    found = scheme(text)
    if found is None:
        return str(Path(text).resolve())
    if found == "file":
        return str(Path(_URI.match(text).group(2)).resolve())
    return text.rstrip("/")


def join(location: str, *parts: str) -> str:
    """`location`/part/...: a path or a URI (driver, planner, executor: pure)."""
    return "/".join([str(location).rstrip("/"), *parts])


def is_remote(location: str) -> bool:
    return scheme(str(location)) in ("hdfs", "s3a")


def store_options(spark_conf: Mapping[str, str]) -> dict[str, str]:
    """The settings of a deployment's `spark.conf` a Store needs (the Hadoop keys, prefix
    `spark.hadoop.` removed): `fs.s3a.*` to reach the bucket the JVM writes to; the
    namenode's WebHDFS address and the user for an hdfs:// location (treedist.spark.webhdfs)."""
    out = {}
    for key, value in spark_conf.items():
        hadoop_key = key[len("spark.hadoop."):]
        if key.startswith(_S3A_PREFIX) or (key.startswith("spark.hadoop.") and hadoop_key in _HDFS_KEYS):
            out[hadoop_key] = str(value)
    return out


def plan_options(location: str, spark_conf: Mapping[str, str]) -> dict[str, str]:
    """`store_options`, for an hdfs:// `location` with WebHDFS's user fixed to the driver's
    (driver, building the plans that travel to planners and executors). Hadoop's simple authentication names the driver's
    JVM by `HADOOP_USER_NAME`, else its OS user, and that user owns Spark's checkpoint; an
    executor running as another OS user (YARN, Kubernetes) would otherwise write the intents
    as itself and be refused beside it once HDFS checks permissions."""
    from treedist.spark import webhdfs

    options = store_options(spark_conf)
    if scheme(str(location)) == "hdfs":
        options[webhdfs.USER] = webhdfs.user(options)
    return options


@dataclass(frozen=True)
class Store:
    """Files under a checkpoint root, for any process (driver, planner, executor, status).
    Picklable: it travels in the `ClusterPlan`; the file system is built on first use.

    Paths given to the methods are full locations (`join(root, ...)`): plain paths for a
    local root, URIs of the root's scheme otherwise."""

    options: Mapping[str, str] = field(default_factory=dict)  # store_options: fs.s3a.*, WebHDFS's

    # -- the operations (each raises CheckpointStoreError naming the path, except where said) --

    def read_text(self, path: str) -> str | None:
        """The file's text, or None when there is no such file."""
        if not is_remote(path):
            try:
                return Path(path).read_text(encoding="utf-8")
            except FileNotFoundError:
                return None
            except OSError as err:
                raise CheckpointStoreError(f"{path}: {err}") from None
        fs, key = self._fs(path)
        try:
            with fs.open_input_stream(key) as stream:
                return stream.read().decode("utf-8")
        except FileNotFoundError:
            return None
        except OSError as err:
            raise CheckpointStoreError(f"{path}: {err}") from None

    def write_text(self, path: str, text: str, tmp_suffix: str) -> None:
        """Replace the file atomically: a local file through a temporary file renamed over it
        (`tmp_suffix` makes the temporary's name unique to the writer); an object store
        object by one PUT, which readers see whole or not at all."""
        if not is_remote(path):
            target = Path(path)
            tmp = target.with_name(f".{target.name}.{tmp_suffix}.tmp")
            try:
                tmp.write_text(text, encoding="utf-8")
                tmp.replace(target)
            except OSError as err:
                raise CheckpointStoreError(f"{path}: {err}") from None
            return
        if scheme(path) == "hdfs":
            # A CREATE there replaces the file with an empty one being written, which a
            # reader could see: a temporary file, then HDFS's atomic rename over the target.
            fs, key = self._fs(path)
            tmp = join(key.rpartition("/")[0], f".{key.rpartition('/')[2]}.{tmp_suffix}.tmp")
            try:
                with fs.open_output_stream(tmp) as stream:
                    stream.write(text.encode("utf-8"))
                fs.move(tmp, key)
            except OSError as err:
                raise CheckpointStoreError(f"{path}: {err}") from None
            return
        self._put(path, text.encode("utf-8"))

    def overwrite(self, path: str, data: bytes) -> None:
        """Replace a small file's content IN PLACE (a local file: one pwrite at offset 0, the
        file cut to `len(data)` only when it was longer); an object store object by one PUT.

        For a file rewritten many times a second whose readers can live with a torn read
        (copy-ahead intents: the planner reads them only once their batch committed, after
        every writer ended; the status reads them at any time and ignores what cannot be
        right, `treedist.ops.copied`). Why not `write_text`'s temporary file and rename: on
        ext4 a rename over an existing file costs far more CPU than a pwrite (mostly the
        kernel's: the replaced inode is freed, the new file's block allocated and its
        write-back started), and with lingering tasks the renames were a large part of the
        executors' CPU (docs/performance.md, "Lingering tasks"). What is given up: a reader racing a writer,
        or a machine crash mid-write, may see a mix of old and new bytes; so may a reader
        after a process crash between the pwrite and the cut of a longer earlier content (the
        new bytes, then the old tail). Neither is fsynced. A short pwrite raises.
        On HDFS one CREATE that overwrites (no rename: the same reasoning)."""
        if is_remote(path):
            self._put(path, data)
            return
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o666)  # as open() would: the umask decides
            try:
                if os.pwrite(fd, data, 0) != len(data):
                    raise OSError(f"short write of {len(data)} bytes")
                if os.fstat(fd).st_size > len(data):  # a longer earlier content: cut its tail
                    os.ftruncate(fd, len(data))
            finally:
                os.close(fd)
        except OSError as err:
            raise CheckpointStoreError(f"{path}: {err}") from None

    def is_dir(self, path: str) -> bool:
        """Whether the directory exists (an object store: whether the prefix holds anything
        or has its marker). False also when the store cannot be reached."""
        if not is_remote(path):
            return Path(path).is_dir()
        try:
            fs, key = self._fs(path)
            return fs.get_file_info(key).type.name == "Directory"
        except (OSError, CheckpointStoreError):
            return False

    def make_dir(self, path: str) -> None:
        if not is_remote(path):
            Path(path).mkdir(parents=True, exist_ok=True)
            return
        fs, key = self._fs(path)
        try:
            fs.create_dir(key, recursive=True)
        except OSError as err:
            raise CheckpointStoreError(f"{path}: {err}") from None

    def files(self, directory: str) -> dict[str, float]:
        """Name -> modification time (epoch seconds) of the files directly in `directory`;
        empty when it does not exist."""
        if not is_remote(directory):
            base = Path(directory)
            if not base.is_dir():
                return {}
            out: dict[str, float] = {}
            for entry in base.iterdir():
                try:
                    if entry.is_file():
                        out[entry.name] = entry.stat().st_mtime
                except FileNotFoundError:  # removed while we listed (Spark purges old entries)
                    continue
            return out
        import pyarrow.fs as pafs

        fs, key = self._fs(directory)
        try:
            infos = fs.get_file_info(pafs.FileSelector(key, allow_not_found=True))
        except OSError as err:
            raise CheckpointStoreError(f"{directory}: {err}") from None
        return {info.base_name: info.mtime.timestamp() if info.mtime else 0.0
                for info in infos if info.type == pafs.FileType.File}

    def delete(self, path: str) -> None:
        if not is_remote(path):
            Path(path).unlink(missing_ok=True)
            return
        fs, key = self._fs(path)
        try:
            fs.delete_file(key)
        except FileNotFoundError:
            pass
        except OSError as err:
            raise CheckpointStoreError(f"{path}: {err}") from None

    # -- the file system of a remote location ----------------------------------------------

    def _put(self, path: str, data: bytes) -> None:
        """A remote object written whole by one PUT: readers see all of it or none."""
        fs, key = self._fs(path)
        try:
            with fs.open_output_stream(key) as stream:
                stream.write(data)
        except OSError as err:
            raise CheckpointStoreError(f"{path}: {err}") from None

    def _fs(self, path: str) -> tuple[Any, str]:
        """(pyarrow file system, its path of `path`); one file system per process and
        (scheme, authority, options), kept: an S3 client costs a TLS/HTTP set-up."""
        found = scheme(path)
        rest = _URI.match(path).group(2)
        authority, _, key = rest.partition("/")
        cache_key = (found, authority, tuple(sorted(self.options.items())))
        fs = _FILE_SYSTEMS.get(cache_key)
        if fs is None:
            fs = _FILE_SYSTEMS[cache_key] = _open(found, authority, self.options, path)
        return fs, (f"{authority}/{key}" if found == "s3a" else "/" + key)


_FILE_SYSTEMS: dict[tuple, Any] = {}


def _open(found: str | None, authority: str, options: Mapping[str, str], path: str) -> Any:
    import pyarrow.fs as pafs

    if found == "s3a":
        endpoint = options.get("fs.s3a.endpoint", "")
        secure = options.get("fs.s3a.connection.ssl.enabled", "true").lower() != "false"
        if "://" in endpoint:
            secure = endpoint.startswith("https://")
            endpoint = endpoint.split("://", 1)[1]
        kwargs: dict[str, Any] = {"scheme": "https" if secure else "http"}
        if endpoint:
            kwargs["endpoint_override"] = endpoint
        if options.get("fs.s3a.access.key"):
            kwargs["access_key"] = options["fs.s3a.access.key"]
            kwargs["secret_key"] = options.get("fs.s3a.secret.key", "")
        region = options.get("fs.s3a.endpoint.region") or options.get("fs.s3a.region")
        if region:
            kwargs["region"] = region
        # Bounded, like the JVM's S3A retries: a store that does not answer fails the
        # operation instead of hanging a task or the planner.
        kwargs["connect_timeout"] = 5
        kwargs["request_timeout"] = 20
        kwargs["retry_strategy"] = pafs.AwsStandardS3RetryStrategy(max_attempts=3)
        try:
            return pafs.S3FileSystem(**kwargs)
        except (OSError, ValueError) as err:
            raise CheckpointStoreError(f"{path}: pyarrow's S3 file system cannot start: {err}") from None
    from treedist.spark import webhdfs

    try:  # hdfs: WebHDFS, which needs no libhdfs and no JVM
        base = webhdfs.http_address(authority, options)
    except ValueError as err:
        raise CheckpointStoreError(f"{path}: {err}") from None
    return pafs.PyFileSystem(webhdfs.WebHdfs(base, webhdfs.user(options)))
