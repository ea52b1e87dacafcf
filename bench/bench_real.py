"""Real pretrained models (tests/realmodels.py: MediaPipe .tflite, OCR / detector / classifier
.onnx from PyPI wheels): msv0 against the model's own runtime in the same process.

    python bench/bench_real.py [--models face_landmark ocr_det_ppocrv4] [--threads 1 2]
                               [--rounds 7] [--block-s 0.25] [--profile]

Each model is converted once; the models that do not convert yet are listed with the reason.
The peers run as an application gets them: LiteRT with its default op resolver (XNNPACK
delegate included) for .tflite, ONNX Runtime's CPU provider (intra-op threads = N, sequential)
for .onnx. Per model, the engines at each thread count alternate in blocks of runs (each engine in
its own blocks, a pause between blocks so that one engine's spinning workers do not steal the
next one's cores). Each model is measured in a fresh process: threads an earlier model's peer
left behind made later models read slower at 2 threads than at 1 in a shared one. Each engine's
median over all its runs is printed, with the ratio
msv0 / peer and the geomean of the ratios per thread count. At 1 thread every engine runs in the
calling thread, so the median thread-CPU time is printed too: on a shared machine it moves far
less than wall time.

--profile adds, per model, where msv0's time goes at 1 thread: each planned step run alone (one
native Program per native step, so the split between native steps and NumPy steps is visible),
median thread-CPU time per step, summed per op and per kind (native / NumPy). A model that runs
as data flow is timed by Session.profile instead (wall time of each step in a whole run).
"""
from __future__ import annotations

import argparse
import collections
import concurrent.futures
import math
import multiprocessing
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

import msv0  # noqa: E402
from msv0 import _core  # noqa: E402
from msv0.convert import convert  # noqa: E402
from msv0.planner import allocate  # noqa: E402
from msv0.session import step_label, step_op  # noqa: E402

import realmodels as rm  # noqa: E402
from machine import round_trip_line  # noqa: E402


def prepare(m: rm.RealModel):
    """(.ms bytes, source bytes, source feeds, msv0 feeds) or the reason it cannot run."""
    data, feeds = rm.source_bytes(m)
    try:
        ms = convert(data)
    except msv0.Error as e:
        lines = str(e).splitlines()
        return "does not convert: " + " ".join(x.strip() for x in lines[:3]) + (" ..." if len(lines) > 3 else "")
    return ms, data, feeds, rm.to_msv0_feeds(m, feeds)


def block(run, runs: int) -> list[tuple[float, float]]:
    """(wall, calling thread's CPU) seconds of each run."""
    out = []
    for _ in range(runs):
        w, c = time.perf_counter(), time.thread_time()
        run()
        out.append((time.perf_counter() - w, time.thread_time() - c))
    return out


def compare(m: rm.RealModel, prepared, threads: list[int], rounds: int, block_s: float, pause: float):
    """{threads: {engine: (median wall s, median thread-CPU s)}}. Every round runs a block of each
    engine at each thread count, so that the thread counts, like the engines, are measured
    alternately: this VM's speed moves by up to 1.5x from one second to the next, which made a
    model measured at 2 threads seconds after 1 thread read faster or slower by as much."""
    ms, data, feeds, ms_feeds = prepared
    engines = {}
    for t in threads:
        session = msv0.Session(msv0.load(ms), num_threads=t)
        peer = rm.SourceRuntime(m, data, t, reference=False)
        engines[t, "msv0"] = lambda s=session: s.run(ms_feeds)
        engines[t, "peer"] = lambda p=peer: p.run(feeds)
    for run in engines.values():  # warm-up, and a first estimate of a run's time
        run()
    once = min(min(w for w, _ in block(run, 3)) for run in engines.values())
    runs_per_block = max(3, int(block_s / max(once, 1e-5)))
    times = {k: [] for k in engines}
    for _ in range(rounds):
        for k, run in engines.items():
            times[k] += block(run, runs_per_block)
            time.sleep(pause)
    result = {t: {} for t in threads}
    for (t, engine), v in times.items():
        result[t][engine] = (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
    return result


def profile(ms: bytes, ms_feeds: dict[str, np.ndarray], repeats: int = 20):
    """[(label, op, kind, median CPU seconds)] of every planned step of msv0's 1-thread plan,
    each run alone (a native step in a Program of its own)."""
    session = msv0.Session(msv0.load(ms), num_threads=1)
    session.run(ms_feeds)  # plans
    model = session.model
    if not session._prepared:  # data flow: its regions' native steps and the nodes run alone, as profiled
        runs = [session.profile(ms_feeds)[1] for _ in range(repeats)]
        return [(step_label(model, t.nodes), t.op, "NumPy" if t.program is None else "native",
                 statistics.median(r[j].seconds for r in runs)) for j, t in enumerate(runs[0])]
    (prepared,) = session._prepared.values()
    values, planned, views = prepared.values, prepared.steps, prepared.views
    buffers, _ = allocate(values, [(i, o) for _, _, i, o in planned], model.graph_inputs, model.graph_outputs,
                          session.memory_limit, views)
    for k, t in zip(model.graph_inputs, session.inputs):
        np.copyto(buffers[k], ms_feeds[t.name])

    def array(k):
        return values[k].const if values[k].const is not None else buffers[k]

    rows = []
    pool = _core.ThreadPool(1)
    pool.bind()
    try:
        for nodes, plan, ins, outs in planned:
            if plan.views and all(k in views for k in outs):
                continue
            in_arrays, out_arrays = [array(k) for k in ins], [buffers[k] for k in outs]
            if plan.kernel is not None:
                program = _core.Program()
                program.add(plan.kernel, [np.require(a, requirements="C") for a in in_arrays[:plan.kernel_inputs]],
                            out_arrays)
                run, kind = program.run, "native"
            else:
                run, kind = (lambda r=plan.run, i=in_arrays, o=out_arrays: r(i, o)), "NumPy"
            t = []
            for _ in range(repeats):  # one thread: the step's CPU time is its time
                s = time.thread_time()
                run()
                t.append(time.thread_time() - s)
            rows.append((step_label(model, nodes), step_op(model, nodes), kind, statistics.median(t)))
    finally:
        _core.ThreadPool.unbind()
    return rows


def print_profile(name: str, rows) -> None:
    total = sum(r[3] for r in rows)
    by_kind = collections.Counter()
    by_op = collections.defaultdict(lambda: [0, 0.0])
    for _, op, kind, t in rows:
        by_kind[kind] += t
        by_op[(op, kind)][0] += 1
        by_op[(op, kind)][1] += t
    split = ", ".join(f"{k} {v * 1e3:.2f} ms ({100 * v / total:.0f}%)" for k, v in by_kind.most_common())
    print(f"\n{name}: steps run alone sum to {total * 1e3:.2f} ms: {split}")
    print(f"  {'op':24s} {'where':7s} {'n':>4s} {'ms':>8s} {'%':>5s}")
    for (op, kind), (n, t) in sorted(by_op.items(), key=lambda kv: -kv[1][1]):
        if t / total >= 0.01:
            print(f"  {op:24s} {kind:7s} {n:4d} {t * 1e3:8.3f} {100 * t / total:5.1f}")


def measure(name: str, threads: list[int], rounds: int, block_s: float, pause: float):
    """{threads: compare()} for one model, or the reason it cannot run (in its own process)."""
    m = rm.BY_NAME[name]
    try:
        p = prepare(m)
    except rm.Unavailable as e:
        return f"skipped ({e})"
    return p if isinstance(p, str) else compare(m, p, threads, rounds, block_s, pause)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="*", default=[m.name for m in rm.MODELS], choices=list(rm.BY_NAME))
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=7, help="blocks per engine")
    ap.add_argument("--block-s", type=float, default=0.25, help="about how long one block runs")
    ap.add_argument("--pause", type=float, default=0.2, help="seconds between blocks")
    ap.add_argument("--profile", action="store_true", help="also print where msv0's time goes, per model")
    args = ap.parse_args()

    import ai_edge_litert
    import onnxruntime

    print(f"msv0 {msv0.__version__} ISA {msv0.isa()}; LiteRT {ai_edge_litert.__version__} (default resolver, "
          f"XNNPACK); ONNX Runtime {onnxruntime.__version__} (CPU); {os.cpu_count()} CPUs")
    print(round_trip_line())
    print("\nwall: median latency; cpu: median CPU time of the calling thread, which at 1 thread is "
          "the whole run for every engine and less disturbed by other load on the machine")
    print(f"\n{'model':30s} {'peer':6s} {'thr':>3s} {'msv0 ms':>8s} {'peer ms':>8s} {'ratio':>6s} "
          f"{'msv0 cpu':>8s} {'peer cpu':>8s} {'ratio':>6s}")
    ratios, ran = collections.defaultdict(list), []
    spawn = multiprocessing.get_context("spawn")
    for name in args.models:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=spawn) as child:
            result = child.submit(measure, name, args.threads, args.rounds, args.block_s, args.pause).result()
        if isinstance(result, str):
            print(f"{name}: {result}", flush=True)
            continue
        ran.append(name)
        m = rm.BY_NAME[name]
        for threads, med in result.items():
            (mw, mc), (pw, pc) = med["msv0"], med["peer"]
            ratios[threads, "wall"].append(mw / pw)
            line = f"{name:30s} {'litert' if m.kind == 'tflite' else 'ort':6s} {threads:3d} {mw * 1e3:8.3f} " \
                   f"{pw * 1e3:8.3f} {mw / pw:6.2f}"
            if threads == 1:
                ratios[threads, "cpu"].append(mc / pc)
                line += f" {mc * 1e3:8.3f} {pc * 1e3:8.3f} {mc / pc:6.2f}"
            print(line, flush=True)
    for (threads, what), r in sorted(ratios.items()):
        geo = math.exp(sum(math.log(x) for x in r) / len(r))
        print(f"{threads} thread(s), {what}: geomean msv0 / peer {geo:.2f} over {len(r)} models, worst {max(r):.2f}")
    print(round_trip_line() + " (after)")
    if args.profile:
        for name in ran:
            ms, _, _, ms_feeds = prepare(rm.BY_NAME[name])
            print_profile(name, profile(ms, ms_feeds))


if __name__ == "__main__":
    main()
