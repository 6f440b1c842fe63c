"""`treedist pack-env` (treedist.spark.pack_env) on a real venv: the archive holds site-packages
with an editable package's sources copied in (its `.pth` left out), no PySpark jars, and,
unpacked elsewhere, its interpreter imports the packages from the archive."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from treedist.spark.pack_env import PackEnvError, pack_environment


def _venv(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "plain_pkg").mkdir()
    (site / "plain_pkg" / "__init__.py").write_text("WHO = 'plain'\n")
    (site / "pyspark" / "jars").mkdir(parents=True)
    (site / "pyspark" / "jars" / "spark-core.jar").write_bytes(b"\0" * 1024)
    # an editable install as pip makes one: dist-info with direct_url.json, a .pth to the source
    source = tmp_path / "checkout"
    (source / "edit_pkg").mkdir(parents=True)
    (source / "edit_pkg" / "__init__.py").write_text("WHO = 'edited'\n")
    info = site / "edit_pkg-0.1.dist-info"
    info.mkdir()
    (info / "direct_url.json").write_text(json.dumps({"url": source.as_uri(), "dir_info": {"editable": True}}))
    (info / "top_level.txt").write_text("edit_pkg\n")
    (site / "__editable__.edit_pkg-0.1.pth").write_text(str(source) + "\n")
    return venv


def test_a_packed_venv_imports_its_packages_from_the_archive(tmp_path):
    venv = _venv(tmp_path)
    result = pack_environment(venv, tmp_path / "env.tar.gz")
    assert result.editable == ["edit_pkg"]
    with tarfile.open(result.archive) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "exec" / "environment")
    assert not [n for n in names if "/pyspark/jars/" in n or "__editable__" in n], names
    assert "bin/python" in names and "pyvenv.cfg" in names
    # as an executor runs it: from its working directory, with the checkout out of reach
    (tmp_path / "checkout" / "edit_pkg" / "__init__.py").unlink()
    out = subprocess.run(["./environment/bin/python", "-c",
                          "import plain_pkg, edit_pkg; print(edit_pkg.WHO, edit_pkg.__file__)"],
                         cwd=tmp_path / "exec", capture_output=True, text=True, env={}, check=True).stdout.split()
    assert out[0] == "edited" and out[1].startswith(str(tmp_path / "exec" / "environment"))


def test_excluded_paths_are_left_out(tmp_path):
    venv = _venv(tmp_path)
    result = pack_environment(venv, tmp_path / "env.tar.gz", exclude=("*/site-packages/plain_pkg/*",))
    with tarfile.open(result.archive) as tar:
        assert not [n for n in tar.getnames() if "plain_pkg" in n]


def test_a_directory_that_is_not_a_venv_is_named(tmp_path):
    with pytest.raises(PackEnvError, match="not a venv"):
        pack_environment(tmp_path, tmp_path / "env.tar.gz")
