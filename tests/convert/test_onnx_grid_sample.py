"""ONNX GridSample (onnx_grid_sample) against ONNX Runtime: every mode, padding mode and corner
alignment, grids reaching past the image on both sides, nearest's ties, batches with their own
grids, and a 1x1 image."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h  # noqa: E402

from onnxcheck import IR_VERSION, check  # noqa: E402

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
