import os

# Local brokers JIT with C1 only in the suite (treedist.local.kafka_broker.JIT_ENV): it starts
# brokers in nearly every test on 2 cores, where C2's compile threads competed with the tests.
os.environ.setdefault("TREEDIST_LOCAL_BROKER_JIT", "c1")

pytest_plugins = ["tests.fixtures.clusters", "tests.fixtures.spark", "tests.fixtures.etcd", "tests.fixtures.s3", "tests.fixtures.hdfs"]

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
