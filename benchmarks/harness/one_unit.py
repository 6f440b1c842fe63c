"""One unit of a deployment in its own Spark application, as a control-plane worker runs it
(`DistributionApp.begin` + `start_unit`), without etcd: the single-link benchmark's (b), so
that only the source cluster's distributor runs, as in the issue's measurement (the target's
own distributor, which reads the copies to skip them, is not part of a link's cost).

Run (driver): python -m benchmarks.harness.one_unit -c FILE --unit messages/src
Stops on SIGINT or SIGTERM (treedist.driver.process.DriverProcess, as `treedist run` and
`treedist worker`): the in-flight batch settles, the query stops, Spark stops; exit 0.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("-c", "--config", type=Path, required=True)
    p.add_argument("--unit", action="append", required=True, help="a unit name, e.g. messages/src (repeatable)")
    args = p.parse_args(argv)
    from treedist.memory import limit_malloc_arenas

    limit_malloc_arenas()  # as `treedist` does first thing: the driver measured is the one users run
    from treedist.config.loader import load_deployment
    from treedist.driver.process import DriverProcess

    deployment = load_deployment(args.config)
    with DriverProcess() as process:  # stops the application, then Spark, whatever happens
        spark = process.session(deployment)
        app = process.application(deployment, spark, jobs=[])
        with process.until_stopped("stopping the units"):
            app.begin()
            for unit in args.unit:
                app.start_unit(unit)
            print(f"units started: {', '.join(app.units())}", flush=True)
            while True:
                app.check()
                if app.failed():
                    print(f"failed: {', '.join(app.failed())}", flush=True)
                    return 1
                time.sleep(0.5)  # a stop signal raises StopRequested here (ends the block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
