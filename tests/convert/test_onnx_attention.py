"""ONNX Attention (onnx_attention) against ONNX Runtime and onnx's reference: 3-D and 4-D inputs,
grouped-query heads, value heads of another size, bool and float masks of every rank (shorter
than the keys too), causal with and without a past, softcap, the present key and value and every
qk_matmul_output mode; a fully masked row gives zeros."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T, helper as h  # noqa: E402

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402
from onnxcheck import IR_VERSION, run_msv0, run_ort, run_reference  # noqa: E402

R = np.random.default_rng(3)


def model(inputs: dict, outputs: list[str], **attrs):
    """One Attention node; inputs {name: array} in Attention's order (None: absent)."""
    order = ["Q", "K", "V", "attn_mask", "past_key", "past_value"]
    names = [n if inputs.get(n) is not None else "" for n in order]
    while names and not names[-1]:
        names.pop()
    vis = [h.make_tensor_value_info(n, T.BOOL if inputs[n].dtype == np.bool_ else T.FLOAT, inputs[n].shape)
           for n in names if n]
    g = h.make_graph([h.make_node("Attention", names, outputs, **attrs)], "g", vis,
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outputs if o])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 23)], ir_version=IR_VERSION)


def compare(inputs, outputs, reference=False, **attrs):
    m = model(inputs, outputs, **attrs).SerializeToString()
    feeds = {k: v for k, v in inputs.items() if v is not None}
    want = (run_reference if reference else run_ort)(m, feeds)
    got = run_msv0(m, feeds)
    for o in outputs:
        if o:
            np.testing.assert_allclose(got[o], want[o], rtol=1e-4, atol=1e-5, err_msg=o)


def qkv(b, hq, hkv, sq, skv, d, dv, three_d):
    q, k, v = (R.standard_normal(s).astype(np.float32) for s in ((b, hq, sq, d), (b, hkv, skv, d), (b, hkv, skv, dv)))
    if three_d:
        q, k, v = (x.transpose(0, 2, 1, 3).reshape(x.shape[0], x.shape[2], -1) for x in (q, k, v))
    return {"Q": q, "K": k, "V": v}


CASES = [
    # heads q/kv, seq q/kv, head sizes d/dv, 3-D, attributes
    ((4, 4), (5, 7), (8, 8), False, {}),
    ((6, 2), (3, 9), (8, 5), False, {"scale": 0.3}),
    ((6, 3), (4, 4), (16, 16), True, {"is_causal": 1}),
    ((2, 2), (1, 6), (8, 8), True, {"softcap": 2.5}),
]


@pytest.mark.parametrize("heads,seqs,sizes,three_d,attrs", CASES)
def test_attention_matches_onnxruntime(heads, seqs, sizes, three_d, attrs):
    ins = qkv(2, *heads, *seqs, *sizes, three_d)
    if three_d:
        attrs = dict(attrs, q_num_heads=heads[0], kv_num_heads=heads[1])
    compare(ins, ["Y"], **attrs)


@pytest.mark.parametrize("mask_shape", [(5, 7), (2, 1, 5, 7), (2, 4, 5, 7), (5, 4)])
@pytest.mark.parametrize("kind", ["bool", "float"])
@pytest.mark.parametrize("causal", [0, 1])
def test_masks(mask_shape, kind, causal):
    ins = qkv(2, 4, 2, 5, 7, 8, 8, False)
    if kind == "bool":
        mask = R.random(mask_shape) > 0.3
        mask[..., 0] = True  # every row keeps a key (a fully masked row: test_fully_masked_row)
    else:
        mask = R.standard_normal(mask_shape).astype(np.float32)
    ins["attn_mask"] = mask
    compare(ins, ["Y"], reference=True, is_causal=causal)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_past_present_and_qk_output(mode):
    ins = qkv(2, 6, 3, 4, 3, 8, 10, True)
    ins["attn_mask"] = R.standard_normal((4, 9)).astype(np.float32)
    ins["past_key"] = R.standard_normal((2, 3, 6, 8)).astype(np.float32)
    ins["past_value"] = R.standard_normal((2, 3, 6, 10)).astype(np.float32)
    compare(ins, ["Y", "present_key", "present_value", "qk"], reference=True, is_causal=1, q_num_heads=6,
            kv_num_heads=3, qk_matmul_output_mode=mode, softcap=3.0 if mode == 1 else 0.0)


def test_fully_masked_row():
    ins = qkv(1, 2, 2, 3, 4, 8, 8, False)
    mask = np.ones((3, 4), bool)
    mask[1] = False
    ins["attn_mask"] = mask
    m = model(ins, ["Y"]).SerializeToString()
    got = run_msv0(m, ins)["Y"]
    assert np.all(got[:, :, 1] == 0) and np.isfinite(got).all()
    np.testing.assert_allclose(got, run_reference(m, ins)["Y"], rtol=1e-4, atol=1e-5)


def test_what_cannot_be_expressed_is_reported():
    ins = qkv(1, 2, 2, 3, 4, 8, 8, False)
    with pytest.raises(msv0.UnsupportedOpError, match="sliding-window"):
        convert(model(ins, ["Y"], left_window_size=2).SerializeToString())


@pytest.mark.parametrize("rank,interleaved,rd,ids", [(4, 0, 0, True), (4, 1, 8, True), (3, 0, 6, True),
                                                     (3, 1, 0, False), (4, 0, 4, False)])
def test_rotary_embedding(rank, interleaved, rd, ids):
    """Caches as initializers (as exporters write them), position ids fed or absent; the rotation
    over all of a head or its first rd values, pairs split in halves or interleaved."""
    from onnx import numpy_helper
    b, heads, s, d, max_pos = 2, 3, 5, 10, 16
    half = (rd or d) // 2
    angles = R.uniform(0, 6, (max_pos, half) if ids else (b, s, half))
    x = R.standard_normal((b, heads, s, d) if rank == 4 else (b, s, heads * d)).astype(np.float32)
    inputs = ["x", "cos", "sin"] + (["ids"] if ids else [])
    attrs = dict(interleaved=interleaved, rotary_embedding_dim=rd) | ({"num_heads": heads} if rank == 3 else {})
    vis = [h.make_tensor_value_info("x", T.FLOAT, x.shape)]
    feeds = {"x": x}
    if ids:
        vis.append(h.make_tensor_value_info("ids", T.INT64, (b, s)))
        feeds["ids"] = R.integers(0, max_pos, (b, s)).astype(np.int64)
    inits = [numpy_helper.from_array(np.cos(angles).astype(np.float32), "cos"),
             numpy_helper.from_array(np.sin(angles).astype(np.float32), "sin")]
    g = h.make_graph([h.make_node("RotaryEmbedding", inputs, ["y"], **attrs)], "g", vis,
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 23)], ir_version=IR_VERSION).SerializeToString()
    np.testing.assert_allclose(run_msv0(m, feeds)["y"], run_reference(m, feeds)["y"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_msv0(m, feeds)["y"], run_ort(m, feeds)["y"], rtol=1e-5, atol=1e-6)
