"""The driver JVM's `file:` file system without a `chmod` process per file (driver side).

Why: without Hadoop's native library (PySpark does not ship it), Hadoop's local file system
sets the permissions of every file and directory it creates by running `chmod`, a process
forked from the driver JVM. Spark's checkpoints write a few files per micro-batch (offset
log, commit log, their checksums), so every batch of every query forked the JVM, each
`chmod` looked up through the whole PATH (docs/performance.md, "Figures behind the code").

How: `jvm/treedist/hadoop/*.java` (the same file system, permissions set through java.nio;
modes with bits beyond 0777 still go through `chmod`) compiled once per machine against the
Hadoop jar PySpark ships, by `javac` from the JDK, into `jvm/build/` under a name carrying a
digest of the sources and that jar (`scripts/bootstrap` builds it; a stale jar is never used).
A session with a local master puts it on the driver's class path and makes it the `file:`
file system (`spark.hadoop.fs.file.impl`). Other masters keep Hadoop's: their executors would
need the jar too, and their checkpoints belong on a shared file system anyway.

Without `javac`, or when the build fails: Hadoop's own file system (one warning).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

log = logging.getLogger(__name__)

FILE_SYSTEM_CLASS = "treedist.hadoop.NioLocalFileSystem"
SOURCES = sorted((Path(__file__).resolve().parent / "jvm" / "treedist" / "hadoop").glob("*.java"))
BUILD_DIR = Path(__file__).resolve().parent / "jvm" / "build"


def hadoop_api_jar() -> Path | None:
    """The `hadoop-client-api` jar of the installed PySpark (None when there is none)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")  # not imported: the bootstrap asks on every run
    if spec is None or not spec.submodule_search_locations:
        return None
    jars = sorted((Path(list(spec.submodule_search_locations)[0]) / "jars").glob("hadoop-client-api-*.jar"))
    return jars[-1] if jars else None


def jar_path(api_jar: Path) -> Path:
    digest = hashlib.sha256()
    for source in SOURCES:
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    digest.update(api_jar.name.encode())
    return BUILD_DIR / f"treedist-local-fs-{digest.hexdigest()[:16]}.jar"


def local_fs_jar(build: bool = True) -> Path | None:
    """The jar, built first when missing and `build`; None when it cannot be had."""
    api_jar = hadoop_api_jar()
    javac = shutil.which("javac")
    if api_jar is None or not SOURCES:
        return None
    target = jar_path(api_jar)
    if target.exists():
        return target
    if not build:
        return None
    if javac is None:
        log.warning("no javac (install a JDK, e.g. openjdk-17-jdk-headless): Spark's checkpoints fork "
                    "a chmod process for every file they write")
        return None
    try:
        _build(javac, api_jar, target)
    except (OSError, subprocess.SubprocessError) as err:
        log.warning("building %s failed (%s): Spark's checkpoints fork a chmod process for every file they write",
                    target.name, str(err).strip().splitlines()[-1] if str(err).strip() else type(err).__name__)
        return None
    return target


def _build(javac: str, api_jar: Path, target: Path) -> None:
    """Compile the sources and zip them into `target`, atomically (a concurrent build of the
    same jar writes the same bytes; whichever rename comes last wins)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        classes = Path(tmp) / "classes"
        result = subprocess.run(
            [javac, "--release", "17", "-nowarn", "-cp", str(api_jar), "-d", str(classes), *map(str, SOURCES)],
            capture_output=True, text=True, timeout=300,
        )
        if result.returncode != 0:
            raise subprocess.SubprocessError(result.stderr or f"javac exited with {result.returncode}")
        staged = Path(tmp) / target.name
        with zipfile.ZipFile(staged, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: treedist\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        os.replace(staged, target)


def local_fs_conf(existing_class_path: str | None = None) -> dict[str, str]:
    """The settings that make the jar's file system the driver's `file:` one (empty without the jar)."""
    jar = local_fs_jar()
    if jar is None:
        return {}
    class_path = os.pathsep.join(p for p in (existing_class_path, str(jar)) if p)
    return {"spark.driver.extraClassPath": class_path, "spark.hadoop.fs.file.impl": FILE_SYSTEM_CLASS}


if __name__ == "__main__":  # scripts/bootstrap: build it now, not at the first run
    logging.basicConfig(level=logging.WARNING, format="bootstrap: %(message)s")
    sys.exit(0 if local_fs_jar() is not None else 1)
