"""The shapes of a TFLite model's dynamic tensors, from LiteRT.

A .tflite file stores one shape per tensor, traced when it was exported; where a tensor's
shape_signature has a dynamic dim past the batch, that stored dim is a placeholder (1). LiteRT
recomputes such shapes from its inputs' shapes when it prepares the model, and those computed
from values (a STRIDED_SLICE whose end a SHAPE computes) when it runs it; so LiteRT is the shape
inference here: BirdNET's STFT front end (input [1, 144000], its frames [-1, -1] stored as
[1, 1]) and openWakeWord's melspectrogram.tflite (input [-1, -1], which its package resizes to
1280 samples) convert at their real shapes. Without the ai-edge-litert package, or where LiteRT
cannot prepare the model (custom ops), the stored shapes stay.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from msv0.errors import ModelError


def dynamic(g) -> bool:
    """Whether a tensor of subgraph g has a dynamic dim past the batch in its signature."""
    for i in range(g.TensorsLength()):
        t = g.Tensors(i)
        if t.ShapeSignatureLength() > 1 and min(t.ShapeSignatureAsNumpy()[1:]) < 0:
            return True
    return False


def with_batch(g, input_shapes: Mapping[str, Sequence[int]] | None, batch: int | None) -> dict[str, list[int]]:
    """input_shapes, and batch as the first dim of every other input whose signature leaves it dynamic."""
    out = {k: list(v) for k, v in (input_shapes or {}).items()}
    for i in map(int, g.InputsAsNumpy()) if batch is not None else ():
        t = g.Tensors(i)
        name = t.Name().decode() if t.Name() else ""
        if name not in out and t.ShapeSignatureLength() and t.ShapeSignatureAsNumpy()[0] < 0:
            out[name] = [int(batch), *(int(d) for d in t.ShapeAsNumpy()[1:])]
    return out


def resolved(data: bytes, model, input_shapes: Mapping[str, Sequence[int]] | None
             ) -> dict[int, tuple[int, ...]] | None:
    """{tensor index: shape} of the main subgraph's tensors whose signature is dynamic, as LiteRT
    prepares the model with input_shapes (by input name; the stored shapes otherwise); None when
    nothing is dynamic and no input is resized, or LiteRT cannot tell."""
    g = model.Subgraphs(0)
    if not input_shapes and not dynamic(g):
        return None
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        if input_shapes:
            raise ModelError("input_shapes of a TFLite model need LiteRT to recompute the shapes that follow "
                             "(pip install ai-edge-litert)") from None
        return None
    try:
        it = Interpreter(model_content=data,
                         experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    except Exception:  # an op LiteRT lacks (custom, Flex): the stored shapes
        if input_shapes:
            raise ModelError("input_shapes of a TFLite model need LiteRT to load it, which fails: custom or "
                             "Flex operators") from None
        return None
    inputs = {d["name"]: d["index"] for d in it.get_input_details()}
    for name, shape in (input_shapes or {}).items():
        if name not in inputs:
            raise ModelError(f"input_shapes names '{name}', not an input of the model: {list(inputs)}")
        it.resize_tensor_input(inputs[name], [int(d) for d in shape])
    try:
        it.allocate_tensors()
        prepared = _shapes(it, g)
        # Shapes computed from values (a SHAPE's, a STRIDED_SLICE's end) are set by a run: two
        # runs on different data, and the shapes they agree on (those of NMS-like ops differ).
        runs = []
        for fill in (np.zeros, np.ones):
            for d in it.get_input_details():
                it.set_tensor(d["index"], fill(d["shape"], d["dtype"]))
            it.invoke()
            runs.append(_shapes(it, g))
    except Exception as e:
        if input_shapes:
            raise ModelError(f"LiteRT cannot prepare the model at input shapes {dict(input_shapes)}: "
                             f"{str(e).strip()}") from None
        return None
    out = {}
    for i, shape in prepared.items():
        t = g.Tensors(i)
        if i in inputs.values() or t.ShapeSignatureLength() and min(t.ShapeSignatureAsNumpy()) < 0:
            out[i] = runs[0][i] if runs[0][i] == runs[1][i] else shape
    return out


def _shapes(it, g) -> dict[int, tuple[int, ...]]:
    """The shape LiteRT holds for each tensor of the file (its own scratch tensors follow them)."""
    return {int(d["index"]): tuple(int(n) for n in d["shape"]) for d in it.get_tensor_details()
            if int(d["index"]) < g.TensorsLength()}
