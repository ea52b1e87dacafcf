"""Full-integer quantization of a float TFLiteWriter graph, the way TFLiteConverter does it with a
representative dataset (TensorFlow itself is not a test dependency): activation ranges from the
LiteRT interpreter's own float run over the samples, asymmetric activations, symmetric int8
weights (per output channel or per tensor), int32 biases at s_in·s_w, the fixed output params
TFLite's int8 kernels require, and equal input/output params where its kernels require them.

    data, edges = quantize_graph(w, samples, per_channel=True, dtype=np.int8, float_io=False)
"""
from __future__ import annotations

import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType

from tflitewriter import TYPES, TFLiteWriter

WEIGHTED = {"CONV_2D": 0, "DEPTHWISE_CONV_2D": 3, "FULLY_CONNECTED": 0}  # op -> weight's channel axis
SAME_PARAMS = {"MAX_POOL_2D", "AVERAGE_POOL_2D", "RESHAPE", "SQUEEZE", "PAD"}
FIXED = {"SOFTMAX": (1 / 256, -128), "LOGISTIC": (1 / 256, -128), "TANH": (1 / 128, 0)}


def _codes():
    from tflite.BuiltinOperator import BuiltinOperator
    return {v: k for k, v in vars(BuiltinOperator).items() if not k.startswith("_")}


def interpreter(data, **kw) -> Interpreter:
    it = Interpreter(model_content=data, experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
                     **kw)
    it.allocate_tensors()
    return it


def ranges(w: TFLiteWriter, samples) -> dict[int, tuple[float, float]]:
    it = interpreter(w.finish(), experimental_preserve_all_tensors=True)
    names = {d["name"]: d["index"] for d in it.get_input_details()}
    out: dict[int, tuple[float, float]] = {}
    for feeds in samples:
        for k, a in feeds.items():
            it.set_tensor(names[k], a)
        it.invoke()
        for i, (_, _, typ, buf, _, _) in enumerate(w.tensors):
            if buf == 0 and typ == TYPES[np.dtype(np.float32)]:
                a = it.get_tensor(i)
                lo, hi = out.get(i, (np.inf, -np.inf))
                out[i] = (min(lo, float(a.min())), max(hi, float(a.max())))
    return out


def _act(lo, hi):
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / 255 if hi > lo else 1.0
    return scale, int(np.clip(np.round(-128 - lo / scale), -128, 127))


def quantize_graph(w: TFLiteWriter, samples, *, per_channel=True, dtype=np.int8, float_io=False):
    """(tflite bytes, {input or output name: its int8 (scale, zp)}) of w quantized to dtype (int8 or uint8)."""
    r = ranges(w, samples)
    codes = _codes()
    shift = 128 if np.dtype(dtype) == np.uint8 else 0
    params: dict[int, tuple[float, int]] = {}  # activation tensor -> int8 (scale, zp)
    for i in w.inputs:
        params[i] = _act(*r[i])
    for c, ins, outs, _, _ in w.ops:
        code = codes[w.codes[c][0]]
        for t in ins:
            if t not in params and t in r and w.tensors[t][3] == 0:
                params[t] = _act(*r[t])
        params[outs[0]] = (params[ins[0]] if code in SAME_PARAMS else FIXED.get(code) or _act(*r[outs[0]]))
    q = TFLiteWriter()
    q.buffers, q.codes = list(w.buffers), list(w.codes)
    new = q.tensors
    for i, (name, shape, typ, buf, _, _) in enumerate(w.tensors):
        if typ != TYPES[np.dtype(np.float32)]:
            new.append((name, shape, typ, buf, None, None))
        elif buf == 0:
            s, z = params[i]
            new.append((name, shape, TYPES[np.dtype(dtype)], 0, None, ([s], [z + shift], 0)))
        else:
            new.append(None)  # a float constant: quantized below, by the op that reads it
    for c, ins, outs, _, _ in w.ops:
        code = codes[w.codes[c][0]]
        for pos, t in enumerate(ins):
            if t < 0 or new[t] is not None:
                continue
            name, shape, _, buf, _, _ = w.tensors[t]
            a = np.frombuffer(w.buffers[buf], np.float32).reshape(shape)
            if code in WEIGHTED and pos == 1:
                axis = WEIGHTED[code]
                if shift:  # uint8 weights: per tensor, asymmetric
                    s, z = _act(a.min(), a.max())
                    qa = np.clip(np.round(a / s) + z + shift, 0, 255).astype(np.uint8)
                    quant = ([s], [z + shift], 0)
                else:
                    red = tuple(k for k in range(a.ndim) if k != axis) if per_channel else None
                    amax = np.abs(a).max(axis=red, keepdims=True)
                    s = np.where(amax > 0, amax / 127, 1.0)
                    qa = np.clip(np.round(a / s), -127, 127).astype(np.int8)
                    quant = (s.reshape(-1), np.zeros(s.size, np.int64), axis)
                ws = np.asarray(quant[0], np.float64)
                q.buffers[buf] = qa.tobytes()
                new[t] = (name, shape, TYPES[qa.dtype], buf, None, quant)
                bias = ins[2] if len(ins) > 2 else -1
                if bias >= 0 and new[bias] is None:
                    bs = np.float32(params[ins[0]][0]) * ws.astype(np.float32)
                    b = np.frombuffer(w.buffers[w.tensors[bias][3]], np.float32)
                    qb = np.round(b / bs).astype(np.int32)
                    q.buffers[w.tensors[bias][3]] = qb.tobytes()
                    new[bias] = (w.tensors[bias][0], [len(b)], TYPES[np.dtype(np.int32)], w.tensors[bias][3], None,
                                 (bs, np.zeros(len(bs), np.int64), 0))
            else:  # a constant operand: per tensor, from its own range
                s, z = _act(a.min(), a.max())
                qa = (np.clip(np.round(a / s) + z, -128, 127) + shift).astype(dtype)
                q.buffers[buf] = qa.tobytes()
                new[t] = (name, shape, TYPES[np.dtype(dtype)], buf, None, ([s], [z + shift], 0))
    q.ops.extend(w.ops)
    q.inputs.extend(w.inputs)
    q.outputs.extend(w.outputs)
    if float_io:
        from tflite.BuiltinOperator import BuiltinOperator
        for code in (BuiltinOperator.QUANTIZE, BuiltinOperator.DEQUANTIZE):
            q.codes.append((code, None))
        qz, dq = len(q.codes) - 2, len(q.codes) - 1
        for k, i in enumerate(q.inputs):  # the float edge keeps the name
            f = q._tensor(new[i][0], new[i][1], np.float32)
            new[i] = (new[i][0] + "_q",) + new[i][1:]
            q.ops.insert(0, (qz, [f], [i], None, {}))
            q.inputs[k] = f
        for k, i in enumerate(q.outputs):
            f = q._tensor(new[i][0], new[i][1], np.float32)
            new[i] = (new[i][0] + "_q",) + new[i][1:]
            q.ops.append((dq, [i], [f], None, {}))
            q.outputs[k] = f
    return q.finish(), {w.tensors[i][0]: params[i] for i in w.inputs + w.outputs}
