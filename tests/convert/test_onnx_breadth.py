"""What real ONNX exports contain beyond the node tests: shape arithmetic, constant Ifs, lowered
ops, fp16 weights, external data. Each converted model runs in msv0 and is compared with onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h, numpy_helper as nh  # noqa: E402

from msv0.convert import convert  # noqa: E402
from msv0.errors import UnsupportedOpError  # noqa: E402
from onnxcheck import IR_VERSION, check, run_msv0, run_ort  # noqa: E402

R = np.random.default_rng(12)
N = h.make_node


def f32(*shape):
    return R.standard_normal(shape).astype(np.float32)


def const(name, value):
    return N("Constant", [], [name], value=nh.from_array(np.asarray(value)))


def model(nodes, inputs, inits=(), elem=T.FLOAT, out_elem=T.FLOAT):
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, elem, s) for n, s in inputs],
                     [h.make_tensor_value_info("y", out_elem, None)],
                     [nh.from_array(v, k) for k, v in inits])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION)


def test_shape_arithmetic_folds():
    """torch's x.view(x.size(0) * 2 // 2, 12, 4) then a Shape of the result: the second Shape is
    only known once the first chain folded (onnx's inference does not propagate Div)."""
    nodes = [N("MatMul", ["x", "w"], ["m"]), N("Shape", ["m"], ["s"]), const("i0", np.int64(0)),
             N("Gather", ["s", "i0"], ["b0"], axis=0), const("two", np.int64(2)), N("Mul", ["b0", "two"], ["b1"]),
             N("Div", ["b1", "two"], ["b"]), const("ax", [0]), N("Unsqueeze", ["b", "ax"], ["bu"]),
             const("rest", [12, 4]), N("Concat", ["bu", "rest"], ["shp"], axis=0), N("Reshape", ["m", "shp"], ["r"]),
             N("Shape", ["r"], ["s2"]), const("i1", np.int64(-1)), N("Gather", ["s2", "i1"], ["n"], axis=0),
             N("Cast", ["n"], ["nf"], to=T.FLOAT), N("Sqrt", ["nf"], ["sq"]), N("Div", ["r", "sq"], ["y0"]),
             N("ConstantOfShape", ["s2"], ["z"], value=nh.from_array(np.array([0.5], np.float32))),
             N("Add", ["y0", "z"], ["y1"]), const("st", [0]), const("en", [2]), N("Slice", ["s2", "st", "en"], ["s01"]),
             const("m1", [-1]), N("Concat", ["s01", "m1"], ["s3"], axis=0), const("step", np.int64(1)),
             N("Range", ["i0", "n", "step"], ["rg"]), N("Cast", ["rg"], ["rgf"], to=T.FLOAT),
             N("Reshape", ["y1", "s3"], ["y3"]), N("Expand", ["rgf", "s2"], ["e"]),
             N("Add", ["y3", "e"], ["y"])]
    m = model(nodes, [("x", ["N", 6, 8])], inits=[("w", f32(8, 8))])
    check(m, {"x": f32(2, 6, 8)}, batch=2)


def _if(cond_nodes, then_nodes, else_nodes, extra_init=()):
    then_g = h.make_graph(then_nodes, "then", [], [h.make_tensor_value_info("t_out", T.FLOAT, None)],
                          [nh.from_array(v, k) for k, v in extra_init])
    else_g = h.make_graph(else_nodes, "else", [], [h.make_tensor_value_info("e_out", T.FLOAT, None)])
    return cond_nodes + [N("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]


@pytest.mark.parametrize("batch", [1, 3])
def test_if_with_constant_condition(batch):
    """An exporter's `if x.size(0) == 1` around shape logic: the taken branch (reading the outer x,
    with its own initializer and a nested If) becomes the graph."""
    inner = h.make_graph([N("Mul", ["x", "k"], ["i_out"])], "inner", [], [h.make_tensor_value_info("i_out", T.FLOAT, None)])
    inner_else = h.make_graph([N("Neg", ["x"], ["n_out"])], "inner_else", [], [h.make_tensor_value_info("n_out", T.FLOAT, None)])
    nodes = _if([N("Shape", ["x"], ["s"]), const("i0", np.int64(0)), N("Gather", ["s", "i0"], ["b"], axis=0),
                 const("one", np.int64(1)), N("Equal", ["b", "one"], ["cond"])],
                [N("Relu", ["x"], ["t_out"])],
                [const("c2", True), N("If", ["c2"], ["r"], then_branch=inner, else_branch=inner_else),
                 N("Add", ["r", "x"], ["e_out"])], )
    g = model(nodes, [("x", ["N", 3, 5])], inits=[("k", f32(5))])
    check(g, {"x": f32(batch, 3, 5)}, batch=batch)


def test_if_listed_before_what_its_branch_reads():
    """onnxruntime's quantizer can write an If before the node that makes a value its branch reads:
    once the If is inlined, what follows must still get its shapes (here a Reshape's target)."""
    nodes = _if([const("cond", True)], [N("Identity", ["t"], ["t_out"])], [N("Neg", ["t"], ["e_out"])])
    nodes += [N("Relu", ["x"], ["t"]), N("Shape", ["y"], ["s"]), const("i0", np.array([0], np.int64)),
              N("Gather", ["s", "i0"], ["b"], axis=0), const("m1", np.array([-1], np.int64)),
              N("Concat", ["b", "m1"], ["shp"], axis=0), N("Reshape", ["y", "shp"], ["z"])]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 5])],
                     [h.make_tensor_value_info("z", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION)
    check(m, {"x": f32(2, 3, 5)})


def _runtime_if(then_extra=()):
    """y = If(sum(x) > 0) then [t1 = x * k; If(max(t1) > 0.5) sigmoid(t1) else -t1] + b else relu(x)
    on a 4-D x (stored NHWC inside), k read from the outer scope, b the then-branch's own."""
    out = lambda name: h.make_tensor_value_info(name, T.FLOAT, None)  # noqa: E731
    inner = h.make_graph([N("Sigmoid", ["t1"], ["s_out"])], "inner", [], [out("s_out")])
    inner_else = h.make_graph([N("Neg", ["t1"], ["n_out"])], "inner_else", [], [out("n_out")])
    then_g = h.make_graph([N("Mul", ["x", "k"], ["t1"]), N("ReduceMax", ["t1"], ["mx"], keepdims=0),
                           const("half", np.float32(0.5)), N("Greater", ["mx", "half"], ["c2"]),
                           N("If", ["c2"], ["r"], then_branch=inner, else_branch=inner_else),
                           N("Add", ["r", "b"], ["t_out"]), *then_extra], "then", [], [out("t_out")],
                          [nh.from_array(f32(4), "b")])
    else_g = h.make_graph([N("Relu", ["x"], ["e_out"])], "else", [], [out("e_out")])
    nodes = [N("ReduceSum", ["x"], ["sum"], keepdims=0), const("z", np.float32(0)), N("Greater", ["sum", "z"], ["cond"]),
             N("If", ["cond"], ["y"], then_branch=then_g, else_branch=else_g)]
    return model(nodes, [("x", [1, 2, 3, 4])], inits=[("k", np.abs(f32(4)))])


@pytest.mark.parametrize("scale", [1.0, 0.01, -1.0], ids=["then-then", "then-else", "else"])
def test_if_with_runtime_condition(scale):
    """Both branches become v0 subgraphs run through Switch/Partial/Merge, nested Ifs too."""
    check(_runtime_if(), {"x": (np.abs(f32(1, 2, 3, 4)) * scale).astype(np.float32)})


def test_if_branch_problems_are_reported_with_node_names():
    m = _runtime_if([N("Bernoulli", ["t1"], ["unused"], name="branch_bernoulli")])
    with pytest.raises(UnsupportedOpError) as err:
        convert(m.SerializeToString())
    assert [n[:2] for n in err.value.nodes] == [("branch_bernoulli", "Bernoulli"), ("If_3", "If")]
    assert "input_values for x would fold it" in str(err.value)  # the inputs its condition reads


@pytest.mark.parametrize("sr", [16000, 2 ** 40])
def test_int_times_zero_folds(sr):
    """silero-vad's `state + float(sr * 0)`: the int64 product is zero for any sr, so no int64
    Cast (which v0 lacks) is left, whatever value sr has at run time."""
    g = h.make_graph([const("zero", np.int64(0)), N("Mul", ["sr", "zero"], ["m"]), N("Cast", ["m"], ["f"], to=T.FLOAT),
                      N("Add", ["x", "f"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [2, 3]), h.make_tensor_value_info("sr", T.INT64, [])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    check(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION), {"x": f32(2, 3), "sr": np.array(sr, np.int64)})


def test_is_nan():
    x = f32(2, 3, 4, 5)
    x[0, 1, 2, :3] = np.nan
    x[1, 0, 0, 0] = np.inf
    check(model([N("IsNaN", ["x"], ["y"])], [("x", [2, 3, 4, 5])], out_elem=T.BOOL), {"x": x})


@pytest.mark.parametrize("runtime_indices", [False, True])
def test_gather_nd(runtime_indices):
    ind = np.array([[[0, -1], [2, 1]], [[-3, 0], [1, 2]]], np.int64)
    if runtime_indices:
        g = h.make_graph([N("GatherND", ["x", "i"], ["y"])], "g",
                         [h.make_tensor_value_info("x", T.FLOAT, [3, 4, 5]), h.make_tensor_value_info("i", T.INT64, [2, 2, 2])],
                         [h.make_tensor_value_info("y", T.FLOAT, None)])
        m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION)
        check(m, {"x": f32(3, 4, 5), "i": ind})
    else:
        check(model([N("GatherND", ["x", "i"], ["y"])], [("x", [3, 4, 5])], inits=[("i", ind)]), {"x": f32(3, 4, 5)})


@pytest.mark.parametrize("eq,sa,sb", [("bij,bjk->bik", (2, 3, 5), (2, 5, 4)),
                                      ("bhid,bhjd->bhij", (1, 2, 3, 8), (1, 2, 7, 8)),
                                      ("ij,kj", (3, 5), (4, 5)),
                                      ("...ij,...jk->...ki", (2, 3, 5), (2, 5, 4)),
                                      ("nchw,oc->nohw", (1, 3, 4, 5), (6, 3))])
def test_einsum_matmul(eq, sa, sb):
    g = h.make_graph([N("Einsum", ["a", "b"], ["y"], equation=eq)], "g",
                     [h.make_tensor_value_info("a", T.FLOAT, sa), h.make_tensor_value_info("b", T.FLOAT, sb)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    check(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION), {"a": f32(*sa), "b": f32(*sb)})


def test_einsum_trace_is_reported():
    g = model([N("Einsum", ["x", "x"], ["y"], equation="ii,ij->j")], [("x", [3, 3])])
    with pytest.raises(UnsupportedOpError, match="not a MatMul"):
        convert(g.SerializeToString())


def test_fp16_model_runs_in_fp32():
    """onnxconverter-common's keep_io_types export: Cast to fp16 after the input, fp16 weights and a
    fp16 Constant, Cast back at the end. msv0 computes it in fp32, so the reference is the fp32 model
    with the same (fp16-rounded) weights."""
    w, b = f32(8, 3, 3, 3).astype(np.float16), f32(8).astype(np.float16)
    half = [N("Cast", ["x"], ["xh"], to=T.FLOAT16), N("Conv", ["xh", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
            N("Constant", [], ["k"], value=nh.from_array(np.array(0.5, np.float16))), N("Mul", ["c", "k"], ["m"]),
            N("Relu", ["m"], ["r"]), N("Cast", ["r"], ["y"], to=T.FLOAT)]
    m16 = model(half, [("x", [1, 3, 7, 6])], inits=[("w", w), ("b", b)])
    full = [N("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), N("Mul", ["c", "k"], ["m"]), N("Relu", ["m"], ["y"])]
    m32 = model(full, [("x", [1, 3, 7, 6])], inits=[("w", w.astype(np.float32)), ("b", b.astype(np.float32)),
                                                    ("k", np.array(0.5, np.float32))])
    x = f32(1, 3, 7, 6)
    want = run_ort(m32.SerializeToString(), {"x": x})["y"]
    got = run_msv0(m16.SerializeToString(), {"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_fp16_io():
    """fp16 inputs and outputs keep their dtype; the fp16-weighted graph between them runs in fp32."""
    k = f32(5).astype(np.float16)
    m = model([N("Mul", ["x", "k"], ["m"]), N("Sigmoid", ["m"], ["y"])], [("x", [2, 5])], inits=[("k", k)],
              elem=T.FLOAT16, out_elem=T.FLOAT16)
    x = f32(2, 5).astype(np.float16)
    got = run_msv0(m.SerializeToString(), {"x": x})["y"]
    assert got.dtype == np.float16
    want = 1 / (1 + np.exp(-(x.astype(np.float32) * k.astype(np.float32))))
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-3)


def test_external_data(tmp_path):
    """A model saved with its weights in a .data file next to it loads from its path."""
    m = model([N("MatMul", ["x", "w"], ["y"])], [("x", [2, 64])], inits=[("w", f32(64, 32))])
    want = run_ort(m.SerializeToString(), {"x": (x := f32(2, 64))})["y"]
    path = tmp_path / "m.onnx"
    onnx.save_model(m, str(path), save_as_external_data=True, all_tensors_to_one_file=True, location="m.data",
                    size_threshold=0)
    assert (tmp_path / "m.data").stat().st_size == 64 * 32 * 4
    import msv0
    got = msv0.Session(msv0.load(convert(str(path)))).run({"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(msv0.ModelError, match=r"weights \(w\) are in an external data file: convert it by its path"):
        convert(path.read_bytes())  # its bytes alone hold no weights


def _chain(n, bad=()):
    """x -> n Relu/Neg nodes -> y, with the nodes numbered in `bad` made Bernoulli (no v0 equivalent)."""
    names = [f"t{k}" for k in range(n)] + ["y"]
    nodes = [N("Bernoulli" if k in bad else "Relu", ["x" if k == 0 else names[k - 1]], [names[k]], name=f"n{k}")
             for k in range(n)] + [N("Neg", [names[n - 1]], ["y"])]
    return model(nodes, [("x", [2, 3])])


def test_cli_piped_output(tmp_path, capsys):
    """Piped or logged (stderr not a terminal): no progress bar, one line per unsupported node and
    the summary; no file written."""
    from msv0.cli import main
    src, dst = tmp_path / "m.onnx", tmp_path / "m.ms"
    onnx.save(_chain(250, bad=(3, 200)), str(src))
    assert main(["convert", str(src), "-o", str(dst)]) != 0 and not dst.exists()
    err = capsys.readouterr().err
    assert "\r" not in err and "converting" not in err
    lines = err.splitlines()
    assert [ln.split(":")[0] for ln in lines[:2]] == ["n3", "n200"] and len(lines) == 3
    assert lines[2].startswith("msv0: error: 2 ONNX node(s) cannot be converted")
    onnx.save(_chain(250), str(src))
    assert main(["convert", str(src), "-o", str(dst)]) == 0
    out = capsys.readouterr()
    assert out.err == "" and out.out.startswith("wrote ")


ONE_D = {
    "conv_pad_stride_relu": ([N("Conv", ["x", "w", "b"], ["c"], pads=[2, 1], strides=[2], dilations=[2]),
                              N("Relu", ["c"], ["y"])], [("w", f32(6, 5, 3)), ("b", f32(6))]),
    "conv_same_depthwise": ([N("Conv", ["x", "w"], ["y"], group=5, auto_pad="SAME_UPPER", strides=[3])],
                            [("w", f32(5, 1, 4))]),
    "conv_transpose": ([N("ConvTranspose", ["x", "w", "b"], ["y"], strides=[2], pads=[1, 1], output_padding=[1])],
                       [("w", f32(5, 3, 3)), ("b", f32(3))]),
    "pools": ([N("MaxPool", ["x"], ["a"], kernel_shape=[3], strides=[2], pads=[1, 1]),
               N("AveragePool", ["a"], ["p"], kernel_shape=[2], ceil_mode=1, strides=[2]),
               N("GlobalMaxPool", ["p"], ["g"]), N("GlobalAveragePool", ["a"], ["h"]),
               N("Add", ["g", "h"], ["y"])], []),
}


@pytest.mark.parametrize("case", ONE_D)
def test_1d(case):
    nodes, inits = ONE_D[case]
    check(model(nodes, [("x", [2, 5, 13])], inits=inits), {"x": f32(2, 5, 13)})


def _unrolled_layer_norm(square="Pow", affine=("Mul", "Add"), axes=(-1,), gamma_shape=(8,), opset=13):
    ax = const("ax", np.array(axes, np.int64))
    mean = (N("ReduceMean", ["x"], ["m"], axes=list(axes)) if opset < 18 else N("ReduceMean", ["x", "ax"], ["m"]))
    var = (N("ReduceMean", ["sq"], ["v"], axes=list(axes)) if opset < 18 else N("ReduceMean", ["sq", "ax"], ["v"]))
    sq = N("Pow", ["d", "two"], ["sq"]) if square == "Pow" else N("Mul", ["d", "d"], ["sq"])
    nodes = [ax, mean, N("Sub", ["x", "m"], ["d"]), sq, var, N("Add", ["v", "eps"], ["ve"]), N("Sqrt", ["ve"], ["s"]),
             N("Div", ["d", "s"], ["n"])]
    last = "n"
    for op in affine:
        nodes.append(N(op, [last, "g" if op == "Mul" else "b"], [last + op]))
        last += op
    nodes.append(N("Relu", [last], ["y"]))
    inits = [("two", np.float32(2)), ("eps", np.float32(1e-5)), ("g", f32(*gamma_shape)), ("b", f32(*gamma_shape))]
    g = model(nodes, [("x", [2, 5, 8])], inits=inits)
    g.opset_import[0].version = opset
    return g


@pytest.mark.parametrize("kw", [{}, {"square": "Mul", "affine": ("Add",), "opset": 18}, {"affine": ()},
                                {"axes": (1, 2), "gamma_shape": (5, 8)}, {"gamma_shape": (1, 1, 8)}])
def test_unrolled_layer_norm_is_one_op(kw):
    from msv0 import load
    m = _unrolled_layer_norm(**kw)
    check(m, {"x": f32(2, 5, 8) * 3 + 1})
    assert [n.op for n in load(convert(m.SerializeToString())).nodes] == ["LayerNorm", "Activation"]


def test_layer_norm_pattern_with_outside_use_is_left_unrolled():
    m = _unrolled_layer_norm()
    m.graph.node.append(N("Identity", ["d"], ["d_out"]))
    m.graph.output.append(h.make_tensor_value_info("d_out", T.FLOAT, None))
    check(m, {"x": f32(2, 5, 8)})
    assert "LayerNorm" not in [n.op for n in msv0_nodes(m)]


def msv0_nodes(m, **kw):
    from msv0 import load
    return load(convert(m.SerializeToString(), **kw)).nodes


def test_transformer_block_export():
    """What torch.onnx writes for one attention block at opset 13: head split and merge through
    Shape/Gather/Unsqueeze/Concat, the 1/sqrt(d) scale from Shape->Cast->Sqrt, an unrolled
    LayerNorm, an Erf GELU and an Einsum. Every shape is static once B=2, S=6, D=8 are."""
    d, heads = 8, 2
    i = {k: const(f"i{k}", np.int64(k)) for k in range(3)}
    ax0 = const("ax0", [0])
    nodes = [*i.values(), ax0, const("nh", [heads]), const("m1", [-1]), const("sqrt2", np.float32(np.sqrt(2))),
             N("Shape", ["x"], ["xs"]), N("Gather", ["xs", "i0"], ["b"]), N("Gather", ["xs", "i1"], ["s"]),
             N("Unsqueeze", ["b", "ax0"], ["bu"]), N("Unsqueeze", ["s", "ax0"], ["su"])]
    for t in "qkv":
        nodes += [N("MatMul", ["x", f"w{t}"], [f"{t}0"]),
                  N("Concat", ["bu", "su", "nh", "m1"], [f"{t}shape"], axis=0),
                  N("Reshape", [f"{t}0", f"{t}shape"], [f"{t}1"]),
                  N("Transpose", [f"{t}1"], [f"{t}h"], perm=[0, 2, 1, 3])]
    nodes += [N("Shape", ["qh"], ["qhs"]), const("im1", np.int64(-1)), N("Gather", ["qhs", "im1"], ["dh"]),
              N("Cast", ["dh"], ["dhf"], to=T.FLOAT), N("Sqrt", ["dhf"], ["sc"]),
              N("Einsum", ["qh", "kh"], ["att"], equation="bhid,bhjd->bhij"), N("Div", ["att", "sc"], ["att2"]),
              N("Softmax", ["att2"], ["p"], axis=-1), N("MatMul", ["p", "vh"], ["o"]),
              N("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), const("dd", [d]),
              N("Concat", ["bu", "su", "dd"], ["oshape"], axis=0), N("Reshape", ["ot", "oshape"], ["o2"]),
              N("Add", ["o2", "x"], ["r"]),
              N("ReduceMean", ["r"], ["mu"], axes=[-1]), N("Sub", ["r", "mu"], ["dv"]), N("Pow", ["dv", "two"], ["sq"]),
              N("ReduceMean", ["sq"], ["var"], axes=[-1]), N("Add", ["var", "eps"], ["ve"]), N("Sqrt", ["ve"], ["sd"]),
              N("Div", ["dv", "sd"], ["nrm"]), N("Mul", ["nrm", "g"], ["ng"]), N("Add", ["ng", "be"], ["ln"]),
              N("Div", ["ln", "sqrt2"], ["u"]), N("Erf", ["u"], ["eu"]), N("Add", ["eu", "one"], ["e1"]),
              N("Mul", ["ln", "e1"], ["g1"]), N("Mul", ["g1", "half"], ["y"])]
    inits = [("wq", f32(d, d)), ("wk", f32(d, d)), ("wv", f32(d, d)), ("two", np.float32(2)), ("eps", np.float32(1e-5)),
             ("g", f32(d)), ("be", f32(d)), ("one", np.float32(1)), ("half", np.float32(0.5))]
    m = model(nodes, [("x", ["B", 6, d])], inits=inits)
    m.opset_import[0].version = 13
    check(m, {"x": f32(2, 6, d)}, batch=2)
    ops = [n.op for n in msv0_nodes(m, batch=2)]
    assert "LayerNorm" in ops and "Shape" not in ops


@pytest.mark.parametrize("mode", ["edge", "wrap"])
def test_pad_edge_and_wrap(mode):
    """torch's ReplicationPad / circular pad: a 4-D map behind a Conv (stored NHWC) padded on
    every axis, wrap by more than the axis holds; and a 3-D tensor padded on one side only."""
    nodes = [N("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             const("p4", [0, 1, 2, 3, 1, 0, 5, 1]), N("Pad", ["c", "p4"], ["p"], mode=mode),
             N("ReduceMean", ["p"], ["r"], axes=[1], keepdims=0),
             const("p3", [0, 0, 2, 0, 0, 0]), N("Pad", ["r", "p3"], ["y"], mode=mode)]
    check(model(nodes, [("x", [2, 3, 4, 5])], inits=[("w", f32(6, 3, 3, 3))]), {"x": f32(2, 3, 4, 5)})


@pytest.mark.parametrize("a_shape,b_shape,const_b", [
    ((5,), (2, 5, 3), False),        # a 1-D row against a batch of runtime matrices
    ((2, 4, 5), (5,), False),        # a 1-D runtime column
    ((7,), (7, 3), True),            # a 1-D row through a constant weight
    ((3, 1, 4, 5), (2, 5, 6), False),  # batch dims broadcast both ways
    ((2, 4, 5), (3, 1, 5, 6), True)])  # against a constant batch
def test_matmul_numpy_semantics(a_shape, b_shape, const_b):
    """ONNX MatMul is NumPy's: 1-D operands promoted and their dim dropped, batch dims broadcast."""
    b = f32(*b_shape)
    inputs = [("a", list(a_shape))] + ([] if const_b else [("b", list(b_shape))])
    m = model([N("MatMul", ["a", "b"], ["y"])], inputs, inits=[("b", b)] if const_b else ())
    check(m, {"a": f32(*a_shape)} | ({} if const_b else {"b": b}))


@pytest.mark.parametrize("x_shape,p_shape", [((2, 3, 4), (4,)), ((1, 4), (3, 1)), ((2, 3, 4), (2, 1, 4))])
def test_pow_broadcasts_its_exponent(x_shape, p_shape):
    """Pow's x and exponent broadcast both ways (r1.1's Power takes an exponent of x's shape)."""
    m = model([N("Pow", ["x", "p"], ["y"])], [("x", list(x_shape)), ("p", list(p_shape))])
    check(m, {"x": np.abs(f32(*x_shape)) + 0.5, "p": f32(*p_shape)})


@pytest.mark.parametrize("ceil", [0, 1])
def test_average_pool_counting_its_pads(ceil):
    """torch's AvgPool2d default (count_include_pad): the pads count as zeros, 3x3/1 pad 1 as in
    Inception, and 3x3/2 pads (0, 1) where ceil mode adds a window past them."""
    nodes = [N("AveragePool", ["x"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
             N("AveragePool", ["a"], ["y"], kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 0],
               count_include_pad=1, ceil_mode=ceil)]
    check(model(nodes, [("x", [1, 3, 10, 9])]), {"x": f32(1, 3, 10, 9)})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_ceil_mode_window_in_the_end_padding_where_onnx_and_ort_disagree(op):
    """ONNX Runtime (and torch) drop a ceil-mode window that would start in the end padding; onnx's
    shape inference here keeps it, and every later shape with it: refused, naming both sizes.
    5 + 1 + 1 padded, 3x3/3: windows at 0, 3 and 6, the last in the padding. (Where the model's
    shapes agree with ONNX Runtime, r1.1 pools with less end padding: the node test
    test_averagepool_2d_ceil_last_window_starts_on_pad.)"""
    node = N(op, ["x"], ["y"], kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1], ceil_mode=1)
    with pytest.raises(UnsupportedOpError, match="output size 3 where ONNX Runtime pools to 2"):
        convert(model([node], [("x", [1, 2, 6, 5])]).SerializeToString())


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_extreme_select_last_index(op):
    """select_last_index picks the last of tied extremes (r1.1's kernel the first): on a map behind
    a Conv (stored NHWC), along channels kept and along width dropped, with ties on both."""
    w = np.zeros((4, 1, 1, 1), np.float32)
    w[[0, 2, 3]] = 1.0  # channels 0, 2, 3 equal
    nodes = [N("Conv", ["x", "w"], ["c"]), N(op, ["c"], ["a"], axis=1, select_last_index=1),
             N("Round", ["x"], ["r"]), N(op, ["r"], ["b"], axis=3, keepdims=0, select_last_index=1),
             const("ax", [3]), N("Unsqueeze", ["b", "ax"], ["bu"]), N("Mul", ["bu", "ten"], ["bt"]),
             N("Add", ["a", "bt"], ["y"])]
    check(model(nodes, [("x", [2, 1, 3, 5])], inits=[("w", w), ("ten", np.int64(10))], out_elem=T.INT64),
          {"x": (f32(2, 1, 3, 5) * 2).round()})


@pytest.mark.parametrize("case", ["pad_edge", "argmax_last"])
def test_absurd_sizes_for_index_tables_are_reported(case):
    """A lowering that writes a constant table of positions refuses a file's absurd size (2^40) by
    node, rather than allocating it."""
    if case == "pad_edge":
        node, shape = N("Pad", ["x", "p"], ["y"], mode="edge"), [1, 4]
        m = model([const("p", [0, 1 << 40, 0, 0]), node], [("x", shape)])
    else:
        m = model([N("ArgMax", ["x"], ["y"], axis=1, select_last_index=1)], [("x", [1, 1 << 40])], out_elem=T.INT64)
    with pytest.raises(UnsupportedOpError, match=r"a table of \d+ positions \(over 16777216\)"):
        convert(m.SerializeToString())


@pytest.mark.parametrize("src,dst", [(T.BOOL, T.INT32), (T.BOOL, T.INT64), (T.UINT8, T.INT32), (T.FLOAT16, T.INT32),
                                     (T.FLOAT, T.BOOL), (T.INT32, T.BOOL), (T.INT64, T.BOOL)])
def test_cast_pairs_v0_lacks_go_through_float32(src, dst):
    """tf2onnx's Keras masks (Less -> Cast to int32): bool, uint8 and float16 go through float32,
    which holds their values exactly; a cast to bool is x != 0."""
    np_src = {T.BOOL: np.bool_, T.UINT8: np.uint8, T.FLOAT16: np.float16, T.FLOAT: np.float32, T.INT32: np.int32,
              T.INT64: np.int64}[src]
    x = np.array([[0, 1, 2, 3, 255, -7, 0.5, -0.0, 65504]], np.float32).astype(np_src) if src != T.BOOL else \
        np.array([[True, False, True]])
    m = model([N("Cast", ["x"], ["y"], to=dst)], [("x", list(x.shape))], elem=src, out_elem=dst)
    want, got = run_ort(m.SerializeToString(), {"x": x}), run_msv0(m.SerializeToString(), {"x": x})
    assert got["y"].dtype == want["y"].dtype
    np.testing.assert_array_equal(got["y"], want["y"])


@pytest.mark.parametrize("dst", [T.FLOAT, T.INT32])
def test_cast_of_run_time_int64_is_a_table_lookup(dst):
    """r1.1's Cast reads no int64 (ALBERT's int64 attention mask cast to float): a Gather from a table
    of 0 .. 65535, exact there, and a run-time error on any other value, not a wrong one."""
    import msv0
    m = model([N("Unsqueeze", ["x", "ax"], ["u"]), N("Cast", ["u"], ["y"], to=dst)], [("x", [2, 5])],
              inits=[("ax", np.array([1], np.int64))], elem=T.INT64, out_elem=dst)
    x = np.array([[1, 1, 1, 0, 0], [0, 7, 65535, 12345, 1]], np.int64)
    want, got = run_ort(m.SerializeToString(), {"x": x}), run_msv0(m.SerializeToString(), {"x": x})
    assert got["y"].dtype == want["y"].dtype and got["y"].shape == (2, 1, 5)
    np.testing.assert_array_equal(got["y"], want["y"])
    session = msv0.Session(convert(m.SerializeToString()))
    for bad in (65536, -1):
        with pytest.raises(msv0.Error, match="Gather|out of range|index"):
            session.run({"x": np.full((2, 5), bad, np.int64)})


def test_value_info_with_symbolic_dims_does_not_hide_inferred_shapes():
    """onnx-asr's resamplers declare value_info [1, ''] for a Range's unsqueezed output, whose length
    the input's shape decides: onnx's inference kept the empty dim, and the Less after it had no
    static shape. The declared value_info is dropped and inferred again."""
    def c(name, v):
        return nh.from_array(np.array(v, np.int64), name)
    nodes = [N("Shape", ["x"], ["s"], start=1, end=2), N("Squeeze", ["s"], ["n"]), N("Add", ["n", "five"], ["a"]),
             N("Sub", ["a", "one"], ["b"]), N("Div", ["b", "five"], ["len"]), N("Range", ["zero", "len", "one"], ["r"]),
             N("Unsqueeze", ["r", "ax0"], ["ru"]), N("Unsqueeze", ["lens", "ax1"], ["lu"]), N("Less", ["ru", "lu"], ["mask"]),
             N("Cast", ["mask"], ["y"], to=T.FLOAT)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, ["batch", "N"]),
                                  h.make_tensor_value_info("lens", T.INT64, ["batch"])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [c("five", 5), c("one", 1), c("zero", 0), c("ax0", [0]), c("ax1", [1])],
                     value_info=[h.make_tensor_value_info("ru", T.INT64, [1, ""])])
    data = h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=IR_VERSION).SerializeToString()
    feeds = {"x": f32(1, 16), "lens": np.array([2], np.int64)}
    import msv0
    got = msv0.Session(convert(data, input_shapes={"x": [1, 16], "lens": [1]})).run(feeds)["y"]
    np.testing.assert_array_equal(got, run_ort(data, feeds)["y"])
