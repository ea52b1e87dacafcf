"""The schema is the one source of its names and numbers (issue 9): no hand-written copies of
its enums in python/msv0 or csrc/model, and the C++ verifier's item sizes agree with the one
dtype table, dtypes.TO_NUMPY."""
import ast
import pathlib
import re

import numpy as np
import pytest

import msv0
from msv0 import dtypes
from msv0.builder import Builder
from msv0.model import PRIMITIVE_NAMES
from msv0.fb.TypeId import TypeId

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "msv0"
ENUMS = ("ActivationType", "CoordinateTransformMode", "EltwiseMode", "Format", "LshProjectionType", "NearestMode",
         "NodeType", "PadMode", "PaddingMode", "PoolMode", "QuantType", "ReduceMode", "ReduceType", "ResizeMethod",
         "RoundMode", "TypeId")


def _norm(name: str) -> str:
    return re.sub(r"^k(Number|Object)Type", "", name).replace("_", "").upper()


def _schema_names() -> set[str]:
    """Every enum member name, normalised, also with its enum's name in front (Format.NHWC)."""
    names = set()
    for enum in ENUMS:
        cls = getattr(__import__(f"msv0.fb.{enum}", fromlist=[enum]), enum)
        for member in vars(cls):
            if not member.startswith("_"):
                names |= {_norm(member), _norm(enum) + _norm(member)}
    return names


def _sources():
    return [p for p in PACKAGE.rglob("*.py") if "fb" not in p.relative_to(PACKAGE).parts]


def _is_int(node) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and type(node.value) is int


def test_no_module_constant_copies_a_schema_enum():
    """`RELU, RELU6 = 1, 3` or `Format.NHWC = 1` at module level: use msv0.fb's enums instead."""
    schema = _schema_names()
    found = []
    for path in _sources():
        for stmt in ast.parse(path.read_text()).body:
            if not isinstance(stmt, ast.Assign):
                continue
            for target in stmt.targets:
                names = target.elts if isinstance(target, ast.Tuple) else [target]
                values = stmt.value.elts if isinstance(stmt.value, ast.Tuple) else [stmt.value]
                for name, value in zip(names, values):
                    if isinstance(name, ast.Name) and _is_int(value) and _norm(name.id) in schema:
                        found.append(f"{path.relative_to(ROOT)}:{stmt.lineno} {name.id}")
    assert not found, found


def test_no_int_keyed_table_of_schema_names():
    """{0: "NCHW", 1: "NHWC"} or {0: "Mul", ...  # PROD, SUM}: derive it from the enum class."""
    schema = _schema_names()
    found = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Dict) and node.keys and all(k is not None and _is_int(k) for k in node.keys):
                if any(isinstance(v, ast.Constant) and isinstance(v.value, str) and _norm(v.value) in schema
                       for v in node.values):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found


def test_no_number_named_in_a_comment():
    """`if act_type == 1:  # RELU`: the name belongs in the code."""
    pattern = re.compile(r"(==|!=|\bin\b|=)\s*\(?-?\d+[\d, ]*\)?:?\s*#\s*([A-Z][A-Z_0-9]+)\b")
    schema = _schema_names()
    found = [f"{p.relative_to(ROOT)}:{i}" for p in _sources() for i, line in enumerate(p.read_text().splitlines(), 1)
             if (m := pattern.search(line)) and _norm(m.group(2)) in schema]
    assert not found, found


def test_model_cc_names_type_ids():
    text = (ROOT / "csrc" / "model" / "model.cc").read_text()
    found = re.findall(r"(?:case|==|!=)\s*\d{2,}\b.*", text)
    assert not found, found


@pytest.mark.parametrize("type_id", sorted(t for t in dtypes.TO_NUMPY if t not in dtypes.OBJECT_TYPES))
def test_verifier_item_size_matches_dtype_table(type_id):
    itemsize = dtypes.TO_NUMPY[type_id].itemsize

    def model(nbytes):
        b = Builder("sizes")
        x = b.input("x", (3,), np.float32)
        b.const("c", np.zeros(nbytes, np.uint8), type_id=type_id, dims=(3,))
        b.output(b.node("Add", [x, x]))
        return b.finish()

    msv0.load(model(3 * itemsize))
    with pytest.raises(msv0.ModelError, match="bytes, dims need"):
        msv0.load(model(3 * itemsize + 1))


def test_quant_param_fields_are_the_schema_table():
    from msv0.fb.QuantParam import QuantParamT
    from msv0.model import QuantParam

    assert list(QuantParam._fields) == list(vars(QuantParamT()))
    assert QuantParam(scale=0.5, zeroPoint=0) == QuantParam(**{**vars(QuantParamT()), "scale": 0.5})


def test_type_id_names_are_mindspores():
    assert (TypeId.kNumberTypeFloat32, TypeId.kObjectTypeString) == (43, 12)  # format-v0.md §2


# Fields C++ checks against the model (a subgraph index must name a subgraph): left at default.
CHECKED_FIELDS = {"condSubgraphIndex", "bodySubgraphIndex", "subGraphIndex"}


def _non_default(default, j: int):
    """Values unlike the default for a field: a scalar of its type, or (None: a vector or a string)
    a list and a str, tried in that order."""
    if isinstance(default, bool):
        return [not default]
    if isinstance(default, int):
        return [default + 2 + j % 50]
    if isinstance(default, float):
        return [float(np.float32(default + 1.25 + j % 7))]  # as a float field holds it
    return [[0, 1], f"s{j}"]  # [0, 1] reads back equal as ints, floats and bools


def test_load_reads_every_op_field():
    """Every field of every op table, set unlike its default by the generated Python writer, is
    what load gives back (C++ reads them by field number, msv0.model names them), and an absent
    field its default."""
    b = Builder("fields")
    x = b.input("x", (1,))
    want = {}
    for op in sorted(PRIMITIVE_NAMES.values()):
        if op == "NONE":
            continue
        defaults = vars(getattr(__import__(f"msv0.fb.{op}", fromlist=[op]), f"{op}T")())
        attrs = {}
        for j, (k, d) in enumerate(defaults.items()):
            if k in CHECKED_FIELDS:
                continue
            for v in _non_default(d, j):
                try:
                    b.node(op, [x], name=f"probe_{op}_{k}", **{k: v})
                except ValueError:  # not this field's kind
                    continue
                b.graph.nodes.pop()
                attrs[k] = tuple(v) if isinstance(v, list) else v.encode() if isinstance(v, str) else v
                break
            else:
                raise AssertionError(f"{op}.{k}: no value packs")
        b.node(op, [x], name=f"all_{op}", **attrs)
        b.node(op, [x], name=f"none_{op}")
        want[op] = (defaults, attrs)
    model = msv0.load(b.finish())
    by_name = {n.name: n for n in model.nodes}
    for op, (defaults, attrs) in want.items():
        got = dict(by_name[f"all_{op}"].attrs)
        assert got == {**defaults, **attrs}, op
        assert all(type(got[k]) is type(v) or isinstance(v, tuple) for k, v in attrs.items()), op
        assert dict(by_name[f"none_{op}"].attrs) == defaults, op
