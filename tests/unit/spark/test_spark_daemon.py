"""The worker daemon's path order (pure): PySpark's zips go behind site-packages.

Named invariants:
- every entry is kept, exactly once;
- no PySpark or py4j zip comes before any other entry;
- the other entries, and the zips among themselves, keep their order.
"""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from treedist.spark.daemon import prefer_site_packages

ZIPS = ["/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-0.10.9.9-src.zip"]
OTHERS = ["/venv/lib/python3.11/site-packages", "/work/repo", "/usr/lib/python311.zip", "/opt/pyspark-extras"]


@given(st.lists(st.sampled_from(ZIPS + OTHERS), unique=True))
def test_spark_zips_move_behind_every_other_entry(path):
    out = prefer_site_packages(path)
    assert sorted(out) == sorted(path), "every entry kept exactly once"
    zips = [p for p in out if p in ZIPS]
    others = [p for p in out if p not in ZIPS]
    assert out == others + zips, "no Spark zip before another entry"
    assert others == [p for p in path if p not in ZIPS], "the other entries keep their order"
    assert zips == [p for p in path if p in ZIPS], "the zips keep their order"


def test_the_interpreters_own_zip_is_not_a_spark_zip():
    assert prefer_site_packages(["/usr/lib/python311.zip", "/x"]) == ["/usr/lib/python311.zip", "/x"]


def test_pyspark_then_comes_from_site_packages(tmp_path):
    """With the zip first on PYTHONPATH (as Spark starts its Python processes), the daemon's
    order makes `import pyspark` take the installed, compiled package."""
    import pyspark

    zip_path = pyspark.__file__.rsplit("/", 1)[0] + "/python/lib/pyspark.zip"
    code = (
        "import sys; from treedist.spark.daemon import prefer_site_packages; "
        "sys.path[:] = prefer_site_packages(sys.path); import pyspark; print(pyspark.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env={"PYTHONPATH": zip_path}, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == pyspark.__file__
    assert ".zip" not in out


def test_processes_started_with_the_startup_dir_on_their_path_use_compiled_pyspark():
    """Spark starts its Python processes with its zips first on PYTHONPATH and the
    environment's PYTHONPATH after them: the `sitecustomize` of `STARTUP_DIR` there moves the
    zips back before anything imports PySpark."""
    import os

    import pyspark

    from treedist.spark.session import STARTUP_DIR

    lib = os.path.join(os.path.dirname(pyspark.__file__), "python", "lib")
    spark_path = [os.path.join(lib, name) for name in sorted(os.listdir(lib)) if name.endswith(".zip")]
    env = {"PYTHONPATH": os.pathsep.join(spark_path + [STARTUP_DIR])}
    code = "import pyspark, sys; print(pyspark.__file__); print(sys.path.index(%r) > 0)" % spark_path[0]
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout.split()
    assert out == [pyspark.__file__, "True"]
