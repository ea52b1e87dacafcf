"""Real ONNX models (tests/realmodels.py) quantized with onnxruntime's own tools, converted by
msv0 and run against ONNX Runtime on the quantized file: what a user with a quantized model sees.

    python bench/quantized_real.py [--models ocr_det_ppocrv4 magika_v3_3] [--formats qdq qop dynamic]

qdq and qop: `quantize_static` (QDQ, or QOperator with uint8 activations), per-channel int8
weights, calibrated on --samples copies of the model's test input with 10 % noise; dynamic:
`quantize_dynamic` (int8 weights). Printed per output: the SNR against the float model (run by
ONNX Runtime) of ONNX Runtime's int8 result and of msv0's, and msv0's against ONNX Runtime's.
With so little calibration data some models are far from fp32 in both runtimes; what tells a
conversion bug is msv0 far from ONNX Runtime where ONNX Runtime is near fp32. Models that
onnxruntime's quantizer or msv0 cannot take are listed with the error. Each model and format runs
in a process of its own: onnxruntime aborts the process on some quantized graphs (an assertion in
its QOperator session for silero-vad).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import sys
import tempfile

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


def check(name: str, fmt: str, samples: int) -> list[str]:
    import onnxruntime as ort

    m = rm.BY_NAME[name]
    data, feeds = rm.source_bytes(m)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "float.onnx"), os.path.join(tmp, "quantized.onnx")
        with open(src, "wb") as f:
            f.write(data)
        try:
            quantized(src, dst, fmt, feeds, samples)
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


def main() -> None:
    onnx_models = [m.name for m in rm.MODELS if m.kind == "onnx"]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=onnx_models, choices=onnx_models)
    ap.add_argument("--formats", nargs="*", default=list(FORMATS), choices=FORMATS)
    ap.add_argument("--samples", type=int, default=8, help="calibration samples for quantize_static")
    args = ap.parse_args()
    print(f"{'model':28s} {'format':8s} {'output':24s} {'ORT dB':>8s} {'msv0 dB':>8s} {'vs ORT':>8s}"
          "   (SNR against fp32, and msv0 against ONNX Runtime)")
    spawn = multiprocessing.get_context("spawn")
    for name in args.models:
        for fmt in args.formats:
            with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as child:
                try:
                    lines = child.submit(check, name, fmt, args.samples).result()
                except rm.Unavailable as e:
                    lines = [f"{name:28s} skipped ({e})"]
                except concurrent.futures.process.BrokenProcessPool:
                    lines = [f"{name:28s} {fmt:8s} the process died (onnxruntime aborted it)"]
            print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
