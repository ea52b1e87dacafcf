"""Real ONNX models (tests/realmodels.py) quantized with onnxruntime's own tools, converted by
msv0 and run against ONNX Runtime on the quantized file: what a user with a quantized model sees.

    python bench/quantized_real.py [--models ocr_det_ppocrv4 magika_v3_3] [--formats qdq qop dynamic]
                                   [--time [--threads 1 2] [--rounds 5]]

qdq and qop: `quantize_static` (QDQ, or QOperator with uint8 activations), per-channel int8
weights, calibrated on --samples copies of the model's test input with 10 % noise; dynamic:
`quantize_dynamic` (int8 weights). Printed per output: the SNR against the float model (run by
ONNX Runtime) of ONNX Runtime's int8 result and of msv0's, and msv0's against ONNX Runtime's.
With so little calibration data some models are far from fp32 in both runtimes; what tells a
conversion bug is msv0 far from ONNX Runtime where ONNX Runtime is near fp32. Models that
onnxruntime's quantizer or msv0 cannot take are listed with the error. Each model and format runs
in a process of its own: onnxruntime aborts the process on some quantized graphs (an assertion in
its QOperator session for silero-vad).

--time measures speed instead: msv0 on the quantized file and on the float one, ONNX Runtime and
OpenVINO (when installed; inference precision f32, so that it runs the file's int8) on the
quantized file, at each thread count, in alternating blocks of runs with a pause between blocks;
medians in ms, msv0 int8's speed-up over its fp32, and its ratio to the faster peer.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import functools
import multiprocessing
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402

import realmodels as rm  # noqa: E402

FORMATS = ("qdq", "qop", "dynamic")


def snr_db(ref: np.ndarray, x: np.ndarray) -> float:
    ref = np.asarray(ref, np.float64)
    noise = float(np.sum((np.asarray(x, np.float64) - ref) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref**2)) / noise)


def quantized(src: str, dst: str, fmt: str, feeds: dict[str, np.ndarray], samples: int) -> None:
    from onnxruntime import quantization as q

    if fmt == "dynamic":
        q.quantize_dynamic(src, dst, weight_type=q.QuantType.QInt8)
        return
    rng = np.random.default_rng(0)
    batches = [{k: (v * (1 + 0.1 * rng.standard_normal(v.shape))).astype(v.dtype) if v.dtype.kind == "f" else v
                for k, v in feeds.items()} for _ in range(samples)]

    class Reader(q.CalibrationDataReader):
        def get_next(self):
            return batches.pop() if batches else None

    q.quantize_static(src, dst, Reader(), quant_format=q.QuantFormat.QDQ if fmt == "qdq" else q.QuantFormat.QOperator,
                      per_channel=True, activation_type=q.QuantType.QInt8 if fmt == "qdq" else q.QuantType.QUInt8,
                      weight_type=q.QuantType.QInt8)


def quantize_source(m: rm.RealModel, fmt: str, samples: int, tmp: str) -> tuple[bytes, dict, str]:
    """The model's float bytes, its feeds and the path in tmp of its quantized form (raising
    where onnxruntime's quantizer fails)."""
    data, feeds = rm.source_bytes(m)
    src, dst = os.path.join(tmp, "float.onnx"), os.path.join(tmp, "quantized.onnx")
    with open(src, "wb") as f:
        f.write(data)
    quantized(src, dst, fmt, feeds, samples)
    return data, feeds, dst


def check(name: str, fmt: str, samples: int) -> list[str]:
    import onnxruntime as ort

    m = rm.BY_NAME[name]
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    with tempfile.TemporaryDirectory() as tmp:
        try:
            data, feeds, dst = quantize_source(m, fmt, samples, tmp)
            q = ort.InferenceSession(dst, opts, providers=["CPUExecutionProvider"])
        except Exception as e:  # onnxruntime's quantizer fails on some graphs
            return [f"{m.name:28s} {fmt:8s} onnxruntime cannot quantize it: {type(e).__name__}"]
        with open(dst, "rb") as f:
            qdata = f.read()
    names = [o.name for o in q.get_outputs()]
    want = dict(zip(names, q.run(None, feeds)))
    ref = dict(zip(names, ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"]).run(None, feeds)))
    try:
        session = msv0.Session(convert(qdata))
        got = rm.from_msv0_outputs(m, session.run(rm.to_msv0_feeds(m, feeds)))
    except msv0.Error as e:
        return [f"{m.name:28s} {fmt:8s} msv0: {type(e).__name__}: {str(e).splitlines()[0]}"]
    return [f"{m.name:28s} {fmt:8s} {k[:24]:24s} {snr_db(ref[k], want[k]):8.1f} {snr_db(ref[k], got[k]):8.1f} "
            f"{snr_db(want[k], got[k]):8.1f}" for k in names if want[k].dtype.kind == "f"]


def timing(name: str, fmt: str, samples: int, threads: list[int], rounds: int) -> list[str]:
    import onnxruntime as ort
    from bench_real import block

    m = rm.BY_NAME[name]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            data, feeds, dst = quantize_source(m, fmt, samples, tmp)
        except Exception as e:
            return [f"{m.name:28s} {fmt:8s} onnxruntime cannot quantize it: {type(e).__name__}"]
        with open(dst, "rb") as f:
            qdata = f.read()
        ms_feeds = rm.to_msv0_feeds(m, feeds)
        engines = {}
        for t in threads:
            int8, fp32 = msv0.Session(convert(qdata), num_threads=t), msv0.Session(convert(data), num_threads=t)
            engines[t, "msv0 int8"] = lambda s=int8: s.run(ms_feeds)
            engines[t, "msv0 fp32"] = lambda s=fp32: s.run(ms_feeds)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads, opts.inter_op_num_threads, opts.log_severity_level = t, 1, 3
            peer = ort.InferenceSession(qdata, opts, providers=["CPUExecutionProvider"])
            engines[t, "onnxruntime"] = lambda p=peer: p.run(None, feeds)
            try:
                import openvino as ov

                compiled = ov.Core().compile_model(dst, "CPU", {"INFERENCE_NUM_THREADS": t,
                                                                "INFERENCE_PRECISION_HINT": "f32"})
                request = compiled.create_infer_request()
                engines[t, "openvino"] = lambda r=request: r.infer(feeds)
            except (ImportError, RuntimeError):  # not installed, or it cannot compile the graph
                pass
    for run in engines.values():
        run()
    once = min(min(w for w, _ in block(run, 3)) for run in engines.values())
    runs = max(3, int(0.3 / max(once, 1e-5)))
    times = {k: [] for k in engines}
    for _ in range(rounds):
        for k, run in engines.items():
            times[k] += [w for w, _ in block(run, runs)]
            time.sleep(0.2)
    lines = []
    for t in threads:
        med = {e: statistics.median(v) * 1e3 for (u, e), v in times.items() if u == t}
        best = min(v for e, v in med.items() if not e.startswith("msv0"))
        lines.append(f"{m.name:28s} {fmt:8s} {t}t  " + "  ".join(f"{e} {v:.3f}" for e, v in med.items())
                     + f"  | int8 speed-up {med['msv0 fp32'] / med['msv0 int8']:.2f}x, msv0 / best peer "
                     f"{med['msv0 int8'] / best:.2f}")
    return lines


def main() -> None:
    onnx_models = [m.name for m in rm.MODELS if m.kind == "onnx"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=onnx_models, choices=onnx_models)
    ap.add_argument("--formats", nargs="*", default=list(FORMATS), choices=FORMATS)
    ap.add_argument("--samples", type=int, default=8, help="calibration samples for quantize_static")
    ap.add_argument("--time", action="store_true", help="measure speed (ms) instead of accuracy")
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5, help="--time: blocks of runs per engine")
    args = ap.parse_args()
    if args.time:
        task = functools.partial(timing, threads=args.threads, rounds=args.rounds)
    else:
        task = check
        print(f"{'model':28s} {'format':8s} {'output':24s} {'ORT dB':>8s} {'msv0 dB':>8s} {'vs ORT':>8s}"
              "   (SNR against fp32, and msv0 against ONNX Runtime)")
    spawn = multiprocessing.get_context("spawn")
    for name in args.models:
        for fmt in args.formats:
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as child:
                try:
                    lines = child.submit(task, name, fmt, args.samples).result()
                except rm.Unavailable as e:
                    lines = [f"{name:28s} skipped ({e})"]
                except concurrent.futures.process.BrokenProcessPool:
                    lines = [f"{name:28s} {fmt:8s} the process died (onnxruntime aborted it)"]
            print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
