"""A session inside an application that `spark-submit` launched (driver side, before the
SparkContext exists).

`spark-submit app.py` starts the driver JVM first (with `--master`, `--conf`, `--driver-memory`
as its system properties) and then the Python application, which reaches that JVM through
PySpark's gateway (`PYSPARK_GATEWAY_PORT` in its environment). The SparkContext the
application then creates loads those settings, and whatever the session builder sets goes on
top of them. So that spark-submit's settings are not silently replaced, `build_session`
(treedist.spark.session) asks `submitted_conf` for them and `submitted_settings` keeps, of
treedist's own settings, only:

1. what the deployment's `spark.conf` says (the deployment wins where it speaks; workers
   have already checked a live config's `spark.conf` against the allow-list);
2. treedist's defaults for keys spark-submit left unset, except the driver JVM's launch
   options (`LAUNCH_KEYS`): that JVM already runs, they would be shown and not applied.

The master is always spark-submit's. Standalone masters refuse cluster deploy mode for
Python applications in spark-submit itself (Spark 4.x: "Cluster deploy mode is currently
not supported for python applications on standalone clusters."); `check_deploy_mode` refuses
it here too, should such a driver ever start.
"""

from __future__ import annotations

import logging
import os
from typing import Mapping

from treedist.spark.errors import SparkLayerError

log = logging.getLogger(__name__)

GATEWAY_ENV = "PYSPARK_GATEWAY_PORT"
# Fixed when spark-submit launched the driver JVM (client mode) or the cluster launched it
# (cluster mode): set in the builder they change nothing but what the UI shows. The file
# system jar of a local master (treedist.spark.local_fs) needs the launch class path too.
LAUNCH_KEYS = frozenset({"spark.driver.memory", "spark.driver.extraJavaOptions", "spark.driver.extraClassPath",
                         "spark.driver.extraLibraryPath", "spark.hadoop.fs.file.impl"})


class SubmitError(SparkLayerError):
    """A spark-submit launch treedist cannot run in (names the setting)."""


def submitted_conf() -> dict[str, str] | None:
    """spark-submit's settings when this process is the Python application it launched,
    None otherwise (driver). Reading them attaches PySpark to spark-submit's JVM."""
    if GATEWAY_ENV not in os.environ:
        return None
    from pyspark import SparkConf, SparkContext

    # Without a gateway SparkConf is a plain dict and reads nothing: attach to spark-submit's
    # JVM first, so that SparkConf() loads its system properties (--master, --conf).
    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def check_deploy_mode(submitted: Mapping[str, str]) -> None:
    """Refuse standalone cluster deploy mode for this Python application (pure)."""
    master = submitted.get("spark.master", "")
    if submitted.get("spark.submit.deployMode") == "cluster" and master.startswith("spark://"):
        raise SubmitError(f"spark.submit.deployMode cluster on the standalone master {master}: Spark runs Python "
                          "applications on standalone clusters in client mode only (--deploy-mode client)")


def submitted_settings(settings: Mapping[str, str], deployment_conf: Mapping[str, str],
                       submitted: Mapping[str, str]) -> dict[str, str]:
    """Of treedist's session `settings` (its defaults with the deployment's `spark.conf` on
    top), the ones to set over spark-submit's `submitted` settings (pure; see the module)."""
    kept = {}
    for key, value in settings.items():
        if key in deployment_conf:
            kept[key] = value
        elif key not in submitted and key not in LAUNCH_KEYS:
            kept[key] = value
    late = sorted(k for k in deployment_conf if k in LAUNCH_KEYS and submitted.get(k) != deployment_conf[k])
    if late and submitted.get("spark.submit.deployMode", "client") == "client":
        log.warning("spark.conf %s: the driver JVM already runs under spark-submit; give them to spark-submit "
                    "(--driver-memory, --conf) for them to apply", ", ".join(late))
    return kept
