import os

# Local brokers JIT with C1 only in the suite (treedist.local.kafka_broker.JIT_ENV): it starts
# brokers in nearly every test on 2 cores, where C2's compile threads competed with the tests.
os.environ.setdefault("TREEDIST_LOCAL_BROKER_JIT", "c1")

pytest_plugins = ["tests.fixtures.clusters", "tests.fixtures.spark", "tests.fixtures.etcd", "tests.fixtures.s3", "tests.fixtures.hdfs",
                  "tests.fuzz.report"]

# The fuzz budget (tests/fuzz): fixed example counts and a deadline per input, so CI time is
# bounded; not derandomized, so every run tries inputs the previous ones did not. Each target
# takes its own count from this profile (tests/fuzz/budget.py); TREEDIST_FUZZ_SCALE multiplies
# the counts for a longer run by hand.
from datetime import timedelta  # noqa: E402

from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "fuzz",
    max_examples=300,
    deadline=timedelta(seconds=2),  # a parser slower than this on one small input is a finding
    derandomize=False,
    print_blob=True,  # a failure prints the @reproduce_failure line to turn into a test
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large],
)


# The suite's two lanes (scripts/test: pytest-xdist, `--dist loadscope`). The controller collects
# no test, so the lanes are decided from node IDs alone: a lane takes a whole module, so a
# module's fixtures start once and its tests keep their order; the modules that make network
# namespaces, bridges and `tc` queues share one lane, as two beds at once would collide on the
# machine's names and subnets (tests/unit/test_lanes.py checks that every such module is here).
# Not xdist_group marks: pytest 9.2 no longer lets xdist 3.8 rename items by their group.
NETNS_MODULES = frozenset({
    "tests/e2e/test_multihost.py",
    "tests/integration/local/test_netbed.py",
    "tests/integration/local/test_netbed_wan.py",
    "tests/integration/local/test_wanlink.py",
})


def lane_scope(nodeid: str) -> str:
    """The unit of work a lane takes whole: "netns" or the test's module."""
    module = nodeid.split("::", 1)[0]
    return "netns" if module in NETNS_MODULES else module


def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleLanes(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return lane_scope(nodeid)

    return ModuleLanes(config, log)
