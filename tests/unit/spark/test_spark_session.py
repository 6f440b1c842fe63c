"""The session's idle-worker pool follows a local master's cores (driver, pure parsing).

Invariant: a local master with N cores bounds each of Spark's idle Python-worker pools at N
(the most executor tasks that run at once, so no executor worker is ever evicted); any other
master leaves Spark's default (its executors' cores are not known on the driver)."""

from __future__ import annotations

import os

import pytest

from treedist.spark.session import local_cores, with_task_threads


@pytest.mark.parametrize(
    "master, cores",
    [("local", 1), ("local[1]", 1), ("local[2]", 2), ("local[2,4]", 2), ("local[16,3]", 16), (" local[3] ", 3), (" local ", 1)],
)
def test_a_local_master_gives_its_cores(master, cores):
    assert local_cores(master) == cores


def test_a_star_master_gives_the_machines_cores():
    assert local_cores("local[*]") == local_cores("local[*,4]") == (os.cpu_count() or 1)


@pytest.mark.parametrize("master", ["spark://host:7077", "yarn", "k8s://https://api:6443", "local[2]x", "local[]"])
def test_any_other_master_gives_none(master):
    assert local_cores(master) is None


@pytest.mark.parametrize(
    "master, threads, expected",
    [("local[2,4]", 4, "local[4,4]"), ("local[2]", 3, "local[3]"), ("local", 2, "local[2]"),
     ("local[8,4]", 4, "local[8,4]"), (" local[4,2] ", 4, "local[4,2]"), ("spark://host:7077", 9, "spark://host:7077")],
)
def test_lingering_gives_a_local_master_a_task_thread_per_query(master, threads, expected):
    assert with_task_threads(master, threads) == expected
