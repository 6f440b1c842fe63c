"""`treedist verify`'s defaults; its output and exit codes are tested on real brokers in
tests/integration/test_verify.py."""

from __future__ import annotations


def test_the_cli_default_timeout_is_the_readers() -> None:
    from treedist.cli import verify_cmd
    from treedist.verify import reader

    assert verify_cmd.DEFAULT_IDLE_TIMEOUT == reader.DEFAULT_IDLE_TIMEOUT
