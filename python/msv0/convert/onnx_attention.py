"""ONNX Attention (opset 23: scaled dot-product attention, as PyTorch's exporter writes
scaled_dot_product_attention) as v0 ops: heads split from 3-D inputs, the past key and value
concatenated in front, grouped-query heads repeated, Q·Kᵀ as a batched MatMul of [B·H, S, D]
operands, softcap, the additive bias of the mask and the causal triangle, SoftMax, and P·V.
Following onnx's reference, a query row that every key is masked from gives zeros. Not written:
opset 24's nonpad_kv_seqlen and opset 25's sliding windows."""
from __future__ import annotations

import math

import numpy as np

from msv0.convert.emit import Unsupported, Val
from msv0.convert.onnx_ctx import Ctx, broadcast, emit_binary, handles, reshaped, transposed
from msv0.fb.ActivationType import ActivationType
from msv0.fb.ReduceMode import ReduceMode

F32 = np.dtype(np.float32)
NEG_INF = np.float32(-np.inf)


def _heads(c: Ctx, v: Val, heads: int | None) -> Val:
    """v as [B, H, S, D]: a 3-D [B, S, H·D] input split into `heads` heads."""
    v = c.e.plain(v, c.name)
    if len(v.shape) == 4:
        return v
    if len(v.shape) != 3 or not heads or v.shape[2] % heads:
        raise Unsupported(f"Attention input of shape {list(v.shape)} with {heads} heads")
    b, s, hd = v.shape
    return transposed(c, reshaped(c, v, (b, s, heads, hd // heads)), [0, 2, 1, 3])


def _repeat_heads(c: Ctx, v: Val, reps: int) -> Val:
    """[B, H, S, D] with each head repeated `reps` times in place (h0, h0, h1, h1, ...)."""
    if reps == 1:
        return v
    b, h, s, d = v.shape
    v = broadcast(c, reshaped(c, v, (b, h, 1, s, d)), (b, h, reps, s, d))
    return reshaped(c, v, (b, h * reps, s, d))


def _bmm(c: Ctx, a: Val, b: Val, transpose_b: bool) -> Val:
    """[B, H, M, K] × [B, H, K, N] (or [B, H, N, K]ᵀ) as one MatMul over B·H batches."""
    bsz, h, m, _ = a.shape
    n = b.shape[2] if transpose_b else b.shape[3]
    a3, b3 = (reshaped(c, v, (bsz * h, *v.shape[2:])) for v in (a, b))
    y = c.op("MatMul", [a3, b3], (bsz * h, m, n), F32, transposeB=transpose_b)
    return reshaped(c, y, (bsz, h, m, n))


def _bias(c: Ctx, mask: Val | None, causal: bool, sq: int, skv: int, past: int) -> Val | None:
    """The additive bias (0 or −inf where a bool mask or the causal triangle masks, a float
    mask's values), broadcastable to [B, H, Sq, Skv]; None when nothing masks."""
    bias = None
    if mask is not None:
        mask = c.e.plain(mask, c.name)
        if mask.dtype == np.bool_:
            mask = c.op("Where", [mask, c.scalar(0.0, F32), Val.of(np.array([NEG_INF]))], mask.shape, F32)
        elif mask.dtype != F32:
            raise Unsupported(f"Attention mask of type {mask.dtype}")
        if mask.shape[-1] < skv:  # a shorter mask leaves the keys past its end masked
            fill = Val.of(np.full((*mask.shape[:-1], skv - mask.shape[-1]), NEG_INF))
            mask = c.op("Concat", [mask, fill], (*mask.shape[:-1], skv), F32, axis=len(mask.shape) - 1)
        bias = mask
    if causal:  # query i (after `past` earlier positions) sees keys j <= i + past
        tri = np.where(np.arange(skv)[None, :] <= np.arange(sq)[:, None] + past, np.float32(0), NEG_INF)
        tri = Val.of(tri.astype(np.float32))
        bias = tri if bias is None else emit_binary(
            c, "Add", bias, tri, tuple(np.broadcast_shapes(bias.shape, tri.shape)), F32)
    return bias


def _lift_masked_rows(c: Ctx, bias: Val | None) -> tuple[Val | None, Val | None]:
    """A row the bias masks entirely gives zeros: its bias is lifted to 0 (finite scores, no NaN
    from SoftMax) and its probabilities multiplied by 0. Returns (live, lifted): live [.., Sq, 1]
    is 1 where some key is left to a query row, else 0 (None when every row keeps a key); lifted
    is the bias so lifted (the bias itself when live is None, None when nothing masks)."""
    if bias is None:
        return None, None
    if bias.const is not None:
        ok = bias.const.max(axis=-1, keepdims=True) > NEG_INF
        if ok.all():
            return None, bias
        return Val.of(ok.astype(np.float32)), Val.of(np.maximum(bias.const, np.where(ok, NEG_INF, np.float32(0))))
    row_max = c.op("Reduce", [bias], (*bias.shape[:-1], 1), F32, axes=[len(bias.shape) - 1], keepDims=True,
                   mode=ReduceMode.ReduceMax)
    alive = emit_binary(c, "Greater", row_max, Val.of(np.array([NEG_INF])), row_max.shape, np.dtype(np.bool_))
    live = c.op("Where", [alive, c.scalar(1.0, F32), c.scalar(0.0, F32)], row_max.shape, F32)
    floor = c.op("Where", [alive, Val.of(np.array([NEG_INF])), c.scalar(0.0, F32)], row_max.shape, F32)
    return live, emit_binary(c, "Maximum", bias, floor, bias.shape, F32)


@handles("Attention")
def attention(c: Ctx):
    if c.inp(6) is not None:
        raise Unsupported("nonpad_kv_seqlen (a static cache's lengths)")
    if c.attr("left_window_size", -1) != -1 or c.attr("right_window_size", -1) != -1:
        raise Unsupported("sliding-window attention")
    q_in, k_in, v_in = c.inp(0), c.inp(1), c.inp(2)
    if any(v.dtype != F32 for v in (q_in, k_in, v_in)):
        raise Unsupported("Attention on float32 only")
    rank = len(q_in.shape)
    hq_attr, hkv_attr = c.attr("q_num_heads"), c.attr("kv_num_heads")
    q, k, v = _heads(c, q_in, hq_attr), _heads(c, k_in, hkv_attr), _heads(c, v_in, hkv_attr)
    past_k, past_v = c.inp(4), c.inp(5)
    if (past_k is None) != (past_v is None):
        raise Unsupported("past_key without past_value, or the other way round")
    past = 0
    if past_k is not None:
        past = past_k.shape[2]
        k, v = (c.op("Concat", [c.e.plain(p, c.name), x], (*x.shape[:2], past + x.shape[2], x.shape[3]), F32, axis=2)
                for p, x in ((past_k, k), (past_v, v)))
    for j, present in ((1, k), (2, v)):
        if c.used(j):
            c.set(j, present)
    b, hq, sq, d = q.shape
    hkv, skv = k.shape[1], k.shape[2]
    if hq % hkv or v.shape[1] != hkv:
        raise Unsupported(f"{hq} query heads over {hkv} key and {v.shape[1]} value heads")
    # onnx's order: Q and K each times sqrt(scale), in float32
    scale = c.attr("scale")
    root = np.float32(math.sqrt(1 / math.sqrt(d) if scale is None else float(scale)))
    qs, ks = (emit_binary(c, "Mul", x, c.scalar(root, F32), x.shape, F32) for x in (q, _repeat_heads(c, k, hq // hkv)))
    logits = _bmm(c, qs, ks, True)
    softcap = float(c.attr("softcap", 0.0))
    if softcap > 0:  # softcap·tanh(x / softcap), tanh as 2·sigmoid(2x) − 1 (r1.1's TANH is a Padé fit)
        s = emit_binary(c, "Mul", logits, c.scalar(2 / softcap, F32), logits.shape, F32)
        s = c.op("Activation", [s], s.shape, F32, type=ActivationType.SIGMOID)
        s = emit_binary(c, "Sub", emit_binary(c, "Mul", s, c.scalar(2.0, F32), s.shape, F32), c.scalar(1.0, F32),
                        s.shape, F32)
        logits = emit_binary(c, "Mul", s, c.scalar(softcap, F32), s.shape, F32)
    bias = _bias(c, c.inp(3), bool(c.attr("is_causal", 0)), sq, skv, past)
    live, lifted = _lift_masked_rows(c, bias)
    safe = logits if lifted is None else emit_binary(c, "Add", logits, lifted, logits.shape, F32)
    probs = c.op("SoftMax", [safe], safe.shape, F32, axis=3)
    if live is not None:
        probs = emit_binary(c, "Mul", probs, live, probs.shape, F32)
    if c.used(3):
        mode = int(c.attr("qk_matmul_output_mode", 0))
        if mode == 3:
            qk = probs
        elif mode == 2 and live is None:  # the scores SoftMax read: logits plus the bias
            qk = safe
        elif mode == 2:  # the scores before lifting: −inf across a fully masked row
            qk = emit_binary(c, "Add", logits, bias, logits.shape, F32)
        else:  # 0 and 1: the logits, softcapped where softcap is set, as onnx's reference has them
            qk = logits
        c.set(3, qk)
    y = _bmm(c, probs, _repeat_heads(c, v, hq // hkv), False)
    if rank == 3:
        dv = y.shape[3]
        y = reshaped(c, transposed(c, y, [0, 2, 1, 3]), (b, sq, hq * dv))
    shape, _ = c.out()
    if tuple(y.shape) != tuple(shape):
        raise Unsupported(f"Attention output {list(y.shape)} where shape inference has {list(shape)}")
    c.set(0, y)


def _rotation_tables(cos: np.ndarray, sin: np.ndarray, head: int, interleaved: bool):
    """(cos, signed sin, partner) over a whole head of `head` values from caches [..., rd/2]:
    y = x·cos + x[partner]·sin rotates each pair (x1, x2) to (x1·c − x2·s, x1·s + x2·c) and
    leaves the values past rd as they are (cos 1, sin 0)."""
    half = cos.shape[-1]
    rd = 2 * half
    lead = cos.shape[:-1]
    c_full, s_full = np.ones((*lead, head), np.float32), np.zeros((*lead, head), np.float32)
    partner = np.arange(head)
    if interleaved:  # pairs (2i, 2i + 1)
        c_full[..., 0:rd:2] = c_full[..., 1:rd:2] = cos
        s_full[..., 0:rd:2], s_full[..., 1:rd:2] = -sin, sin
        partner[0:rd:2], partner[1:rd:2] = np.arange(1, rd, 2), np.arange(0, rd, 2)
    else:  # pairs (i, i + rd/2)
        c_full[..., :half] = c_full[..., half:rd] = cos
        s_full[..., :half], s_full[..., half:rd] = -sin, sin
        partner[:half], partner[half:rd] = np.arange(half, rd), np.arange(half)
    return c_full, s_full, partner.astype(np.int32)


@handles("RotaryEmbedding")
def rotary_embedding(c: Ctx):
    x = c.e.plain(c.inp(0), c.name)
    cos, sin = c.const(1, "cos_cache"), c.const(2, "sin_cache")
    ids = c.inp(3)
    if x.dtype != F32:
        raise Unsupported(f"RotaryEmbedding on {x.dtype}")
    # Worked on as [H, B, S, D]: the tables, [B, S, D], then repeat along the leading dim alone,
    # which the element-wise kernels read in place (a view of a 4-D input where B or H is 1).
    if len(x.shape) == 4:  # [B, H, S, D]
        b, heads, s, d = x.shape
        x, back = transposed(c, x, [1, 0, 2, 3]), [1, 0, 2, 3]
    elif len(x.shape) == 3 and c.attr("num_heads", 0) and x.shape[2] % c.attr("num_heads") == 0:  # [B, S, H·D]
        b, s, hidden = x.shape
        heads = int(c.attr("num_heads"))
        d = hidden // heads
        x, back = transposed(c, reshaped(c, x, (b, s, heads, d)), [2, 0, 1, 3]), [1, 2, 0, 3]
    else:
        raise Unsupported(f"RotaryEmbedding of shape {list(x.shape)} with num_heads {c.attr('num_heads')}")
    rd = int(c.attr("rotary_embedding_dim", 0)) or d
    if rd % 2 or rd > d or cos.shape != sin.shape or cos.shape[-1] != rd // 2:
        raise Unsupported(f"RotaryEmbedding caches {list(cos.shape)} for rotary_embedding_dim {rd} of head size {d}")
    c_full, s_full, partner = _rotation_tables(cos.astype(np.float32), sin.astype(np.float32), d,
                                               bool(c.attr("interleaved", 0)))
    if ids is None:  # the caches are per batch and position already
        if cos.shape[:-1] != (b, s):
            raise Unsupported(f"RotaryEmbedding caches {list(cos.shape)} without position_ids for [{b}, {s}]")
        tables = [Val.of(t) for t in (c_full, s_full)]
    else:
        ids = c.e.plain(ids, c.name)
        if tuple(ids.shape) != (b, s) or cos.ndim != 2:
            raise Unsupported(f"RotaryEmbedding position_ids {list(ids.shape)} into caches {list(cos.shape)}")
        tables = [c.op("Gather", [Val.of(t), ids], (b, s, d), F32, axis=0) for t in (c_full, s_full)]
    swapped = c.op("Gather", [x, Val.of(partner)], x.shape, F32, axis=3)
    y = emit_binary(c, "Add", emit_binary(c, "Mul", x, tables[0], x.shape, F32),
                    emit_binary(c, "Mul", swapped, tables[1], x.shape, F32), x.shape, F32)
    shape, _ = c.out()
    c.set(0, reshaped(c, transposed(c, y, back), shape))
