"""ONNX -> v0 conversion: small graphs per op family, compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

# onnx is the converter's optional dependency (the `convert` extra): without it these tests skip.
onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from msv0.fb.ActivationType import ActivationType  # noqa: E402
from onnxcheck import IR_VERSION, check, run_msv0  # noqa: E402

R = np.random.default_rng(0)


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def model(nodes, inputs, outputs, inits=(), opset=17):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
                     [h.make_tensor_value_info(n, T.FLOAT, None) for n in outputs],
                     [nh.from_array(v, k) for k, v in inits])
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=IR_VERSION)


N = h.make_node
CASES = {
    "conv_bn_relu": ([N("Conv", ["x", "w", "b"], ["c"], pads=[1, 0, 1, 2], strides=[2, 1]),
                      N("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"]), N("Relu", ["n"], ["y"])],
                     [("x", [1, 3, 9, 8])], [("w", f32(5, 3, 3, 3)), ("b", f32(5)), ("g", f32(5)), ("be", f32(5)),
                                              ("m", f32(5)), ("v", np.abs(f32(5)) + 0.5)]),
    "depthwise_same_clip6": ([N("Conv", ["x", "w"], ["c"], group=4, auto_pad="SAME_UPPER", strides=[2, 2]),
                              N("Clip", ["c", "lo", "hi"], ["y"])],
                             [("x", [1, 4, 7, 7])], [("w", f32(4, 1, 3, 3)), ("lo", np.float32(0)), ("hi", np.float32(6))]),
    "clip_computed_min": ([N("ReduceMean", ["x"], ["m"], keepdims=0), N("Clip", ["x", "m", "hi"], ["y"])],
                          [("x", [1, 3, 5, 4])], [("hi", np.float32(0.5))]),
    "grouped_conv": ([N("Conv", ["x", "w"], ["y"], group=2, dilations=[2, 1])], [("x", [1, 4, 8, 8])],
                     [("w", f32(6, 2, 3, 3))]),
    "conv_transpose": ([N("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                          output_padding=[1, 1])], [("x", [1, 3, 5, 4])], [("w", f32(3, 2, 3, 3)), ("b", f32(2))]),
    "conv_transpose_bn_relu": ([N("ConvTranspose", ["x", "w", "b"], ["c"], strides=[2, 2]),
                                N("BatchNormalization", ["c", "g", "be", "m", "v"], ["n"]), N("Relu", ["n"], ["y"])],
                               [("x", [1, 4, 5, 3])], [("w", f32(4, 3, 2, 2)), ("b", f32(3)), ("g", f32(3)),
                                                        ("be", f32(3)), ("m", f32(3)), ("v", np.abs(f32(3)) + 0.5)]),
    "conv_transpose_add_bn": ([N("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2]), N("Add", ["c", "b"], ["a"]),
                               N("BatchNormalization", ["a", "g", "be", "m", "v"], ["y"])],
                              [("x", [1, 4, 5, 3])], [("w", f32(4, 3, 2, 2)), ("b", f32(1, 3, 1, 1)), ("g", f32(3)),
                                                       ("be", f32(3)), ("m", f32(3)), ("v", np.abs(f32(3)) + 0.5)]),
    # PP-LCNetV3's learnable affine block: a scalar Mul, then a scalar Add
    "conv_mul_add_scalars": ([N("Conv", ["x", "w", "cb"], ["c"], pads=[1, 1, 1, 1]), N("Mul", ["s", "c"], ["m"]),
                              N("Add", ["m", "t"], ["a"]), N("Relu", ["a"], ["y"])],
                             [("x", [1, 4, 5, 3])], [("w", f32(3, 4, 3, 3)), ("cb", f32(3)), ("s", np.float32([1.7])),
                                                      ("t", np.float32([-0.4]))]),
    "conv_transpose_mul_per_channel": ([N("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], group=4),
                                        N("Mul", ["c", "s"], ["y"])],
                                       [("x", [1, 4, 5, 3])], [("w", f32(4, 1, 3, 3)), ("s", f32(1, 4, 1, 1))]),
    "conv_mul_not_per_channel": ([N("Conv", ["x", "w"], ["c"]), N("Mul", ["c", "s"], ["y"])],
                                 [("x", [1, 4, 5, 3])], [("w", f32(3, 4, 2, 2)), ("s", f32(1, 3, 4, 1))]),
    # ... and after its hard-swish, in front of the next conv: folded where that conv pads nothing
    "affine_into_next_conv": ([N("Relu", ["x"], ["r"]), N("Mul", ["s", "r"], ["m"]), N("Add", ["m", "t"], ["a"]),
                               N("Conv", ["a", "w", "cb"], ["y"], strides=[2, 1], group=2)],
                              [("x", [1, 4, 5, 3])], [("w", f32(6, 2, 2, 3)), ("cb", f32(6)), ("s", np.float32([1.7])),
                                                       ("t", np.float32([-0.4]))]),
    "affine_before_padded_conv": ([N("Relu", ["x"], ["r"]), N("Mul", ["s", "r"], ["m"]), N("Add", ["m", "t"], ["a"]),
                                   N("Conv", ["a", "w"], ["y"], pads=[0, 1, 0, 1])],
                                  [("x", [1, 4, 5, 3])], [("w", f32(6, 4, 2, 3)), ("s", np.float32([1.7])),
                                                           ("t", np.float32([-0.4]))]),
    "conv_add_not_per_channel": ([N("Conv", ["x", "w"], ["c"]), N("Add", ["b", "c"], ["y"])],
                                 [("x", [1, 4, 5, 3])], [("w", f32(3, 4, 2, 2)), ("b", f32(1, 3, 4, 1))]),
    "depthwise_conv_transpose_bn": ([N("ConvTranspose", ["x", "w"], ["c"], strides=[2, 2], group=4),
                                     N("BatchNormalization", ["c", "g", "be", "m", "v"], ["y"])],
                                    [("x", [1, 4, 5, 3])], [("w", f32(4, 1, 3, 3)), ("g", f32(4)), ("be", f32(4)),
                                                             ("m", f32(4)), ("v", np.abs(f32(4)) + 0.5)]),
    "pools": ([N("MaxPool", ["x"], ["a"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
               N("AveragePool", ["a"], ["b"], kernel_shape=[2, 2], ceil_mode=1, strides=[2, 2]),
               N("GlobalAveragePool", ["b"], ["y"])], [("x", [2, 5, 11, 11])], []),
    "gemm_flatten": ([N("GlobalMaxPool", ["x"], ["p"]), N("Flatten", ["p"], ["f"]),
                      N("Gemm", ["f", "w", "b"], ["g"], transB=1, alpha=0.5), N("Relu", ["g"], ["y"])],
                     [("x", [2, 6, 4, 4])], [("w", f32(3, 6)), ("b", f32(3))]),
    "reshape_after_nhwc": ([N("Sigmoid", ["x"], ["s"]), N("Reshape", ["s", "shape"], ["y"])], [("x", [2, 3, 4, 5])],
                           [("shape", np.array([2, -1], np.int64))]),
    "concat_softmax_nhwc": ([N("Relu", ["x"], ["r"]), N("Concat", ["r", "x"], ["c"], axis=1),
                             N("Softmax", ["c"], ["y"], axis=1)], [("x", [1, 3, 4, 5])], []),
    # a 3-D conv, BatchNorm and pool over a unit depth (invisible-watermark's RivaGAN) as 2-D ones
    "unit_depth_3d": ([N("Conv", ["x", "w", "cb"], ["c"], kernel_shape=[1, 3, 3], pads=[0, 1, 1, 0, 1, 1],
                        strides=[2, 1, 2]),
                       N("BatchNormalization", ["c", "g", "be", "m", "v"], ["b"]),
                       N("MaxPool", ["b"], ["y"], kernel_shape=[1, 2, 2], strides=[1, 2, 2])],
                      [("x", [1, 3, 1, 9, 8])], [("w", f32(4, 3, 1, 3, 3)), ("cb", f32(4)), ("g", f32(4)),
                                                  ("be", f32(4)), ("m", f32(4)), ("v", np.abs(f32(4)) + 0.5)]),
    # negative pads crop (kaldi-style framing in onnx-asr's preprocessors), then the rest pads
    "pad_negative": ([N("Pad", ["x", "pads"], ["p"], mode="reflect"), N("Relu", ["p"], ["y"])], [("x", [1, 3, 6, 7])],
                     [("pads", np.array([0, 0, -1, 2, 0, -1, 1, -3], np.int64))]),
    "pad_negative_constant": ([N("Pad", ["x", "pads"], ["y"])], [("x", [2, 9])],
                              [("pads", np.array([-1, 3, 0, -4], np.int64))]),
    "split_slice_pad": ([N("Split", ["x"], ["a", "b"], axis=1), N("Slice", ["a", "st", "en", "ax"], ["s"]),
                         N("Pad", ["s", "pads"], ["p"], mode="reflect"), N("Add", ["p", "b2"], ["y"])],
                        [("x", [1, 4, 6, 6])], [("st", np.array([1, 0], np.int64)), ("en", np.array([5, 6], np.int64)),
                                                ("ax", np.array([2, 3], np.int64)),
                                                ("pads", np.array([0, 0, 1, 0, 0, 0, 1, 0], np.int64)),
                                                ("b2", f32(2, 1, 1))]),
    # torch.flip and x[::-2] export as Slices stepping down through index 0: a Reverse, then a
    # Slice upwards (r1.1's StridedSlice reads a negative end from the back)
    "slice_down_through_zero": ([N("Slice", ["x", "st", "en", "ax", "sp"], ["a"]), N("Relu", ["a"], ["r"]),
                                 N("Slice", ["r", "st1", "en1", "ax0", "sp1"], ["y"])],
                                [("x", [2, 4, 5, 6])], [("st", np.array([-1, 4], np.int64)),
                                                        ("en", np.array([-2**63 + 1, -100], np.int64)),
                                                        ("ax", np.array([1, 3], np.int64)), ("sp", np.array([-1, -2], np.int64)),
                                                        ("st1", np.array([-1], np.int64)), ("en1", np.array([-2**63], np.int64)),
                                                        ("ax0", np.array([0], np.int64)), ("sp1", np.array([-1], np.int64))]),
    "flip_rank2": ([N("Slice", ["x", "st", "en", "ax", "sp"], ["y"])], [("x", [3, 7])],
                   [("st", np.array([5], np.int64)), ("en", np.array([-9], np.int64)), ("ax", np.array([1], np.int64)),
                    ("sp", np.array([-3], np.int64))]),
    # 1-D BatchNorm (N, C, L) after an op it cannot fold into, as torch's BatchNorm1d exports
    "batchnorm_1d": ([N("Add", ["x", "x"], ["a"]), N("BatchNormalization", ["a", "g", "be", "m", "v"], ["y"])],
                     [("x", [2, 5, 9])], [("g", f32(5)), ("be", f32(5)), ("m", f32(5)), ("v", np.abs(f32(5)) + 0.5)]),
    # magika: [1, L, C] to NCHW [1, C, L, 1] through a Transpose, then a 5x1 conv. Stored NHWC the
    # transposed tensor is x's data as it is, so nothing is moved.
    "transpose_into_conv": ([N("Unsqueeze", ["x", "ax3"], ["u"]), N("Transpose", ["u"], ["t"], perm=[0, 2, 1, 3]),
                             N("Conv", ["t", "w"], ["y"])], [("x", [1, 12, 6])],
                            [("ax3", np.array([3], np.int64)), ("w", f32(4, 6, 5, 1))]),
    "reduce_transpose": ([N("ReduceSum", ["x", "axes"], ["r"], keepdims=0), N("Transpose", ["r"], ["y"], perm=[1, 0, 2])],
                         [("x", [2, 3, 4, 5])], [("axes", np.array([2], np.int64))]),
    "elementwise": ([N("Mul", ["x", "x"], ["a"]), N("Sqrt", ["a"], ["b"]), N("Sub", ["b", "c"], ["d"]),
                     N("Max", ["d", "x", "c"], ["e"]), N("Tanh", ["e"], ["y"])], [("x", [3, 4])], [("c", f32(4))]),
    "layernorm_gelu": ([N("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1),
                        N("MatMul", ["n", "w"], ["m"]), N("Div", ["m", "s2"], ["d"]), N("Erf", ["d"], ["e"]),
                        N("Add", ["e", "one"], ["a"]), N("Mul", ["m", "a"], ["p"]), N("Mul", ["p", "half"], ["y"])],
                       [("x", [2, 5, 8])], [("g", f32(8)), ("b", f32(8)), ("w", f32(8, 6)),
                                            ("s2", np.float32(np.sqrt(2))), ("one", np.float32(1)), ("half", np.float32(.5))]),
    "resize_nearest": ([N("Resize", ["x", "", "sc"], ["y"], mode="nearest", coordinate_transformation_mode="asymmetric",
                          nearest_mode="floor")], [("x", [1, 2, 3, 4])], [("sc", np.array([1, 1, 2, 2], np.float32))]),
    "resize_linear_align": ([N("Resize", ["x", "", "", "sz"], ["y"], mode="linear",
                               coordinate_transformation_mode="align_corners")], [("x", [1, 2, 3, 4])],
                            [("sz", np.array([1, 2, 7, 5], np.int64))]),
    "shape_chain": ([N("Shape", ["x"], ["sh"]), N("Gather", ["sh", "i0"], ["n"]), N("Unsqueeze", ["n", "ax0"], ["nu"]),
                     N("Concat", ["nu", "m1"], ["ns"], axis=0), N("Reshape", ["x", "ns"], ["y"])],
                    [("x", [2, 3, 2, 2])], [("i0", np.array(0, np.int64)), ("ax0", np.array([0], np.int64)),
                                            ("m1", np.array([-1], np.int64))]),
    "prelu_leaky_hswish": ([N("PRelu", ["x", "sl"], ["p"]), N("LeakyRelu", ["p"], ["l"], alpha=0.2),
                            N("HardSwish", ["l"], ["y"])], [("x", [1, 3, 4, 4])], [("sl", f32(3, 1, 1))]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_matches_onnxruntime(name):
    nodes, inputs, inits = CASES[name]
    m = model(nodes, inputs, ["y"], inits)
    feeds = {n: f32(*s) for n, s in inputs}
    check(m, feeds, atol=1e-4)


def test_keep_nchw_input_inserts_transpose():
    nodes, inputs, inits = CASES["conv_bn_relu"]
    m = model(nodes, inputs, ["y"], inits)
    check(m, {"x": f32(1, 3, 9, 8)}, atol=1e-4, keep_nchw=True)


@pytest.mark.parametrize("dim", ["N", -1])  # -1: how Paddle's exporter marks a dynamic dim
def test_dynamic_batch_is_fixed(dim):
    m = model([N("Relu", ["x"], ["y"])], [("x", [dim, 3, 2, 2])], [])
    with pytest.raises(msv0.ModelError, match="batch"):
        convert(m.SerializeToString())
    ms = msv0.load(convert(m.SerializeToString(), batch=4))
    assert ms.inputs[0].shape == (4, 2, 2, 3)


def test_file_is_r11_style(tmp_path):
    nodes, inputs, inits = CASES["conv_bn_relu"]
    src = tmp_path / "m.onnx"
    onnx.save(model(nodes, inputs, ["y"], inits), src)
    data = convert(src, tmp_path / "m.ms")
    assert data[4:8] == b"MSL1" and (tmp_path / "m.ms").read_bytes() == data
    ms = msv0.load(data)
    assert ms.version == "MindSpore Lite 1.1.0"
    assert [n.op for n in ms.nodes] == ["Conv2D"]  # BN folded, Relu fused
    conv = ms.nodes[0]
    assert conv.attrs.activationType == 1
    w = ms.tensors[conv.inputs[1]]
    assert w.shape == (5, 3, 3, 3) and w.format == 7
    assert ms.inputs[0].shape == (1, 9, 8, 3)


def test_unsupported_ops_are_all_reported(tmp_path):
    m = model([N("Relu", ["x"], ["a"]), N("Einsum", ["a"], ["b"], equation="nchw->nchw"),
               N("Resize", ["b", "", "sc"], ["c"], mode="linear", coordinate_transformation_mode="tf_crop_and_resize"),
               N("Bernoulli", ["c"], ["y"])],
              [("x", [1, 2, 3, 4])], ["y"], [("sc", np.array([1, 1, 2, 2], np.float32))])
    out = tmp_path / "never.ms"
    with pytest.raises(msv0.UnsupportedOpError) as err:
        convert(m.SerializeToString(), out)
    ops = {op for _, op, _ in err.value.nodes}
    assert {"Einsum", "Resize", "Bernoulli"} <= ops
    assert "tf_crop_and_resize" in str(err.value)
    assert not out.exists()


@pytest.mark.parametrize("name,ops", [("conv_transpose_bn_relu", ["DeConv2D"]),
                                      ("depthwise_conv_transpose_bn", ["DeDepthwiseConv2D"]),
                                      ("conv_transpose_add_bn", ["DeConv2D"]),
                                      ("conv_add_not_per_channel", ["Conv2D", "Add"]),
                                      ("conv_mul_add_scalars", ["Conv2D"]),
                                      ("conv_transpose_mul_per_channel", ["DeDepthwiseConv2D"]),
                                      ("conv_mul_not_per_channel", ["Conv2D", "Mul"]),
                                      ("affine_into_next_conv", ["Activation", "Conv2D"]),
                                      ("affine_before_padded_conv", ["Activation", "Mul", "Add", "Conv2D"])])
def test_affine_and_batchnorm_fold_into_convolutions(name, ops):
    nodes, inputs, inits = CASES[name]
    ms = msv0.load(convert(model(nodes, inputs, ["y"], inits).SerializeToString()))
    assert [n.op for n in ms.nodes] == ops  # Add, Mul and BatchNormalization folded, Relu fused


def test_transpose_into_nchw_stores_nhwc_without_moving_data():
    nodes, inputs, inits = CASES["transpose_into_conv"]
    ms = msv0.load(convert(model(nodes, inputs, ["y"], inits).SerializeToString()))
    assert [n.op for n in ms.nodes if n.op != "Reshape"] == ["Conv2D"]


@pytest.mark.parametrize("order,shared", [("xs", False), ("sx", False), ("xs", True)])
def test_silu_becomes_one_swish(order, shared):
    """Mul(x, Sigmoid(x)), the Sigmoid read by the Mul alone, is one Activation SWISH; a Sigmoid
    read elsewhere too stays."""
    mul_in = ["x", "s"] if order == "xs" else ["s", "x"]
    nodes = [N("Conv", ["i", "w"], ["x"], pads=[1, 1, 1, 1]), N("Sigmoid", ["x"], ["s"]), N("Mul", mul_in, ["y"])]
    outputs = ["y", "s"] if shared else ["y"]
    m = model(nodes, [("i", [1, 3, 6, 5])], outputs, [("w", f32(4, 3, 3, 3))])
    check(m, {"i": f32(1, 3, 6, 5)})
    ms = msv0.load(convert(m.SerializeToString()))
    acts = [int(n.attrs.type) for n in ms.nodes if n.op == "Activation"]
    assert acts == ([ActivationType.SIGMOID] if shared else [ActivationType.SWISH])
    assert ("Mul" in [n.op for n in ms.nodes]) == shared


# MatMul by a constant + Add of a constant over the last axis: the Add folds into the
# FullConnection's bias (either operand order, a [1, 1, n] or scalar bias); an Add that also
# broadcasts over rows or a second reader of the product stays an Add. A Relu after the folded Add
# fuses into the FullConnection too.
@pytest.mark.parametrize("bias,swap,second_use,ops", [((1, 1, 19), False, False, ["FullConnection"]),
                                                      ((19,), True, False, ["FullConnection"]),
                                                      ((1,), False, False, ["FullConnection"]),
                                                      ((5, 1), False, False, ["FullConnection", "Add"]),
                                                      ((19,), False, True, ["FullConnection", "Add", "Add"])])
def test_matmul_bias_add_folds_into_full_connection(bias, swap, second_use, ops):
    nodes = [N("MatMul", ["x", "w"], ["p"]), N("Add", ["b", "p"] if swap else ["p", "b"], ["a"]),
             N("Relu", ["a"], ["y"])]
    outputs = ["y"]
    if second_use:
        nodes.append(N("Add", ["p", "p"], ["z"]))
        outputs.append("z")
    m = model(nodes, [("x", [2, 5, 7])], outputs, [("w", f32(7, 19)), ("b", f32(*bias))])
    ms = msv0.load(convert(m.SerializeToString()))
    assert [n.op for n in ms.nodes] == ops
    check(m, {"x": f32(2, 5, 7)})


def _tanh_gelu(form):
    """The unrolled tanh-form GELU of x as exporters write it: x³ as a Pow or two Muls, the 0.5
    applied first, last or to (1 + t)."""
    cube = [N("Pow", ["x", "three"], ["x3"])] if form == "pow" else [N("Mul", ["x", "x"], ["x2"]),
                                                                     N("Mul", ["x2", "x"], ["x3"])]
    nodes = cube + [N("Mul", ["x3", "k"], ["kx3"]), N("Add", ["x", "kx3"], ["in"]), N("Mul", ["s", "in"], ["u"]),
                    N("Tanh", ["u"], ["t"]), N("Add", ["one", "t"], ["p"])]
    nodes += {"half_first": [N("Mul", ["x", "half"], ["h"]), N("Mul", ["h", "p"], ["y"])],
              "half_last": [N("Mul", ["x", "p"], ["q"]), N("Mul", ["q", "half"], ["y"])],
              "pow": [N("Mul", ["p", "half"], ["r"]), N("Mul", ["x", "r"], ["y"])]}[form]
    inits = [("k", np.float32(0.044715)), ("s", np.float32(np.sqrt(2 / np.pi))), ("one", np.float32(1)),
             ("half", np.float32(0.5)), ("three", np.float32(3))]
    return model(nodes, [("x", [3, 37])], ["y"], inits)


@pytest.mark.parametrize("form", ["half_first", "half_last", "pow"])
def test_unrolled_tanh_gelu_becomes_one_gelu(form):
    m = _tanh_gelu(form)
    ms = msv0.load(convert(m.SerializeToString()))
    assert [n.op for n in ms.nodes] == ["Mul", "Mul", "Add", "Mul", "Activation", "Mul"]  # the Gelu lowering
    x = (f32(3, 37) * 4).astype(np.float32)
    check(m, {"x": x}, atol=1e-5)


def _erf_gelu(form):
    """torch.onnx's nn.GELU before opset 20, 0.5·x·(1 + erf(x/√2)), behind a MatMul, x/√2 as a Div or a
    Mul and the 0.5 applied last, first or to (1 + erf)."""
    nodes = [N("MatMul", ["a", "w"], ["x"]), N("Div", ["x", "root2"], ["d"]) if form != "mul" else N("Mul", ["x", "inv"], ["d"]),
             N("Erf", ["d"], ["e"]), N("Add", ["e", "one"], ["p"])]
    nodes += {"half_last": [N("Mul", ["x", "p"], ["q"]), N("Mul", ["q", "half"], ["y"])],
              "mul": [N("Mul", ["x", "p"], ["q"]), N("Mul", ["half", "q"], ["y"])],
              "half_first": [N("Mul", ["half", "x"], ["h"]), N("Mul", ["h", "p"], ["y"])],
              "half_p": [N("Mul", ["p", "half"], ["r"]), N("Mul", ["x", "r"], ["y"])]}[form]
    inits = [("w", f32(24, 37)), ("root2", np.float32(np.sqrt(2))), ("inv", np.float32(1 / np.sqrt(2))),
             ("one", np.float32(1)), ("half", np.float32(0.5))]
    return model(nodes, [("a", [3, 24])], ["y"], inits, opset=13)


@pytest.mark.parametrize("form", ["half_last", "mul", "half_first", "half_p"])
def test_unrolled_erf_gelu_runs_as_one_step(form):
    m = _erf_gelu(form)
    ms = msv0.load(convert(m.SerializeToString()))
    assert [n.op for n in ms.nodes][:3] == ["FullConnection", "Abs", "Mul"] and "Erf" not in str(ms.nodes)
    session = msv0.Session(ms)
    assert [t.op for t in session.profile({"a": f32(3, 24)})[1]] == ["FullConnection+Gelu"]
    check(m, {"a": f32(3, 24) * 4})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_is_written_as_the_form_sessions_fuse(approximate):
    """The converter's Gelu lowering is msv0.gelu's form, which a Session runs as one step."""
    m = model([N("Gelu", ["x"], ["y"], approximate=approximate)], [("x", [3, 37])], ["y"], opset=20)
    session = msv0.Session(msv0.load(convert(m.SerializeToString())))
    assert [t.op for t in session.profile({"x": f32(3, 37)})[1]] == ["Gelu"]
    check(m, {"x": f32(3, 37) * 4})


def test_tanh_gelu_with_a_shared_intermediate_stays_unrolled():
    m = _tanh_gelu("half_last")
    m.graph.output.append(h.make_tensor_value_info("t", T.FLOAT, None))
    ms = msv0.load(convert(m.SerializeToString()))
    assert [n.op for n in ms.nodes] == ["Mul", "Mul", "Mul", "Add", "Mul", "Activation", "Add", "Mul", "Mul"]


def _unrolled_hard_swish(opset=17, swap=False):
    """Paddle's hard-swish export behind a Conv: x · Clip(x + 3, 0, 6) / 6."""
    clip = (N("Clip", ["a"], ["r"], min=0.0, max=6.0) if opset < 11 else N("Clip", ["a", "zero", "six"], ["r"]))
    nodes = [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("Add", ["three", "c"] if swap else ["c", "three"], ["a"]),
             clip, N("Mul", ["r", "c"] if swap else ["c", "r"], ["m"]), N("Div", ["m", "six"], ["y"])]
    inits = [("w", f32(5, 3, 3, 3)), ("three", np.float32(3)), ("zero", np.float32(0)), ("six", np.float32(6))]
    return model(nodes, [("x", [1, 3, 9, 11])], ["y"], inits, opset=opset)


@pytest.mark.parametrize("opset,swap", [(17, False), (17, True), (10, False)])
def test_unrolled_hard_swish_becomes_hswish(opset, swap):
    m = _unrolled_hard_swish(opset, swap)
    ms = msv0.load(convert(m.SerializeToString()))
    assert [n.op for n in ms.nodes] == ["Conv2D", "Activation"]
    assert ms.nodes[1].attrs["type"] == ActivationType.HSWISH
    x = f32(1, 3, 9, 11) * 3
    check(m, {"x": x})
    # HSWISH computes x · relu6(x + 3) / 6 in float32, the unrolled form's own steps: bit-equal.
    conv = model([N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1])], [("x", [1, 3, 9, 11])], ["c"], [("w", nh.to_array(m.graph.initializer[0]))])
    c = run_msv0(conv.SerializeToString(), {"x": x})["c"]
    np.testing.assert_array_equal(run_msv0(m.SerializeToString(), {"x": x})["y"], c * np.clip(c + np.float32(3), 0, 6) / np.float32(6))


def test_hard_swish_pattern_with_outside_use_or_other_constant_stays_unrolled():
    m = _unrolled_hard_swish()
    m.graph.output.append(h.make_tensor_value_info("r", T.FLOAT, None))
    assert "Activation" not in [n.op for n in msv0.load(convert(m.SerializeToString())).nodes]
    check(m, {"x": f32(1, 3, 9, 11) * 3})
    m = _unrolled_hard_swish()
    m.graph.initializer[1].CopyFrom(nh.from_array(np.float32(2.5), "three"))
    assert "Activation" not in [n.op for n in msv0.load(convert(m.SerializeToString())).nodes]
    check(m, {"x": f32(1, 3, 9, 11) * 3})


def _dynamic_hw_model():
    m = model([N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), N("Relu", ["c"], ["y"])], [("x", [1, 3, 9, 11])], ["y"],
              [("w", f32(5, 3, 3, 3))])
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[2].Clear()
    dims[2].dim_param = "height"
    dims[3].Clear()
    dims[3].dim_value = -1  # how Paddle's exporter marks a dynamic dim
    return m


def test_input_shapes_pin_dynamic_dims(tmp_path, capsys):
    m = _dynamic_hw_model()
    with pytest.raises(msv0.ModelError, match=r"dim 2 is dynamic \('height'\).*input_shapes=\{'x'"):
        convert(m.SerializeToString())
    x = f32(1, 3, 9, 11)
    check(m, {"x": x}, input_shapes={"x": (1, 3, 9, 11)})
    ms = msv0.load(convert(m.SerializeToString(), input_shapes={"x": [1, 3, 4, 6]}))
    assert ms.inputs[0].shape == (1, 4, 6, 3)
    for shapes, match in (({"x": (1, 3, 9)}, r"is \[1, 3, '\?', '\?'\] in the model, not \[1, 3, 9\]"),
                          ({"x": (1, 4, 9, 11)}, "not"), ({"x": (1, 3, 0, 11)}, "below 1"),
                          ({"y": (1, 3, 9, 11)}, r"\['y'\], which are not inputs of the model \(its inputs: \['x'\]\)")):
        with pytest.raises(msv0.ModelError, match=match):
            convert(m.SerializeToString(), input_shapes=shapes)
    src, dst = tmp_path / "m.onnx", tmp_path / "m.ms"
    src.write_bytes(m.SerializeToString())
    from msv0 import cli
    assert cli.main(["convert", str(src), "-o", str(dst), "--shape", "x=1,3,5,7"]) == 0
    assert msv0.load(dst.read_bytes()).inputs[0].shape == (1, 5, 7, 3)
    assert cli.main(["convert", str(src), "-o", str(dst), "--shape", "x=1,3,a"]) != 0
    assert "--shape x=1,3,a: expected NAME=V0,V1,... with int values" in capsys.readouterr().err


def test_a_wrong_declared_output_shape_gives_way_to_the_inferred_one():
    """ddddocr's OCR model declares [1, seqlen] for a [20, 1, 8210] output; ONNX Runtime takes the
    inferred shape (a warning), so does the converter. A declared static shape serves where
    inference finds none."""
    m = model([N("Reshape", ["x", "s"], ["y"])], [("x", [2, 12])], ["y"], [("s", np.array([4, 3, 2], np.int64))])
    out = m.graph.output[0].type.tensor_type
    out.shape.dim.add().dim_value = 1
    out.shape.dim.add().dim_param = "n"
    check(m, {"x": f32(2, 12)})


def test_input_values_make_inputs_constants_that_fold(tmp_path, capsys):
    """silero-vad's default model takes its sample rate as an input and picks an If branch with it:
    frozen by input_values, the If folds to the taken branch (the other one reshapes the input)."""
    then = h.make_graph([N("Mul", ["x", "two"], ["a"])], "then", [], [h.make_tensor_value_info("a", T.FLOAT, None)])
    other = h.make_graph([N("Reshape", ["x", "s"], ["b"])], "else", [], [h.make_tensor_value_info("b", T.FLOAT, None)])
    m = model([N("Equal", ["sr", "rate"], ["is16k"]), N("If", ["is16k"], ["y"], then_branch=then, else_branch=other)],
              [("x", [1, 4])], ["y"], [("two", np.float32(2)), ("rate", np.int64(16000)), ("s", np.array([2, 2], np.int64))])
    m.graph.input.append(h.make_tensor_value_info("sr", T.INT64, []))
    x = f32(1, 4)
    ms = msv0.load(convert(m.SerializeToString(), input_values={"sr": 16000}))
    assert [n.op for n in ms.nodes] == ["Mul"] and [i.name for i in ms.inputs] == ["x"]
    np.testing.assert_array_equal(run_msv0(m.SerializeToString(), {"x": x}, input_values={"sr": 16000})["y"], x * 2)
    for values, match in (({"sr": [1, 2]}, r"'sr' is \[\] in the model, the value given \[2\]"),
                          ({"rate": 1}, r"\['rate'\], which are not inputs"), ({"sr": "fast"}, "'sr': invalid literal"),
                          ({"sr": 0.5}, "'sr' is int64, which cannot hold 0.5")):
        with pytest.raises(msv0.ModelError, match=match):
            convert(m.SerializeToString(), input_values=values)
    src, dst = tmp_path / "m.onnx", tmp_path / "m.ms"
    src.write_bytes(m.SerializeToString())
    from msv0 import cli
    assert cli.main(["convert", str(src), "-o", str(dst), "--value", "sr=8000"]) == 0
    assert [n.op for n in msv0.load(dst.read_bytes()).nodes] == ["Reshape"]
    assert cli.main(["convert", str(src), "-o", str(dst), "--value", "sr"]) != 0
    assert "--value sr: expected NAME=V0,V1,... with float values" in capsys.readouterr().err
