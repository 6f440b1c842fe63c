"""Spark's Python daemon for treedist's sessions (set as `spark.python.daemon.module`).

Runs in the process the JVM starts as `python -m treedist.spark.daemon <worker module>`; it
forks the Python workers (executor tasks and the driver-side planning steps). Steps:

1. move PySpark's zips behind site-packages on `sys.path`, before anything imports PySpark;
2. import the pure-Python modules every forked worker runs (`pyspark.worker`), so each fork
   starts with them (pages shared copy-on-write) instead of importing them again;
3. run PySpark's own daemon loop (`pyspark.daemon.manager`), unchanged.

Why 1: Spark puts `$SPARK_HOME/python/lib/pyspark.zip` (and py4j's zip) first on its Python
processes' PYTHONPATH, and the pip-installed PySpark ships that zip without bytecode, so
every process compiled PySpark's sources again on import, at a cost of CPU and RSS per
process (docs/performance.md, "Figures behind the code"). The same PySpark is
installed in site-packages (`build_session` makes the session's own interpreter the workers'
`PYSPARK_PYTHON`), whose cached bytecode is then used. The other Python processes Spark
starts (query planners, planning workers and their daemons) get the same order from
`treedist/spark/startup/sitecustomize.py`; here it is done again so the daemon does not
depend on that hook.

Why only pure Python in 2: PySpark's daemon forks after importing, and modules that start
threads at import (pyarrow, numpy's BLAS) must not be imported before a fork.
"""

from __future__ import annotations

import sys


def prefer_site_packages(path: list[str]) -> list[str]:
    """`path` with PySpark's and py4j's zip archives moved to the end (order kept)."""
    zips = [p for p in path if _is_spark_zip(p)]
    return [p for p in path if not _is_spark_zip(p)] + zips


def _is_spark_zip(entry: str) -> bool:
    name = entry.replace("\\", "/").rsplit("/", 1)[-1]
    return name.endswith(".zip") and (name.startswith("pyspark") or name.startswith("py4j"))


def main() -> None:
    sys.path[:] = prefer_site_packages(sys.path)  # 1
    import pyspark.worker  # noqa: F401  (2)
    from pyspark.daemon import manager

    manager()  # 3


if __name__ == "__main__":
    main()
