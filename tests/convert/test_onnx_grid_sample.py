"""ONNX GridSample (onnx_grid_sample) against ONNX Runtime: every mode, padding mode and corner
alignment, grids reaching past the image on both sides, nearest's ties, batches with their own
grids, and a 1x1 image."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h  # noqa: E402

from onnxcheck import IR_VERSION, check, run_msv0, run_reference  # noqa: E402

R = np.random.default_rng(5)


def model(x_shape, grid_shape, opset=20, **attrs):
    g = h.make_graph([h.make_node("GridSample", ["x", "grid"], ["y"], **attrs)], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, x_shape), h.make_tensor_value_info("grid", T.FLOAT, grid_shape)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)


@pytest.mark.parametrize("mode,padding,align", list(itertools.product(["linear", "nearest", "cubic"],
                                                                      ["zeros", "border", "reflection"], [0, 1])))
def test_grid_sample_matches_onnxruntime(mode, padding, align):
    x = R.standard_normal((2, 3, 5, 7)).astype(np.float32)
    grid = R.uniform(-1.6, 1.6, (2, 4, 9, 2)).astype(np.float32)
    # exact pixel centres, corners and nearest's ties (x.5 after unnormalising) among them
    w = x.shape[3]
    grid[0, 0, :, 0] = ((np.arange(9) - 1.0) * 2 + 1) / w - 1 if not align else np.linspace(-1, 1, 9)
    grid[0, 1, :, 0] = (2 * np.arange(9) - 2.0) / w - 1 if not align else (np.arange(9) - 0.5) / 3 - 1
    grid[0, 2, :2] = [[-1, -1], [1, 1]]
    check(model(x.shape, grid.shape, mode=mode, padding_mode=padding, align_corners=align),
          {"x": x, "grid": grid}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_opset16_names(mode):
    x = R.standard_normal((1, 2, 6, 4)).astype(np.float32)
    grid = R.uniform(-1.2, 1.2, (1, 3, 5, 2)).astype(np.float32)
    check(model(x.shape, grid.shape, opset=16, mode=mode, padding_mode="reflection"), {"x": x, "grid": grid})


@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_one_pixel_image(padding, align):
    x = R.standard_normal((1, 2, 1, 1)).astype(np.float32)
    grid = R.uniform(-2, 2, (1, 2, 3, 2)).astype(np.float32)
    check(model(x.shape, grid.shape, mode="linear", padding_mode=padding, align_corners=align), {"x": x, "grid": grid})


@pytest.mark.filterwarnings("ignore:divide by zero")  # onnx's reference on a one-pixel axis
@pytest.mark.parametrize("size", [(2, 3, 5, 7), (1, 1, 1, 4), (2, 1, 3, 1)])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid_then_grid_sample(size, align):
    """A spatial transformer: θ (a runtime input) -> AffineGrid -> GridSample of the input. A
    one-pixel axis with align_corners sits at -1 as in PyTorch and onnx's reference (ONNX Runtime
    puts it at +1), so those cases compare with the reference."""
    from onnx import numpy_helper
    n, ch, hgt, w = size
    nodes = [h.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align),
             h.make_node("GridSample", ["x", "grid"], ["y"], align_corners=align)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, size),
                                  h.make_tensor_value_info("theta", T.FLOAT, (n, 2, 3))],
                     [h.make_tensor_value_info("y", T.FLOAT, None), h.make_tensor_value_info("grid", T.FLOAT, None)],
                     [numpy_helper.from_array(np.array(size, np.int64), "size")])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 20)], ir_version=IR_VERSION)
    theta = (np.eye(2, 3)[None] + R.uniform(-0.4, 0.4, (n, 2, 3))).astype(np.float32)
    feeds = {"x": R.standard_normal(size).astype(np.float32), "theta": theta}
    if align and 1 in (hgt, w):
        want, got = run_reference(m.SerializeToString(), feeds), run_msv0(m.SerializeToString(), feeds)
        for k in want:
            np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5)
    else:
        check(m, feeds)
