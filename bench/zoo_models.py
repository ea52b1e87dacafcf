"""The zoo's networks (random weights, batch 1) in each precision msv0 runs, against the peers
for that precision and msv0 fp32, each engine in its own process, in alternating blocks.

    python bench/zoo_models.py [--precision fp32 int8 bf16] [--models resnet50 mobilenet_v2]
                               [--threads 1 2] [--batch 1 8 32] [--rounds 7] [--block 5]

- fp32: msv0 against ONNX Runtime and OpenVINO (inference precision f32: on a CPU with bf16 it
  would otherwise run bf16) on the network's ONNX twin, and LiteRT (default resolver: XNNPACK)
  on a .tflite twin written with tests/convert/tflitewriter.py.
- int8: msv0.quantize's file (min/max calibration, per-channel weights) against ONNX Runtime and
  OpenVINO on the ONNX twin quantized by onnxruntime.quantization.quantize_static (QDQ,
  per-channel, the same calibration samples), and LiteRT (XNNPACK) on the .tflite twin quantized
  to full integer with float input and output by tests/convert/tflitequant.py (LiteRT's own
  ranges over the same samples, per-channel weights); where the int8 GEMM takes its AMX slot, msv0 int8
  with AMX off ("no-amx": vpdpbusd) as well. Prints int8's SNR against fp32.
- bf16: Session(precision="bf16") against OpenVINO with inference precision bf16, where the CPU
  has AVX512-BF16. Prints bf16's error against fp32 (max |bf16 - fp32| / max |fp32|).

--batch N runs N images per call (msv0 plans the batch-1 file once more for it; the ONNX twins
take a dynamic batch, LiteRT resizes its input) and prints images per second too.

Each engine lives in its own process (OpenVINO pins and keeps threads, which slowed msv0 by a
third in a shared process) and runs a block of runs, then the next engine, with a 1 s pause
between blocks (spinning workers would otherwise steal the next engine's cores). Medians over
all runs are printed, with msv0's ratio to the best peer of its precision. Peers that are not
installed are left out (`pip install '.[bench]'`; LiteRT comes with the test extras).
"""
from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time

import numpy as np
import onnx

import msv0
from msv0 import _core, zoo
from msv0.cli import litert_interpreter
from msv0.fb.ActivationType import ActivationType
from msv0.quantize import quantize, snr_db

from machine import round_trip_line

CALIBRATION_SAMPLES = 8
TFLITE_ACTIVATION = {ActivationType.NO_ACTIVATION: 0, ActivationType.RELU: 1, ActivationType.RELU6: 3}


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "convert"))


def tflite_twin(net: zoo.Net):
    """The network as a TFLiteWriter graph: NHWC like the .ms, the same weights. A window whose
    pads are neither TFLite's SAME nor VALID gets an explicit PAD first; PAD pads zeros, which a
    max pool only ever sees after a ReLU in the zoo, so the function is the same."""
    from tflitewriter import TFLiteWriter

    w = TFLiteWriter()
    ids = {net.input_name: w.input(net.input_name, list(net.input_shape))}

    def window(x: int, layer: zoo.Layer) -> tuple[int, int]:
        """(input, padding: 0 SAME, 1 VALID) of a windowed layer."""
        n, h, wd, c = net.shape(layer.inputs[0])
        k, s = layer.kernel, layer.stride
        up, down, left, right = layer.pads
        if not any(layer.pads):
            return x, 1
        same = [(t // 2, t - t // 2) for t in (max(0, (-(-d // s) - 1) * s + k - d) for d in (h, wd))]
        if [(up, down), (left, right)] == same and layer.out_shape[1:3] == (-(-h // s), -(-wd // s)):
            return x, 0
        pads = np.array([[0, 0], [up, down], [left, right], [0, 0]], np.int32)
        return w.op("PAD", [x, w.const(pads)], [n, h + up + down, wd + left + right, c]), 1

    for layer in net.layers:
        x, shape = ids[layer.inputs[0]], list(layer.out_shape)
        act = TFLITE_ACTIVATION[layer.act]
        if layer.kind == "conv":
            x, padding = window(x, layer)
            y = w.op("CONV_2D", [x, w.const(layer.weight), w.const(layer.bias)], shape, "Conv2DOptions",
                     padding=padding, stride_w=layer.stride, stride_h=layer.stride, fused_activation_function=act)
        elif layer.kind == "dwconv":
            x, padding = window(x, layer)
            y = w.op("DEPTHWISE_CONV_2D", [x, w.const(layer.weight.transpose(3, 1, 2, 0)), w.const(layer.bias)],
                     shape, "DepthwiseConv2DOptions", padding=padding, stride_w=layer.stride,
                     stride_h=layer.stride, depth_multiplier=1, fused_activation_function=act)
        elif layer.kind == "maxpool":
            x, padding = window(x, layer)
            y = w.op("MAX_POOL_2D", [x], shape, "Pool2DOptions", padding=padding, stride_w=layer.stride,
                     stride_h=layer.stride, filter_width=layer.kernel, filter_height=layer.kernel)
        elif layer.kind == "gap":
            y = w.op("MEAN", [x, w.const(np.array([1, 2], np.int32))], shape, "ReducerOptions", keep_dims=True)
        elif layer.kind == "fc":
            y = w.op("FULLY_CONNECTED", [x, w.const(layer.weight), w.const(layer.bias)], shape,
                     "FullyConnectedOptions", fused_activation_function=act)
        elif layer.kind == "add":
            y = w.op("ADD", [x, ids[layer.inputs[1]]], shape, "AddOptions", fused_activation_function=act)
        else:
            raise ValueError(f"no .tflite twin for layer kind {layer.kind!r}")
        ids[layer.output] = y
    w.output(ids[net.output])
    return w


def litert_run(tflite: bytes, threads: int, x: np.ndarray):
    """LiteRT as applications get it (default resolver: XNNPACK) on a .tflite file's bytes: a
    function that runs it on x (its input resized to x's batch) and returns the output."""
    it = litert_interpreter(tflite, threads, {"input": x.shape})
    x_index, y_index = it.get_input_details()[0]["index"], it.get_output_details()[0]["index"]

    def run():
        it.set_tensor(x_index, x)
        it.invoke()
        return it.get_tensor(y_index)
    return run


def ort_int8(onnx_model, calib: np.ndarray, dst: str) -> None:
    """The ONNX model quantized by ONNX Runtime's quantize_static (QDQ, per-channel) into dst."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    src = dst + ".fp32.onnx"
    onnx.save(onnx_model, src)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({"input": np.ascontiguousarray(x.transpose(0, 3, 1, 2))} for x in calib)

        def get_next(self):
            return next(self.it, None)

    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)


def _inputs(name: str):
    net = zoo.NETS[name]()
    rng = np.random.default_rng(0)
    calib = rng.standard_normal((CALIBRATION_SAMPLES,) + net.input_shape).astype(np.float32)
    x = rng.standard_normal(net.input_shape).astype(np.float32)
    return net, calib, x


def _engine(kind: str, name: str, threads: int, tmp: str, batch: int):
    """One engine's run function, built in its own process. kind: "<engine> <precision>"."""
    net, calib, x = _inputs(name)
    x = np.random.default_rng(1).standard_normal((batch, *x.shape[1:])).astype(np.float32) if batch > 1 else x
    engine, precision = kind.split()[:2]
    if engine == "msv0":
        fp32 = net.to_ms()
        _core.set_amx(kind != "msv0 int8 no-amx")
        model = quantize(fp32, {"input": calib}) if precision == "int8" else fp32
        session = msv0.Session(model, num_threads=threads, precision="bf16" if precision == "bf16" else "fp32")
        return lambda: session.run([x])
    if engine == "litert":
        with open(os.path.join(tmp, f"{name}_int8.tflite" if precision == "int8" else f"{name}.tflite"), "rb") as f:
            return litert_run(f.read(), threads, x)
    onnx_file = os.path.join(tmp, f"{name}_int8.onnx" if precision == "int8" else f"{name}.onnx")
    x_nchw = {"input": np.ascontiguousarray(x.transpose(0, 3, 1, 2))}
    if engine == "onnxruntime":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(onnx_file, opts, providers=["CPUExecutionProvider"])
        return lambda: sess.run(None, x_nchw)
    import openvino as ov

    config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    if precision != "int8":
        config["INFERENCE_PRECISION_HINT"] = "f32" if precision == "fp32" else "bf16"
    request = ov.Core().compile_model(onnx_file, "CPU", config).create_infer_request()
    return lambda: request.infer(x_nchw)


def _worker(conn, kind: str, name: str, threads: int, tmp: str, batch: int) -> None:
    run = _engine(kind, name, threads, tmp, batch)
    for _ in range(3):
        run()
    conn.send("ready")
    while (block := conn.recv()) > 0:
        times = []
        for _ in range(block):
            t = time.perf_counter()
            run()
            times.append(time.perf_counter() - t)
        conn.send(times)


def measure(kinds: list[str], name: str, threads: int, tmp: str, rounds: int, block: int,
            batch: int) -> dict[str, float]:
    """Median latency per engine, each in its own process (no engine's threads or pinning touch
    another's), in alternating blocks with a pause between them."""
    ctx = mp.get_context("spawn")
    workers = {}
    for kind in kinds:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(child, kind, name, threads, tmp, batch))
        proc.start()
        workers[kind] = (proc, parent)
    times: dict[str, list[float]] = {k: [] for k in kinds}
    try:
        for proc, conn in workers.values():
            conn.recv()
        for _ in range(rounds):
            for kind, (_, conn) in workers.items():
                time.sleep(1.0)
                conn.send(block)
                times[kind] += conn.recv()
    finally:
        for proc, conn in workers.values():
            conn.send(0)
            proc.join()
    return {k: statistics.median(v) for k, v in times.items()}


def engines(precision: str) -> list[str]:
    """The engines timed for a precision: msv0's first, its peers after "msv0 fp32"."""
    installed = {e: importlib.util.find_spec(m) is not None
                 for e, m in (("onnxruntime", "onnxruntime"), ("openvino", "openvino"), ("litert", "ai_edge_litert"))}
    peers = {"fp32": ["onnxruntime", "openvino", "litert"], "int8": ["onnxruntime", "openvino", "litert"],
             "bf16": ["openvino"]}[precision]
    kinds = [f"msv0 {precision}"]
    if precision == "int8" and _core.gemm_s8_tile() == (32, 32):  # AMX slot: time the vpdpbusd one too
        kinds.append("msv0 int8 no-amx")
    if precision != "fp32":
        kinds.append("msv0 fp32")
    return kinds + [f"{e} {precision}" for e in peers if installed[e]]


def write_twins(name: str, net: zoo.Net, calib: np.ndarray, x: np.ndarray, tmp: str, int8: bool) -> None:
    """The peers' files in tmp: the ONNX twin, the .tflite twin (checked against msv0 where LiteRT
    is installed) and, for int8, the quantized ONNX twin."""
    onnx.save(net.to_onnx(dynamic_batch=True), os.path.join(tmp, f"{name}.onnx"))
    w = tflite_twin(net)
    tflite = w.finish()
    with open(os.path.join(tmp, f"{name}.tflite"), "wb") as f:
        f.write(tflite)
    litert = importlib.util.find_spec("ai_edge_litert") is not None
    if litert:
        got = litert_run(tflite, 1, x)()
        ref = msv0.Session(net.to_ms()).run([x])["logits"]
        err = np.abs(got - ref).max() / np.abs(ref).max()
        if err > 1e-4:
            raise SystemExit(f"{name}: the .tflite twin is {err:.1e} off msv0 (relative to its max)")
    if int8:
        ort_int8(net.to_onnx(dynamic_batch=True), calib, os.path.join(tmp, f"{name}_int8.onnx"))
    if int8 and litert:  # full-integer with float input and output, as TFLiteConverter writes it
        from tflitequant import quantize_graph

        data, _ = quantize_graph(w, [{net.input_name: c} for c in calib], per_channel=True, float_io=True)
        with open(os.path.join(tmp, f"{name}_int8.tflite"), "wb") as f:
            f.write(data)


def accuracy(precision: str, net: zoo.Net, calib: np.ndarray, x: np.ndarray) -> str:
    fp32 = net.to_ms()
    ref = msv0.Session(fp32).run([x])["logits"]
    if precision == "int8":
        got = msv0.Session(quantize(fp32, {"input": calib})).run([x])["logits"]
        return f"SNR against fp32 {snr_db(ref, got):.1f} dB"
    got = msv0.Session(fp32, precision="bf16").run([x])["logits"]
    return f"max |bf16 - fp32| / max |fp32| = {np.abs(got - ref).max() / np.abs(ref).max():.1e}"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--precision", nargs="+", default=["fp32", "int8", "bf16"], choices=["fp32", "int8", "bf16"])
    p.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v2"], choices=sorted(zoo.NETS))
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--batch", nargs="+", type=int, default=[1], help="images per call")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--block", type=int, default=5)
    args = p.parse_args()
    print(f"isa {msv0.isa()}; medians of {args.rounds} blocks of {args.block} runs per engine, ms")
    print(round_trip_line())
    precisions = list(args.precision)
    if "bf16" in precisions and not _core.bf16_available():
        print("bf16 left out: no AVX512-BF16 on the avx512vnni tier here (precision='bf16' would run fp32)")
        precisions.remove("bf16")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            net, calib, x = _inputs(name)
            write_twins(name, net, calib, x, tmp, "int8" in precisions)
            for precision in precisions:
                kinds = engines(precision)
                if precision != "fp32":
                    print(f"{name} {precision}: {accuracy(precision, net, calib, x)}")
                for threads, batch in ((t, b) for t in args.threads for b in args.batch):
                    medians = measure(kinds, name, threads, tmp, args.rounds, args.block, batch)
                    ours = medians[kinds[0]]
                    peers = {k: v for k, v in medians.items() if not k.startswith("msv0")}
                    line = "  ".join(f"{k} {v * 1e3:.2f}" for k, v in medians.items())
                    label = f"{name} {precision} {threads}t" + (f" batch {batch}" if batch > 1 else "")
                    print(f"{label}: {line}")
                    if batch > 1:
                        print("    images/s: " + "  ".join(f"{k} {batch / v:.1f}" for k, v in medians.items()))
                    if peers:
                        best = min(peers, key=peers.get)
                        print(f"    {kinds[0]} / {best}: {ours / peers[best]:.3f}", end="")
                    if precision != "fp32":
                        print(f"    speed-up over msv0 fp32: {medians['msv0 fp32'] / ours:.2f}x", end="")
                    if "msv0 int8 no-amx" in medians:
                        print(f"    no-amx / int8: {medians['msv0 int8 no-amx'] / ours:.2f}x", end="")
                    print(flush=True)
    print(round_trip_line() + " (after)")


if __name__ == "__main__":
    main()
