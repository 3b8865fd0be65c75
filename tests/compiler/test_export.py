"""symgrad.export / deserialize: round trips (in this process and a fresh one) checked
against torch's autograd, programs with loops and pytrees, closed-over values baked in,
and the bad blobs and calls the format must refuse clearly."""
from __future__ import annotations

import json
import struct
import subprocess
import sys

import numpy as np
import pytest
import torch

import symgrad as sg
from symgrad import exporting

RNG = np.random.default_rng(0)
W1, B1, W2 = RNG.normal(size=(3, 4)), RNG.normal(size=(4,)), RNG.normal(size=(4, 2))
X = RNG.normal(size=(6, 3))


def loss(m, p, x):
    h = m.tanh(x @ p["w1"] + p["b1"])
    return (h @ p["w2"]).pow(2).mean()


def _torch_grads(p, x):
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in p.items()}
    value = loss(torch, tp, torch.tensor(x))
    value.backward()
    return float(value.detach()), {k: t.grad.numpy() for k, t in tp.items()}


P = {"w1": W1, "b1": B1, "w2": W2}


def test_value_and_grad_round_trip_matches_torch():
    e = sg.export(sg.value_and_grad(lambda p, x: loss(sg, p, x)), P, X)
    assert [s[:2] for s in e.in_specs] == [("p['b1']", (4,)), ("p['w1']", (3, 4)),
                                           ("p['w2']", (4, 2)), ("x", (6, 3))]
    blob = e.serialize()
    value, grads = sg.deserialize(blob)(P, X)
    want_v, want_g = _torch_grads(P, X)
    np.testing.assert_allclose(value, want_v, rtol=1e-12)
    for k in P:
        np.testing.assert_allclose(grads[k], want_g[k], rtol=1e-10, atol=1e-12)


def test_a_fresh_process_runs_the_blob(tmp_path):
    path = tmp_path / "f.sgx"
    path.write_bytes(sg.export(sg.value_and_grad(lambda p, x: loss(sg, p, x)), P, X).serialize())
    np.savez(tmp_path / "args.npz", X=X, **P)
    code = ("import numpy as np, symgrad, sys, json\n"
            f"a = np.load({str(tmp_path / 'args.npz')!r})\n"
            f"f = symgrad.deserialize(open({str(path)!r}, 'rb').read())\n"
            "v, g = f({'w1': a['w1'], 'b1': a['b1'], 'w2': a['w2']}, a['X'])\n"
            "print(json.dumps([float(v), g['w1'].tolist()]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=300)
    value, gw1 = json.loads(out.stdout.strip().splitlines()[-1])
    want_v, want_g = _torch_grads(P, X)
    np.testing.assert_allclose(value, want_v, rtol=1e-12)
    np.testing.assert_allclose(gw1, want_g["w1"], rtol=1e-10, atol=1e-12)


def test_loops_and_hessians_export():
    def f(w, xs):
        h, ys = sg.scan(lambda h, x: (sg.tanh(h * w + x), h.sum()),
                        sg.zeros(3, dtype=sg.float64), xs)
        return h.sum() + ys.sum()

    def f_torch(w, xs):
        h, acc = torch.zeros(3, dtype=torch.float64), 0
        for x in xs:
            acc = acc + h.sum()
            h = torch.tanh(h * w + x)
        return h.sum() + acc
    w, xs = np.array([0.5, -0.3, 0.2]), RNG.normal(size=(5, 3))
    got = sg.deserialize(sg.export(sg.hessian(f), w, xs).serialize())(w, xs)
    want = torch.autograd.functional.hessian(lambda w_: f_torch(w_, torch.tensor(xs)),
                                             torch.tensor(w))
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-10, atol=1e-12)


def test_closed_over_values_are_constants_of_the_export():
    scale = sg.tensor(2.0, dtype=sg.float64)
    e = sg.export(lambda x: x * scale, np.ones(3))
    scale.data.fill_(5.0)
    np.testing.assert_array_equal(sg.deserialize(e.serialize())(np.ones(3)), [2.0, 2.0, 2.0])


def test_the_blob_holds_no_code():
    blob = sg.export(sg.grad(lambda x: (sg.sin(x) ** 2).sum()), np.ones(4)).serialize()
    n = struct.unpack_from("<Q", blob, len(exporting.MAGIC) + 36)[0]
    header = json.loads(blob[len(exporting.MAGIC) + 44:len(exporting.MAGIC) + 44 + n])
    assert {rec["op"] for rec in header["nodes"]} <= set(sg.graph.primitives.PRIMITIVES) | {
        "input", "const"}


# ---- bad blobs and calls ----------------------------------------------------------------------
def _blob():
    return sg.export(sg.grad(lambda x: (x ** 3).sum()), np.ones(2)).serialize()


def test_bad_blobs_are_refused_clearly():
    blob = _blob()
    with pytest.raises(ValueError, match="bad magic"):
        sg.deserialize(b"junk" + blob)
    with pytest.raises(ValueError, match="digest does not match"):
        sg.deserialize(blob[:-3])
    tampered = bytearray(blob)
    tampered[-20] ^= 0xFF
    with pytest.raises(ValueError, match="digest does not match"):
        sg.deserialize(bytes(tampered))
    with pytest.raises(ValueError, match="truncated"):
        sg.deserialize(blob[:len(exporting.MAGIC) + 10])
    newer = bytearray(blob)
    struct.pack_into("<I", newer, len(exporting.MAGIC), exporting.FORMAT_VERSION + 1)
    with pytest.raises(ValueError, match="newer than this symgrad"):
        sg.deserialize(bytes(newer))
    with pytest.raises(TypeError, match="expects bytes"):
        sg.deserialize("text")


def test_calls_that_do_not_match_the_export_are_refused():
    f = sg.deserialize(_blob())
    with pytest.raises(TypeError, match=r"argument x must be float64\[2\], got float32\[2\]"):
        f(np.ones(2, np.float32))
    with pytest.raises(TypeError, match="structured as"):
        f(np.ones(2), np.ones(2))


def test_user_primitives_cannot_be_exported():
    import sympy
    sq = sg.elementwise("export_test_softsq", lambda x: sympy.log(1 + x ** 2))
    with pytest.raises(ValueError, match="defined by Python code"):
        sg.export(lambda x: sg.apply(sq, x).sum(), np.ones(2)).serialize()
