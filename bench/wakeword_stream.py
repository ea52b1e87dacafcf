"""pymicro-wakeword's streaming int8 TFLite models, one 10 ms frame a call with the state fed
back, as a wake-word loop runs them: msv0 against LiteRT (default resolver, XNNPACK) in the same
process, alternating blocks of calls with a pause between blocks, medians in microseconds.

    python bench/wakeword_stream.py [--models okay_nabu hey_jarvis] [--blocks 5] [--calls 300]

LiteRT keeps the states in its resource variables; msv0's converted model takes them as inputs
(defaults: their initial values) and returns them as `<name>/next` outputs.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
import zipfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import msv0  # noqa: E402
from msv0.convert import convert  # noqa: E402

import realmodels as rm  # noqa: E402

MODELS = ("okay_nabu", "hey_jarvis", "alexa", "hey_mycroft")


def engines(name: str):
    from ai_edge_litert.interpreter import Interpreter

    data = zipfile.ZipFile(rm.wheel_path("micro_wakeword")).read(f"pymicro_wakeword/models/{name}.tflite")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        it = Interpreter(model_content=data)
    it.allocate_tensors()
    x, y = it.get_input_details()[0], it.get_output_details()[0]
    frame = np.random.default_rng(0).integers(-128, 128, x["shape"], dtype=np.int8)

    def litert():
        it.set_tensor(x["index"], frame)
        it.invoke()
        return it.get_tensor(y["index"])

    model = msv0.load(convert(data))
    session, state = msv0.Session(model), {}

    def ours():
        out = session.run({x["name"]: frame, **state})
        state.update((k, out[k + "/next"]) for k in model.input_defaults)
        return out[y["name"]]

    return {"litert": litert, "msv0": ours}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--calls", type=int, default=300, help="calls per block")
    args = ap.parse_args()
    for name in args.models:
        try:
            runs = engines(name)
        except rm.Unavailable as e:
            print(f"{name}: skipped ({e})")
            continue
        for run in runs.values():
            for _ in range(50):
                run()
        times = {k: [] for k in runs}
        for _ in range(args.blocks):
            for k, run in runs.items():
                for _ in range(args.calls):
                    t = time.perf_counter()
                    run()
                    times[k].append(time.perf_counter() - t)
                time.sleep(0.1)
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        print(f"{name}: msv0 {med['msv0']:.1f} us, LiteRT {med['litert']:.1f} us; msv0 / LiteRT "
              f"{med['msv0'] / med['litert']:.2f}", flush=True)


if __name__ == "__main__":
    main()
