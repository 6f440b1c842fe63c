"""One unit of a deployment in its own Spark application, as a control-plane worker runs it
(`DistributionApp.begin` + `start_unit`), without etcd: the single-link benchmark's (b), so
that only the source cluster's distributor runs, as in the issue's measurement (the target's
own distributor, which reads the copies to skip them, is not part of a link's cost).

Run (driver): python -m benchmarks.harness.one_unit -c FILE --unit messages/src
Stops on SIGINT or SIGTERM: the in-flight batch settles, the query stops, Spark stops.
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-c", "--config", type=Path, required=True)
    p.add_argument("--unit", action="append", required=True, help="a unit name, e.g. messages/src (repeatable)")
    args = p.parse_args(argv)

    from treedist.config.loader import load_deployment
    from treedist.driver.app import DistributionApp
    from treedist.spark.session import build_session

    deployment = load_deployment(args.config)
    spark = build_session(deployment.spark.master, deployment.spark.app_name, deployment.spark.conf)
    stop = threading.Event()
    # Spark installs its own SIGINT handler when it starts: ours goes over it.
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    app = DistributionApp(deployment, spark, jobs=[])
    try:
        app.begin()
        for unit in args.unit:
            app.start_unit(unit)
        print(f"units started: {', '.join(app.units())}", flush=True)
        while not stop.wait(0.5):
            app.check()
            if app.failed():
                print(f"failed: {', '.join(app.failed())}", flush=True)
                return 1
    finally:
        app.stop()
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
