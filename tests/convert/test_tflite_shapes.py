"""TFLite tensors whose shape_signature is dynamic store placeholder shapes (1 for each -1); the
converter takes the shapes LiteRT computes (msv0/convert/tflite_shapes.py) from the stored input
shapes or from input_shapes, including those only a run sets: a STRIDED_SLICE whose end a SHAPE
computes, as BirdNET's STFT front end frames its input."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert.interpreter")

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from test_tflite_convert import run_litert  # noqa: E402
from test_tflite_math import Writer  # noqa: E402

I32 = np.int32


def first_half(stored: int, dynamic_input: bool) -> bytes:
    """2·x[:, :len(x) // 2], the slice's end computed from SHAPE(x); everything past the batch
    of the slice and the product dynamic, stored as 1."""
    w = Writer()
    x = w.input("x", [1, stored])
    shape = w.op("SHAPE", [x], [2], "ShapeOptions", out_dtype=I32, out_type=2)
    one = w.const(np.array([1], I32))
    n = w.op("STRIDED_SLICE", [shape, one, w.const(np.array([2], I32)), one], [], "StridedSliceOptions",
             out_dtype=I32, shrink_axis_mask=1)
    half = w.op("FLOOR_DIV", [n, w.scalar(2, I32)], [], out_dtype=I32)
    end = w.op("PACK", [w.scalar(1, I32), half], [2], "PackOptions", out_dtype=I32, values_count=2, axis=0)
    y = w.op("STRIDED_SLICE", [x, w.const(np.zeros(2, I32)), end, w.const(np.ones(2, I32))], [1, 1],
             "StridedSliceOptions")
    out = w.op("MUL", [y, w.const(np.float32([2.0]))], [1, 1], "MulOptions")
    w.output(out)
    for t, signature in ((x, [-1, -1] if dynamic_input else [-1, stored]), (y, [-1, -1]), (out, [-1, -1])):
        w.signatures[(0, t)] = signature
    return w.finish()


def run_both(data: bytes, x: np.ndarray, **kw) -> tuple[np.ndarray, np.ndarray]:
    got = msv0.Session(msv0.load(convert(data, **kw))).run({"x": x})
    want = run_litert(data, {"x": x}) if x.shape[1] == 12 else _resized_litert(data, x)
    (name,) = want
    return got[name], want[name]


def _resized_litert(data: bytes, x: np.ndarray) -> dict[str, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter
    it = Interpreter(model_content=data)
    it.resize_tensor_input(it.get_input_details()[0]["index"], list(x.shape))
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return {d["name"]: it.get_tensor(d["index"]) for d in it.get_output_details()}


def test_shapes_a_run_sets_replace_the_stored_placeholders():
    x = np.arange(12, dtype=np.float32)[None]
    got, want = run_both(first_half(12, dynamic_input=False), x)
    assert got.shape == want.shape == (1, 6)
    np.testing.assert_array_equal(got, want)


def test_input_shapes_resize_a_dynamic_input():
    data = first_half(4, dynamic_input=True)
    x = np.arange(10, dtype=np.float32)[None]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the input named in input_shapes is no placeholder
        got, want = run_both(data, x, input_shapes={"x": [1, 10]})
    assert got.shape == want.shape == (1, 5)
    np.testing.assert_array_equal(got, want)
    with pytest.warns(UserWarning, match=r"'x' has dynamic dims \[-1, -1\]: converted at the shape the file "
                                         r"stores, \[1, 4\]; pass input_shapes"):
        assert msv0.load(convert(data)).outputs[0].shape == (1, 2)


def test_input_shapes_naming_no_input_is_a_model_error():
    with pytest.raises(msv0.ModelError, match="'y', not an input of the model"):
        convert(first_half(4, dynamic_input=True), input_shapes={"y": [1, 10]})


def test_batch_resizes_a_dynamic_batch():
    """batch= sets the first dim of inputs whose signature leaves it dynamic, and LiteRT the rest:
    a RESHAPE to [-1, 2, 2] stored as [1, 2, 2] converts at [3, 2, 2]."""
    w = Writer()
    x = w.input("x", [1, 4])
    y = w.op("RESHAPE", [x, w.const(np.array([-1, 2, 2], I32))], [1, 2, 2])
    out = w.op("MUL", [y, w.const(np.float32([2.0]))], [1, 2, 2], "MulOptions")
    w.output(out)
    for t, signature in ((x, [-1, 4]), (y, [-1, 2, 2]), (out, [-1, 2, 2])):
        w.signatures[(0, t)] = signature
    data = w.finish()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = msv0.Session(msv0.load(convert(data, batch=3))).run({"x": x})
    (name, want), = _resized_litert(data, x).items()
    assert got[name].shape == want.shape == (3, 2, 2)
    np.testing.assert_array_equal(got[name], want)
