"""The tutorial documents in ``shared/seeds`` run unchanged with ``import symgrad as torch``
and print exactly what PyTorch prints.

Every Python code cell of each document (markdown ```python fences and Jupyter-export
``In [n]:`` cells, in document order) is run twice in fresh namespaces: once with the real
torch, once with symgrad standing in for it (``import torch`` inside a cell resolves to
symgrad through a custom ``__import__``; ``sys.modules`` is never touched). Per cell we
compare what it printed (memory addresses masked), which warnings it raised, and the
exception type and message it raised, if any.

Random draws are made identical rather than masked: ``randn`` / ``rand`` / ``randint``
(and the ``*_like`` variants) are replaced in BOTH runs by functions returning values
from one numpy stream per document (same seed), converted to each library's tensors, so
printed numbers and data-dependent loops must agree exactly.
"""
from __future__ import annotations

import ast
import builtins
import codeop
import contextlib
import difflib
import io
import pathlib
import re
import types
import warnings
import zlib
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch as real_torch

import symgrad


# ----------------------------------------------------------------------------- locating

def _shared_dir() -> pathlib.Path:
    """``shared/`` beside the repository (as CI lays it out), else /work/shared."""
    here = pathlib.Path(__file__).resolve()
    for cand in (here.parents[2] / "shared", pathlib.Path("/work/shared")):
        if (cand / "seeds").is_dir():
            return cand
    raise FileNotFoundError("shared/seeds not found beside the repository nor at /work/shared")


SEED_FILES = sorted((_shared_dir() / "seeds").glob("*.txt"))


# ----------------------------------------------------------------------------- extraction

@dataclass
class Cell:
    source: str
    line: int              # 1-based line of the cell's first code line in the document
    jupyter: bool          # an "In [n]:" cell: its last bare expression is displayed


_FENCE_OPEN = re.compile(r"^\s*```\s*(python3?|py|ipython3?)\s*$", re.IGNORECASE)
_FENCE_CLOSE = re.compile(r"^\s*```\s*$")
_ANY_FENCE = re.compile(r"^\s*```")
_IN_PROMPT = re.compile(r"^In\s*\[\s*\d*\s*\]:\s?(.*)$")
_OUT_PROMPT = re.compile(r"^Out\s*\[\s*\d*\s*\]:")
_OUTPUT_CALLS = {"tensor", "Size", "device", "dtype"}


def _strip_magics(src: str) -> str:
    """IPython magics / shell escapes are not Python: drop them."""
    return "\n".join(ln for ln in src.split("\n") if not re.match(r"^\s*[%!]", ln))


def _status(src: str) -> str:
    """'ok', 'incomplete' (more lines could complete it) or 'invalid'."""
    if not src.strip():
        return "ok"
    try:
        ast.parse(src)
        return "ok"
    except SyntaxError:
        pass
    try:
        return "incomplete" if codeop.compile_command(src, symbol="exec") is None else "ok"
    except (SyntaxError, ValueError, OverflowError):
        return "invalid"


def _is_output_like(src: str) -> bool:
    """A block that parses but only shows values — ``None``, ``True``, ``8``,
    ``tensor([...])`` — is captured output, not code."""
    tree = ast.parse(src)
    if not tree.body:
        return False
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return False
        v = stmt.value
        if isinstance(v, ast.UnaryOp):
            v = v.operand
        if isinstance(v, ast.Constant):
            continue
        if (isinstance(v, ast.Call) and isinstance(v.func, (ast.Name, ast.Attribute))
                and (v.func.id if isinstance(v.func, ast.Name) else v.func.attr) in _OUTPUT_CALLS):
            continue
        return False
    return True


def _paragraphs(lines: list[str]) -> list[list[str]]:
    """Runs of non-blank lines, each keeping the blank lines that follow it (they may sit
    inside a string literal that the next paragraph closes)."""
    paras: list[list[str]] = []
    for ln in lines:
        if ln.strip() and (not paras or not paras[-1][-1].strip()):
            paras.append([ln])
        elif paras:
            paras[-1].append(ln)
    return paras


def _jupyter_code(lines: list[str]) -> str:
    """The code at the start of an exported ``In [n]:`` region; the rest of the region
    (printed output, then markdown) is dropped. Code grows paragraph by paragraph (a
    paragraph may need the next ones to complete, e.g. a string with a blank line inside)
    and stops at the first paragraph that is not valid Python or only shows values."""
    paras = _paragraphs(lines)
    code: list[str] = []
    i = 0
    while i < len(paras):
        chunk: list[str] = []
        j = i
        status = "invalid"
        while j < len(paras):
            chunk = chunk + paras[j]
            status = _status(_strip_magics("\n".join(code + chunk)))
            if status != "incomplete":
                break
            j += 1
        if status != "ok":
            break
        if code and _is_output_like(_strip_magics("\n".join(chunk))):
            break
        code += chunk
        i = j + 1
    return _strip_magics("\n".join(code)).strip("\n")


def extract_cells(text: str) -> list[Cell]:
    """Every executable Python cell of a tutorial document, in order."""
    lines = text.split("\n")
    cells: list[Cell] = []
    i = 0
    while i < len(lines):
        ln = lines[i]
        if _FENCE_OPEN.match(ln):
            j = i + 1
            while j < len(lines) and not _FENCE_CLOSE.match(lines[j]):
                j += 1
            src = _strip_magics("\n".join(lines[i + 1:j])).strip("\n")
            if src.strip() and _status(src) == "ok" and not _is_output_like(src):
                cells.append(Cell(src, i + 2, False))
            i = j + 1
            continue
        if _ANY_FENCE.match(ln):            # a fence of another language / plain output
            j = i + 1
            while j < len(lines) and not _FENCE_CLOSE.match(lines[j]):
                j += 1
            i = j + 1
            continue
        m = _IN_PROMPT.match(ln)
        if m:
            region = [m.group(1)] if m.group(1).strip() else []
            j = i + 1
            while (j < len(lines) and not _IN_PROMPT.match(lines[j])
                   and not _OUT_PROMPT.match(lines[j]) and not _ANY_FENCE.match(lines[j])):
                region.append(lines[j])
                j += 1
            src = _jupyter_code(region)
            if src.strip():
                cells.append(Cell(src, i + 1 if m.group(1).strip() else i + 2, True))
            i = j
            continue
        i += 1
    return cells


# ----------------------------------------------------------------------------- running

def _size_of(args, kwargs) -> tuple[int, ...]:
    if "size" in kwargs:
        s = kwargs.pop("size")
        return (int(s),) if isinstance(s, int) else tuple(int(v) for v in s)
    if len(args) == 1 and not isinstance(args[0], (int, np.integer)):
        return tuple(int(v) for v in args[0])
    return tuple(int(v) for v in args)


def _random_api(lib, rng: np.random.Generator) -> dict:
    """randn / rand / randint (+ *_like) drawing from `rng`, returning `lib` tensors."""

    def make(arr, dtype, requires_grad):
        return lib.tensor(arr, dtype=dtype, requires_grad=requires_grad)

    def randn(*args, dtype=None, requires_grad=False, **kw):
        size = _size_of(args, kw)
        return make(rng.standard_normal(size), dtype or lib.get_default_dtype(), requires_grad)

    def rand(*args, dtype=None, requires_grad=False, **kw):
        size = _size_of(args, kw)
        return make(rng.random(size), dtype or lib.get_default_dtype(), requires_grad)

    def randint(*args, dtype=None, requires_grad=False, **kw):
        low = kw.pop("low", 0)
        high = kw.pop("high", None)
        args = list(args)
        if high is None:
            if len(args) >= 3 or (len(args) == 2 and "size" in kw):
                low = args.pop(0)
            high = args.pop(0)
        size = _size_of(tuple(args), kw)
        return make(rng.integers(low, high, size), dtype or lib.int64, requires_grad)

    def randn_like(x, dtype=None, requires_grad=False, **kw):
        return randn(tuple(x.shape), dtype=dtype or x.dtype, requires_grad=requires_grad)

    def rand_like(x, dtype=None, requires_grad=False, **kw):
        return rand(tuple(x.shape), dtype=dtype or x.dtype, requires_grad=requires_grad)

    return {"randn": randn, "rand": rand, "randint": randint, "randn_like": randn_like,
            "rand_like": rand_like}


class _LibProxy(types.ModuleType):
    """The module a cell sees as ``torch``: `lib` with its random functions replaced."""

    def __init__(self, lib, overrides: dict):
        super().__init__(lib.__name__)
        self.__dict__["_lib"] = lib
        self.__dict__.update(overrides)

    def __getattr__(self, name):
        return getattr(self.__dict__["_lib"], name)


def _importer(proxy, lib_name: str):
    real_import = builtins.__import__

    def __import__(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "torch" or name.startswith("torch.")):
            mod = real_import(lib_name + name[len("torch"):], globals, locals, fromlist, level)
            return proxy if (not fromlist or name == "torch") else mod
        return real_import(name, globals, locals, fromlist, level)
    return __import__


@dataclass
class Outcome:
    stdout: list[str]
    error: tuple[str, str] | None
    warns: list[tuple[str, str]] = field(default_factory=list)


_ADDR = re.compile(r"0x[0-9a-fA-F]+")


def _mask(s: str) -> str:
    return _ADDR.sub("0xADDR", s)


def run_document(cells: list[Cell], lib, seed: int, name: str) -> list[Outcome]:
    """Run `cells` in order in one fresh namespace where ``torch`` is `lib`."""
    rng = np.random.default_rng(seed)
    proxy = _LibProxy(lib, _random_api(lib, rng))
    bdict = dict(vars(builtins))
    bdict["__import__"] = _importer(proxy, lib.__name__)
    ns = {"__name__": "__main__", "__builtins__": bdict, "torch": proxy}
    outcomes = []
    for k, cell in enumerate(cells):
        buf = io.StringIO()
        err = None
        with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(buf):
            warnings.simplefilter("always")
            try:
                tree = ast.parse(cell.source)
                last = None
                if cell.jupyter and tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                exec(compile(tree, f"<{name} cell {k}>", "exec"), ns)
                if last is not None:
                    value = eval(compile(last, f"<{name} cell {k}>", "eval"), ns)
                    if value is not None:
                        print(repr(value))
            except Exception as e:  # noqa: BLE001 - compared with torch's
                err = (type(e).__name__, _mask(str(e)))
        outcomes.append(Outcome(_mask(buf.getvalue()).split("\n"), err,
                                [(w.category.__name__, _mask(str(w.message))) for w in caught]))
    return outcomes


# ----------------------------------------------------------------------------- tests

def _describe(cell: Cell, k: int, path: pathlib.Path) -> str:
    return f"{path.name} cell {k} (line {cell.line}):\n{cell.source}\n"


@pytest.mark.parametrize("path", SEED_FILES, ids=lambda p: p.name)
def test_seed_document(path):
    cells = extract_cells(path.read_text(encoding="utf-8"))
    assert cells, f"no code cells found in {path.name}"
    seed = zlib.crc32(path.name.encode())
    want = run_document(cells, real_torch, seed, path.name)
    got = run_document(cells, symgrad, seed, path.name)
    problems = []
    for k, (cell, w, g) in enumerate(zip(cells, want, got)):
        where = _describe(cell, k, path)
        if w.stdout != g.stdout:
            diff = "\n".join(difflib.unified_diff(w.stdout, g.stdout, "torch", "symgrad",
                                                  lineterm=""))
            problems.append(f"{where}stdout differs:\n{diff}")
        if w.error != g.error:
            problems.append(f"{where}exception differs:\n  torch:   {w.error}\n  symgrad: {g.error}")
        if w.warns != g.warns:
            problems.append(f"{where}warnings differ:\n  torch:   {w.warns}\n  symgrad: {g.warns}")
    assert not problems, "\n\n".join(problems)


def test_seed_documents_present():
    assert len(SEED_FILES) >= 5


# Cell counts of the current documents: a regression check of the extractor (a document
# not listed here is still run above).
EXPECTED_CELLS = {
    "000_d02e47f1856f4eab.txt": 6,
    "001_ab00e8c122e28616.txt": 5,
    "002_f044692f87978827.txt": 14,
    "003_4edcf829b26aabb2.txt": 5,
    "004_a10b36a8b81a8f62.txt": 13,
}


@pytest.mark.parametrize("path", SEED_FILES, ids=lambda p: p.name)
def test_extractor_finds_every_cell(path):
    cells = extract_cells(path.read_text(encoding="utf-8"))
    if path.name in EXPECTED_CELLS:
        assert len(cells) == EXPECTED_CELLS[path.name], [c.source for c in cells]
    for c in cells:
        assert _status(c.source) == "ok"
        assert not _is_output_like(c.source)


MIXED = '''# A mixed document

```python
import torch
x = torch.ones(2)
```

    tensor([1., 1.])

```python
tensor([1., 1.])
```

```
print("plain fence: output, not run")
```

In [3]:
# a comment paragraph

y = x * 2
s = """a string

with a blank line"""
print(y)

tensor([2., 2.])
True


Some markdown text, not code。

In [4]: y.sum()

Out[4]: tensor(4.)

```python
False
True
<SumBackward0 object at 0x000001CB4A19FB50>
```
'''


def test_extractor_on_mixed_document():
    cells = extract_cells(MIXED)
    assert [c.source for c in cells] == [
        "import torch\nx = torch.ones(2)",
        '# a comment paragraph\n\ny = x * 2\ns = """a string\n\nwith a blank line"""\nprint(y)',
        "y.sum()",
    ]
    assert [c.jupyter for c in cells] == [False, True, True]


def test_runner_aliases_torch_and_draws_identically():
    cells = [Cell("import torch\nimport torch.nn.functional as F\n"
                  "from torch import randn\nprint(torch.__name__, F.__name__)\n"
                  "print(torch.randn(2).tolist() == randn(2).tolist())", 1, False),
             Cell("torch.tensor([1.5])", 2, True)]
    w = run_document(cells, real_torch, 7, "t")
    g = run_document(cells, symgrad, 7, "t")
    assert w[0].stdout[0] == "torch torch.nn.functional"
    assert g[0].stdout[0] == "symgrad symgrad.nn.functional"
    assert w[0].stdout[1] == g[0].stdout[1] == "False"
    assert w[1].stdout == g[1].stdout == ["tensor([1.5000])", ""]
    # same seed, same stream, same values in both libraries
    a = run_document([Cell("v = torch.randn(3, 2).tolist()", 1, False)], real_torch, 3, "t")
    assert a[0].error is None
