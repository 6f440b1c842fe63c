"""Pack the Python environment executors need into one archive for `spark.archives` (CLI, on
the host whose venv runs the driver; the archive is unpacked by Spark in every executor's
working directory).

What venv-pack does, plus what it does not (venv-pack 0.2.0): a package
installed editable (`pip install -e`, as treedist is in a checkout's `.venv`) is packed by its
`.pth` only, which points at the checkout; here its packages are copied into the archive's
site-packages instead. As with venv-pack, the interpreter itself is not shipped: `bin/python`
stays a link to the base interpreter (`home` in `pyvenv.cfg`), which every executor host needs
at the same path.

Steps:
1. find the venv's `pyvenv.cfg` and `lib/pythonX.Y/site-packages` (an error names what is missing);
2. write `pyvenv.cfg`, the `bin/python*` links and site-packages into a gzip'd tar, leaving out
   PySpark's jars (the executors' JVMs are Spark's own) and whatever `exclude` names;
3. for each editable install (a `direct_url.json` saying `editable`), its `.pth`/finder files
   are left out and its top-level packages are copied from the source directory;
4. the archive is written to `<output>.tmp` and renamed, so a half-written one is never used.
"""

from __future__ import annotations

import fnmatch
import json
import os
import tarfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from treedist.spark.errors import SparkLayerError

ALIAS = "environment"
ALWAYS_EXCLUDED = ("*/site-packages/pyspark/jars/*", "*/__pycache__/*", "*.pyc")


class PackEnvError(SparkLayerError):
    """The environment cannot be packed (not a venv, no site-packages, an editable source gone)."""


@dataclass(frozen=True)
class PackResult:
    archive: Path
    bytes: int
    files: int
    interpreter: str  # the base interpreter every executor host needs (pyvenv.cfg `home`)
    editable: list[str]  # top-level packages copied from editable sources


def _site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise PackEnvError(f"{venv}: no lib/python3.*/site-packages (is it a venv?)")
    return found[0]


def _home(venv: Path) -> str:
    cfg = venv / "pyvenv.cfg"
    if not cfg.exists():
        raise PackEnvError(f"{venv}: no pyvenv.cfg: not a venv (pack a venv, e.g. --venv .venv)")
    for line in cfg.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home":
            return value.strip()
    raise PackEnvError(f"{cfg}: no `home` key")


def _editables(site: Path) -> tuple[dict[str, Path], set[str]]:
    """Step 3's input: top-level package -> source dir, and the file names to leave out."""
    packages: dict[str, Path] = {}
    skipped: set[str] = set()
    for direct in site.glob("*.dist-info/direct_url.json"):
        try:
            info = json.loads(direct.read_text())
        except ValueError:
            continue
        if not info.get("dir_info", {}).get("editable"):
            continue
        source = Path(unquote(urlparse(info["url"]).path))
        top = direct.parent / "top_level.txt"
        names = top.read_text().split() if top.exists() else []
        for name in names:
            if not (source / name).is_dir():
                raise PackEnvError(f"{direct}: editable package {name!r} not found at {source / name}")
            packages[name] = source / name
        dist = direct.parent.name.split("-")[0]
        skipped |= {p.name for p in site.glob(f"__editable__*{dist}*")}
    return packages, skipped


def pack_environment(venv: Path, output: Path, exclude: tuple[str, ...] = ()) -> PackResult:
    """Steps 1-4 of the module's docstring."""
    venv = venv.absolute()
    home = _home(venv)  # step 1
    site = _site_packages(venv)
    editable, skipped = _editables(site)
    patterns = (*ALWAYS_EXCLUDED, *exclude)
    files = 0

    def keep(arcname: str) -> bool:
        return not any(fnmatch.fnmatch(arcname, p) for p in patterns)

    tmp = output.with_name(output.name + ".tmp")
    with tarfile.open(tmp, "w:gz", compresslevel=1) as tar:  # step 2; level 1: 2 cores, the size matters less
        tar.add(venv / "pyvenv.cfg", arcname="pyvenv.cfg")
        for link in sorted((venv / "bin").glob("python*")):
            tar.add(link, arcname=f"bin/{link.name}", recursive=False)
        site_arc = site.relative_to(venv).as_posix()
        for root, dirs, names in os.walk(site):
            dirs.sort()
            for name in sorted(names):
                path = Path(root) / name
                arcname = path.relative_to(venv).as_posix()
                if Path(root) == site and name in skipped:
                    continue
                if keep(arcname):
                    tar.add(path, arcname=arcname, recursive=False)
                    files += 1
        for package, source in sorted(editable.items()):  # step 3
            for root, dirs, names in os.walk(source):
                dirs.sort()
                for name in sorted(names):
                    path = Path(root) / name
                    arcname = f"{site_arc}/{package}/{path.relative_to(source).as_posix()}"
                    if keep(arcname):
                        tar.add(path, arcname=arcname, recursive=False)
                        files += 1
    tmp.replace(output)  # step 4
    return PackResult(output, output.stat().st_size, files, home, sorted(editable))
