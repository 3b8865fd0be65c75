"""A program: input nodes (arguments and closed-over tensors), output nodes, and how the
outputs nest. Prints like a jaxpr (one line per node) and as Graphviz source."""
from __future__ import annotations

from dataclasses import dataclass

from . import pytree
from .node import Constant, Node, toposort

__all__ = ["Program", "node_label"]

_SHORT = {"float32": "f32", "float64": "f64", "float16": "f16", "int64": "i64",
          "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "bool"}


def _type(n: Node) -> str:
    return f"{_SHORT[n.dtype.name]}[{','.join(map(str, n.shape))}]"


def _attr(v) -> str:
    if isinstance(v, Constant):
        return repr(v)
    if hasattr(v, "name") and hasattr(v, "np"):
        return v.name
    return str(v)


def node_label(n: Node) -> str:
    return n.op + "".join(f" {k}={_attr(v)}" for k, v in n.attrs if k not in ("expr",))


@dataclass
class Program:
    """A traced (and possibly transformed / optimised) program."""

    inputs: list[Node]
    input_names: list[str]
    outputs: list[Node]
    output_names: list[str]
    out_structure: object = None          # the pytree nesting of the outputs
    # (output index, input index) pairs: the output is the input's new value (state a
    # training step updates), so native code may compute it straight into the input's
    # buffer -- the call then writes the state in place instead of returning a copy
    donated: tuple = ()

    def native_structure(self):
        """The outputs' nesting as tuples of output indices (``0`` for one bare output),
        or None when it has lists or dicts (which native entries do not build)."""
        if self.out_structure is None or not pytree.kinds(self.out_structure) <= {"leaf", "tuple"}:
            return None
        return pytree.unflatten(self.out_structure, range(len(self.outputs)))

    def nodes(self) -> list[Node]:
        return toposort(self.outputs)

    def as_text(self) -> str:
        names: dict[int, str] = {}
        for node, name in zip(self.inputs, self.input_names):
            names[id(node)] = name
        lines, counter = [], [0]

        taken = set(self.input_names)

        def fresh():
            while True:
                i = counter[0]
                counter[0] += 1
                s = ""
                while True:
                    s = chr(ord("a") + i % 26) + s
                    i = i // 26 - 1
                    if i < 0:
                        break
                if s not in taken:
                    return s

        def ref(n: Node) -> str:
            if n.op == "const":
                v = n.attr("value").value
                if v.ndim == 0:
                    return repr(v.item())
                return f"const{_type(n)}"
            return names[id(n)]

        for n in self.nodes():
            if n.op in ("input", "const"):
                continue
            names[id(n)] = fresh()
            rhs = node_label(n)
            if n.op == "fused":
                rhs = f"fused[{n.attr('expr')}]"
            args = " ".join(ref(a) for a in n.args)
            lines.append(f"    {names[id(n)]}:{_type(n)} = {rhs} {args}".rstrip())
            for k, v in n.attrs:           # a loop: its body (and condition), indented
                if hasattr(v, "inputs") and hasattr(v, "as_text"):
                    lines.append(f"      {k}:")
                    lines.extend(v.as_text(indent="        ").splitlines())
        ins = " ".join(f"{nm}:{_type(nd)}" for nd, nm in zip(self.inputs, self.input_names))
        outs = ", ".join(ref(o) for o in self.outputs)
        return "{ lambda " + ins + " .\n  let\n" + "\n".join(lines) + f"\n  in ({outs}) }}"

    def dot(self) -> str:
        """Graphviz source of the DAG."""
        ids: dict[int, str] = {}
        out = ["digraph program {", "  rankdir=LR;", "  node [shape=box, fontsize=10];"]
        for k, n in enumerate(self.nodes()):
            ids[id(n)] = f"n{k}"
            label = node_label(n) if n.op != "input" else n.attr("name")
            if n.op == "const":
                label = repr(n.attr("value"))
            shape = "ellipse" if n.op in ("input", "const") else "box"
            out.append(f'  n{k} [label="{label}\\n{_type(n)}", shape={shape}];')
            for a in n.args:
                out.append(f"  {ids[id(a)]} -> n{k};")
        for i, (o, name) in enumerate(zip(self.outputs, self.output_names)):
            out.append(f'  out{i} [label="{name}", shape=plaintext];')
            out.append(f"  {ids[id(o)]} -> out{i};")
        out.append("}")
        return "\n".join(out)
