"""The driver's `file:` file system (treedist.spark.local_fs) in the real JVM of the shared
session: it is the one a local-master session uses, and it sets the permissions Hadoop asks
for (through java.nio, without a chmod process), also on Spark's own checkpoint files."""

from __future__ import annotations

import os
import stat

from treedist.spark.local_fs import FILE_SYSTEM_CLASS, local_fs_jar
from treedist.spark.session import IDLE_POOL_KEY, session_settings


def _file_system(spark, path):
    jvm = spark.sparkContext._jvm
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path.as_uri())
    return jvm, hadoop_path, hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())


def test_a_local_session_uses_the_jar_built_by_the_bootstrap(spark):
    assert local_fs_jar(build=False) is not None  # scripts/bootstrap built it (javac from the JDK)
    assert spark.sparkContext._jsc.hadoopConfiguration().get("fs.file.impl") == FILE_SYSTEM_CLASS
    assert str(local_fs_jar(build=False)) in spark.sparkContext.getConf().get("spark.driver.extraClassPath")


def test_a_class_path_of_the_users_keeps_the_jar_on_it_and_their_own_choices_stand():
    jar = str(local_fs_jar(build=False))
    settings = session_settings("local[2]", {"spark.driver.extraClassPath": "/opt/extra.jar", IDLE_POOL_KEY: "5"})
    assert settings["spark.driver.extraClassPath"] == os.pathsep.join(["/opt/extra.jar", jar])
    assert settings["spark.hadoop.fs.file.impl"] == FILE_SYSTEM_CLASS
    assert settings[IDLE_POOL_KEY] == "5"
    own = session_settings("local[2]", {"spark.hadoop.fs.file.impl": "org.apache.hadoop.fs.LocalFileSystem"})
    assert own["spark.hadoop.fs.file.impl"] == "org.apache.hadoop.fs.LocalFileSystem"
    assert "spark.driver.extraClassPath" not in own
    remote = session_settings("spark://host:7077", {"spark.driver.extraClassPath": "/opt/extra.jar"})
    assert remote["spark.driver.extraClassPath"] == "/opt/extra.jar" and "spark.hadoop.fs.file.impl" not in remote


def test_files_and_directories_get_the_permissions_asked_for(spark, tmp_path):
    jvm, _, fs = _file_system(spark, tmp_path)
    assert fs.getRawFileSystem().getClass().getName() == "treedist.hadoop.NioRawLocalFileSystem"
    FsPermission = jvm.org.apache.hadoop.fs.permission.FsPermission
    for name, mode in (("a", 0o640), ("b", 0o604), ("c", 0o755)):
        path = jvm.org.apache.hadoop.fs.Path((tmp_path / name).as_uri())
        fs.create(path, True).close()
        fs.setPermission(path, FsPermission(mode))
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == mode, name
    directory = jvm.org.apache.hadoop.fs.Path((tmp_path / "d" / "e").as_uri())
    assert fs.mkdirs(directory, FsPermission(0o750))
    assert stat.S_IMODE(os.stat(tmp_path / "d" / "e").st_mode) == 0o750
    sticky = jvm.org.apache.hadoop.fs.Path((tmp_path / "s").as_uri())
    assert fs.mkdirs(sticky)
    fs.setPermission(sticky, FsPermission(0o1777))  # beyond 0777: still through chmod
    assert stat.S_IMODE(os.stat(tmp_path / "s").st_mode) == 0o1777


def test_a_streaming_query_checkpoints_through_it(spark, tmp_path):
    checkpoint = tmp_path / "ck"
    query = (spark.readStream.format("rate").option("rowsPerSecond", 50).load()
             .writeStream.format("noop").option("checkpointLocation", str(checkpoint))
             .trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        for _ in range(300):  # at most a minute
            if query.lastProgress is not None and query.lastProgress["batchId"] >= 2:
                break
            query.awaitTermination(0.2)
    finally:
        query.stop()
    offsets = sorted((checkpoint / "offsets").iterdir())
    commits = [p for p in (checkpoint / "commits").iterdir() if not p.name.startswith(".")]
    assert len(commits) >= 2 and offsets
    umask = os.umask(0)
    os.umask(umask)
    assert {stat.S_IMODE(p.stat().st_mode) for p in commits} == {0o666 & ~umask}
