"""int8 model latency: msv0 int8 against msv0 fp32, ONNX Runtime int8 and (where installed)
OpenVINO int8, on the zoo networks (random weights, batch 1), in alternating blocks.

    python bench/int8_models.py [--models resnet50 mobilenet_v2] [--threads 1 2] [--rounds 7]

msv0's int8 file comes from msv0.quantize (min/max calibration, per-channel weights); the ONNX
Runtime and OpenVINO int8 models are the same network's ONNX twin quantized by
onnxruntime.quantization.quantize_static (QDQ, per-channel, the same calibration samples).
Each engine runs a block of runs, then the next engine, with a pause between blocks (ONNX
Runtime's spinning workers would otherwise steal the next engine's cores); medians over all
runs are printed with the ratio to the best peer.
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np

import msv0
from msv0 import zoo
from msv0.quantize import quantize, snr_db

CALIBRATION_SAMPLES = 8


def ort_int8(onnx_model, calib: np.ndarray, path: str) -> str:
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    src = os.path.join(path, "fp32.onnx")
    onnx.save(onnx_model, src)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter({"input": np.ascontiguousarray(x.transpose(0, 3, 1, 2))} for x in calib)

        def get_next(self):
            return next(self.it, None)

    dst = os.path.join(path, "int8.onnx")
    quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return dst


def engines(name: str, threads: int, tmp: str):
    import onnxruntime as ort

    net = zoo.NETS[name]()
    rng = np.random.default_rng(0)
    calib = rng.standard_normal((CALIBRATION_SAMPLES,) + net.input_shape).astype(np.float32)
    x = rng.standard_normal(net.input_shape).astype(np.float32)
    x_nchw = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    fp32 = net.to_ms()
    int8 = quantize(fp32, {"input": calib})
    s32 = msv0.Session(fp32, num_threads=threads)
    s8 = msv0.Session(int8, num_threads=threads)
    ref = s32.run([x])["logits"]
    print(f"{name}: msv0 int8 vs fp32 SNR {snr_db(ref, s8.run([x])['logits']):.1f} dB")
    out = {"msv0 int8": lambda: s8.run([x]), "msv0 fp32": lambda: s32.run([x])}
    onnx_int8 = ort_int8(net.to_onnx(), calib, tmp)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so = ort.InferenceSession(onnx_int8, opts, providers=["CPUExecutionProvider"])
    out["onnxruntime int8"] = lambda: so.run(None, {"input": x_nchw})
    try:
        import openvino as ov
    except ImportError:
        return out
    core = ov.Core()
    compiled = core.compile_model(onnx_int8, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                                     "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    out["openvino int8"] = lambda: request.infer({0: x_nchw})
    return out


def measure(runs: dict, rounds: int, block: int) -> dict[str, float]:
    times: dict[str, list[float]] = {k: [] for k in runs}
    for fn in runs.values():
        for _ in range(3):
            fn()
    for _ in range(rounds):
        for k, fn in runs.items():
            time.sleep(0.3)
            for _ in range(block):
                t = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v2"])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--block", type=int, default=5)
    args = p.parse_args()
    print(f"isa {msv0.isa()}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            for threads in args.threads:
                medians = measure(engines(name, threads, tmp), args.rounds, args.block)
                peers = {k: v for k, v in medians.items() if not k.startswith("msv0")}
                best = min(peers, key=peers.get)
                print(f"{name} {threads}t: " + "  ".join(f"{k} {v * 1e3:.2f} ms" for k, v in medians.items()))
                print(f"    msv0 int8 / {best}: {medians['msv0 int8'] / peers[best]:.3f}   "
                      f"msv0 fp32 / msv0 int8: {medians['msv0 fp32'] / medians['msv0 int8']:.2f}x")


if __name__ == "__main__":
    main()
