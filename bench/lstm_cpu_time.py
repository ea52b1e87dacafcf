"""Converted ONNX recurrent layers against ONNX Runtime on the same model, 1 thread, median thread
CPU time: LSTM (v0 Lstm), its quantize_dynamic form (com.microsoft.DynamicQuantizeLSTM, run as Lstm on
dequantized weights) and GRU (unrolled into v0 ops); with each output's difference from ONNX
Runtime relative to the output's largest magnitude.

    python bench/lstm_cpu_time.py [seq, default 50] [hidden, default 128] [input, default 64] [runs, default 21]
"""
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as T, helper as h, numpy_helper as nh
from onnxruntime.quantization import quantize_dynamic

import msv0
from msv0.convert import convert


def cpu_time(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t = time.thread_time()
        fn()
        times.append(time.thread_time() - t)
    return float(np.median(times))


def rnn_model(op, seq, hid, inp, rng):
    bound = 1 / np.sqrt(hid)  # PyTorch's initialisation
    u = lambda *s: rng.uniform(-bound, bound, s).astype(np.float32)
    gates = 4 if op == "LSTM" else 3
    node = h.make_node(op, ["x", "W", "R", "B"], ["y", "yh"], hidden_size=hid)
    g = h.make_graph([node], op, [h.make_tensor_value_info("x", T.FLOAT, [seq, 1, inp])],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in ("y", "yh")],
                     [nh.from_array(u(1, gates * hid, inp), "W"), nh.from_array(u(1, gates * hid, hid), "R"),
                      nh.from_array(u(1, 2 * gates * hid), "B")])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 14)])


def main() -> None:
    seq, hid, inp, runs = (int(a) for a in (sys.argv[1:] + ["50", "128", "64", "21"][len(sys.argv) - 1:]))
    rng = np.random.default_rng(0)
    model = rnn_model("LSTM", seq, hid, inp, rng)
    with tempfile.TemporaryDirectory() as tmp:
        onnx.save(model, Path(tmp) / "f.onnx")
        quantize_dynamic(Path(tmp) / "f.onnx", Path(tmp) / "q.onnx")
        quantized = (Path(tmp) / "q.onnx").read_bytes()
    x = rng.standard_normal((seq, 1, inp)).astype(np.float32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    cases = (("LSTM", model.SerializeToString()), ("DynamicQuantizeLSTM", quantized),
             ("GRU", rnn_model("GRU", seq, hid, inp, rng).SerializeToString()))
    for name, data in cases:
        ref = ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
        ours = msv0.Session(msv0.load(convert(data)), num_threads=1)
        want, got = ref.run(None, {"x": x})[0], ours.run({"x": x})["y"]
        # y comes back NHWC-stored (4-D outputs do); with one direction and batch 1 that is a reshape
        err = np.abs(got.reshape(want.shape) - want).max() / np.abs(want).max()
        t_ort, t_ms = cpu_time(lambda: ref.run(None, {"x": x}), runs), cpu_time(lambda: ours.run({"x": x}), runs)
        print(f"{name} seq {seq} batch 1 in {inp} hidden {hid}: msv0 {t_ms * 1e3:.2f} ms, onnxruntime "
              f"{t_ort * 1e3:.2f} ms ({t_ms / t_ort:.2f}x), max |diff| / max |y| = {err:.1e}", flush=True)


if __name__ == "__main__":
    main()
