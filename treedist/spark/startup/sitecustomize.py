"""Run at start-up by every Python process Spark starts for a treedist session (planners,
planning workers, daemons, executors): `build_session` puts this directory on their
PYTHONPATH, and Python imports the first `sitecustomize` it finds there.

It moves PySpark's zips behind site-packages before anything imports PySpark, so PySpark's
compiled modules are used instead of compiling the zip's sources in every process (see
`treedist.spark.daemon`: CPU and RSS in every process).
"""

import sys

from treedist.spark.daemon import prefer_site_packages

sys.path[:] = prefer_site_packages(sys.path)
