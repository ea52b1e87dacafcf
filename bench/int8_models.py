"""int8 model latency: msv0 int8 against msv0 fp32, ONNX Runtime int8 and (where installed)
OpenVINO int8, on the zoo networks (random weights, batch 1), in alternating blocks; where the
int8 GEMM takes its AMX slot, msv0 int8 with AMX off ("no-amx": vpdpbusd) as well.

    python bench/int8_models.py [--models resnet50 mobilenet_v2] [--threads 1 2] [--rounds 7]

msv0's int8 file comes from msv0.quantize (min/max calibration, per-channel weights); the ONNX
Runtime and OpenVINO int8 models are the same network's ONNX twin quantized by
onnxruntime.quantization.quantize_static (QDQ, per-channel, the same calibration samples).
Each engine lives in its own process (OpenVINO pins and keeps threads, which slowed msv0 by a
third in a shared process) and runs a block of runs, then the next engine, with a 1 s pause
between blocks (spinning workers would otherwise steal the next engine's cores); medians over
all runs are printed with the ratio to the best peer.
"""
from __future__ import annotations

import argparse
import importlib.util
import multiprocessing as mp
import os
import statistics
import tempfile
import time

import numpy as np

import msv0
from msv0 import zoo
from msv0.quantize import quantize, snr_db

CALIBRATION_SAMPLES = 8


def ort_int8(onnx_model, calib: np.ndarray, dst: str) -> None:
    """The ONNX model quantized by ONNX Runtime's quantize_static (QDQ, per-channel) into dst."""
    import onnx
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


def _engine(kind: str, name: str, threads: int, tmp: str):
    """One engine's run function, built in its own process."""
    net, calib, x = _inputs(name)
    if kind.startswith("msv0"):
        fp32 = net.to_ms()
        msv0._core.set_amx(kind != "msv0 int8 no-amx")
        session = msv0.Session(fp32 if kind == "msv0 fp32" else quantize(fp32, {"input": calib}), num_threads=threads)
        return lambda: session.run([x])
    onnx_int8 = os.path.join(tmp, f"{name}_int8.onnx")
    x_nchw = {"input": np.ascontiguousarray(x.transpose(0, 3, 1, 2))}
    if kind == "onnxruntime int8":
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        sess = ort.InferenceSession(onnx_int8, opts, providers=["CPUExecutionProvider"])
        return lambda: sess.run(None, x_nchw)
    import openvino as ov

    compiled = ov.Core().compile_model(onnx_int8, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                                          "PERFORMANCE_HINT": "LATENCY"})
    request = compiled.create_infer_request()
    return lambda: request.infer(x_nchw)


def _worker(conn, kind: str, name: str, threads: int, tmp: str) -> None:
    run = _engine(kind, name, threads, tmp)
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


def measure(kinds: list[str], name: str, threads: int, tmp: str, rounds: int, block: int) -> dict[str, float]:
    """Median latency per engine, each in its own process (no engine's threads or pinning touch
    another's), in alternating blocks with a pause between them."""
    ctx = mp.get_context("spawn")
    workers = {}
    for kind in kinds:
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_worker, args=(child, kind, name, threads, tmp))
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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["resnet50", "mobilenet_v2"])
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--block", type=int, default=5)
    args = p.parse_args()
    print(f"isa {msv0.isa()}")
    kinds = ["msv0 int8", "msv0 fp32", "onnxruntime int8"]
    if msv0._core.gemm_s8_tile() == (32, 32):  # the int8 GEMM takes its AMX slot: time the VNNI one too
        kinds.insert(1, "msv0 int8 no-amx")
    if importlib.util.find_spec("openvino") is not None:
        kinds.append("openvino int8")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            net, calib, x = _inputs(name)
            fp32 = net.to_ms()
            snr = snr_db(msv0.Session(fp32).run([x])["logits"],
                         msv0.Session(quantize(fp32, {"input": calib})).run([x])["logits"])
            print(f"{name}: msv0 int8 against fp32: SNR {snr:.1f} dB")
            ort_int8(net.to_onnx(), calib, os.path.join(tmp, f"{name}_int8.onnx"))
            for threads in args.threads:
                medians = measure(kinds, name, threads, tmp, args.rounds, args.block)
                peers = {k: v for k, v in medians.items() if not k.startswith("msv0")}
                best = min(peers, key=peers.get)
                print(f"{name} {threads}t: " + "  ".join(f"{k} {v * 1e3:.2f} ms" for k, v in medians.items()))
                print(f"    msv0 int8 / {best}: {medians['msv0 int8'] / peers[best]:.3f}   "
                      f"msv0 fp32 / msv0 int8: {medians['msv0 fp32'] / medians['msv0 int8']:.2f}x")
                if "msv0 int8 no-amx" in medians:
                    print(f"    msv0 int8 no-amx / msv0 int8: {medians['msv0 int8 no-amx'] / medians['msv0 int8']:.2f}x")


if __name__ == "__main__":
    main()
