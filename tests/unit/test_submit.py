"""The spark-submit entry point's command line (treedist.submit; pure).

Invariants: an explicit `run`/`worker` is kept; otherwise a deployment with a `control`
section runs as a worker, one without as `run`; the other arguments pass unchanged; no -c is
refused (the embedded demo does not run under spark-submit)."""

from __future__ import annotations

import pytest
import typer

from treedist.submit import _has_control, command_line, config_path


@pytest.mark.parametrize("args, control, expected", [
    (["-c", "d.yaml"], False, ["run", "-c", "d.yaml"]),
    (["-c", "d.yaml", "--metrics-port", "9100"], True, ["worker", "-c", "d.yaml", "--metrics-port", "9100"]),
    (["run", "--config", "d.yaml"], True, ["run", "--config", "d.yaml"]),
    (["worker", "--config=d.yaml", "--name", "w1"], False, ["worker", "--config=d.yaml", "--name", "w1"]),
])
def test_the_command_comes_from_the_arguments_or_the_deployment(args, control, expected):
    asked = []
    assert command_line(args, lambda path: asked.append(path) or control) == expected
    assert asked == ([] if args[0] in ("run", "worker") else [config_path(args)])


def test_help_needs_no_deployment():
    assert command_line(["worker", "--help"], lambda path: False) == ["worker", "--help"]
    assert command_line(["--help"], lambda path: False) == ["run", "--help"]


@pytest.mark.parametrize("args", [[], ["run"], ["worker", "--name", "w1"], ["-c"]])
def test_without_a_deployment_it_is_refused(args):
    with pytest.raises(typer.BadParameter, match="-c DEPLOYMENT is required"):
        command_line(args, lambda path: False)


def test_the_control_section_is_read_from_the_file(tmp_path):
    with_control, without, broken = tmp_path / "a.yaml", tmp_path / "b.yaml", tmp_path / "c.yaml"
    with_control.write_text("control: {etcd: ['http://127.0.0.1:2379']}\n")
    without.write_text("clusters: {}\n")
    broken.write_text("a: [\n")
    assert [_has_control(str(p)) for p in (with_control, without, broken, tmp_path / "none.yaml")] == [True, False, False, False]
