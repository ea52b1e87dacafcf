"""Run one op through the whole path: builder -> bytes -> load -> Session -> run; and the same
op on onnxruntime, for ops with an ONNX counterpart."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

import msv0
from msv0 import straight_line
from msv0.builder import Builder
from msv0.fb.Format import Format
from msv0.registry import Value


@dataclass
class Const:
    """An op input written into the model as a constant tensor."""

    value: np.ndarray
    format: int = Format.NHWC  # Format.KHWC for conv weights
    quant: list | None = None
    type_id: int | None = None
    dims: tuple | None = None  # the dims to write when they differ from value.shape (bit-packed data)
    clusters: np.ndarray | None = None


def run_op(op: str, inputs: Sequence[np.ndarray | Const], outputs: int = 1, num_threads: int = 1,
           out_dtypes: Sequence | None = None, in_quant: Sequence | None = None, out_quant: Sequence | None = None,
           quant_type: int = 0, native: bool | None = None, **attrs) -> list[np.ndarray]:
    """Build a one-node model of `op`, run it on the non-Const inputs, return its outputs.
    in_quant[k] / out_quant[k]: the quantParams (list of dicts) of input k (not a Const: those
    carry theirs) / output k, or None. native: assert that the node runs as a native step (True)
    or in Python (False)."""
    b = Builder(op)
    idx, feeds = [], []
    for k, x in enumerate(inputs):
        if isinstance(x, Const):
            idx.append(b.const(f"c{k}", x.value, format=x.format, quant=x.quant, type_id=x.type_id, dims=x.dims,
                               clusters=x.clusters))
        else:
            x = np.asarray(x)
            idx.append(b.input(f"in{k}", x.shape, x.dtype, quant=in_quant[k] if in_quant else None))
            feeds.append(x)
    outs = [b.tensor(f"out{k}", (out_dtypes or [np.float32] * outputs)[k], quant=out_quant[k] if out_quant else None)
            for k in range(outputs)]
    b.node(op, idx, outputs=outs, name=f"{op.lower()}_node", quant_type=quant_type, **attrs)
    b.output(*outs)
    session = msv0.Session(b.finish(), num_threads=num_threads)
    if native is not None:
        assert [program is not None for _, program in session.plan_info.steps] == [native], f"{op} native: {native}"
    result = session.run(feeds)
    return [result[f"out{k}"] for k in range(outputs)]


def ort_run(op: str, inputs: Sequence[np.ndarray], n_out: int = 1, opset: int = 13, **attrs) -> list[np.ndarray]:
    """Run a one-node ONNX graph of `op` on onnxruntime (skips the test where it is missing)."""
    import pytest

    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    helper = onnx.helper
    names = [f"i{k}" for k in range(len(inputs))]
    outs = [f"o{k}" for k in range(n_out)]
    node = helper.make_node(op, names, outs, **attrs)
    vi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype), np.shape(x))
          for n, x in zip(names, inputs)]
    vo = [onnx.ValueInfoProto(name=n) for n in outs]
    model = helper.make_model(helper.make_graph([node], "g", vi, vo), opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {n: np.asarray(x) for n, x in zip(names, inputs)})


def assert_program_matches_single_calls(model, feeds, num_threads: int, program_steps: int | None = None) -> None:
    """The model's native steps run as C++ Programs (all of it as one Program of `program_steps`
    kernel objects when that is given), and its results equal, bit for bit, those of calling
    each step's kernel object on its own (NativeOp.__call__), step by step, with the same threads."""
    session = msv0.Session(model, num_threads=num_threads)
    model = session.model
    (plan,) = session._idle[0].plans.values()
    labels = [s.label for s in plan.steps]
    assert labels == ["native program"] if program_steps is not None else "native program" in labels
    (sig,) = session._idle[0].plans
    inputs = {k: Value(shape, model.tensors[k].dtype, model.tensors[k]) for k, shape in zip(model.graph_inputs, sig)}
    values, planned = straight_line.infer(model, model.main_nodes, inputs, model.graph_outputs)
    if program_steps is not None:
        assert len(planned) == program_steps and all(p.kernel is not None for _, p, _, _ in planned)
    env = {k: v.const for k, v in values.items() if v.const is not None}
    env.update(zip(model.graph_inputs, feeds))
    pool = msv0._core.ThreadPool(num_threads)
    pool.bind()
    try:
        for _, step, ins, outs in planned:
            results = [np.empty(s, d) for s, d in step.outputs]
            step.run([np.require(env[k], requirements="C") for k in ins], results)  # a kernel's run calls it alone
            env.update(zip(outs, results))
    finally:
        msv0._core.ThreadPool.unbind()
    for k, got in zip(model.graph_outputs, session.run(feeds).values()):
        np.testing.assert_array_equal(got, env[k])
