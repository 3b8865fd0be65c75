"""The package as users get it: ``python -m build`` makes an sdist and a wheel that
``twine check`` accepts; the wheel holds exactly ``symgrad`` and ``codegen`` (with their
``py.typed`` markers) and the license; the benchmark is not shipped and nothing shipped
imports it."""
from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    # offline: the build backend (setuptools) comes from the test environment
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out),
                           str(REPO)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def test_twine_accepts_the_distributions(dist: Path) -> None:
    files = sorted(str(p) for p in dist.iterdir())
    assert any(f.endswith(".whl") for f in files) and any(f.endswith(".tar.gz") for f in files)
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *files],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_wheel_holds_symgrad_and_codegen_only(dist: Path) -> None:
    wheel = next(dist.glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    info = next(t for t in tops if t.endswith(".dist-info"))
    assert tops == {"symgrad", "codegen", info}
    assert {"symgrad/py.typed", "codegen/py.typed"} <= set(names)
    assert f"{info}/licenses/LICENSE" in names
    metadata = zipfile.ZipFile(wheel).read(f"{info}/METADATA").decode()
    assert "License-Expression: MIT" in metadata
    assert "Requires-Python: >=3.11" in metadata


def test_nothing_shipped_imports_the_benchmark_or_the_tests() -> None:
    for package in ("symgrad", "codegen"):
        for path in (REPO / package).rglob("*.py"):
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
                for name in names:
                    assert name.split(".")[0] not in ("bench", "tests"), f"{path} imports {name}"
