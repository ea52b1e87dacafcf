"""bf16 against fp32: msv0 Session(precision="bf16") against the default fp32 Session on the zoo
networks (random weights, batch 1), timed in alternating blocks, with bf16's relative error.

    python bench/bf16_models.py [--models mobilenet_v2 resnet50] [--threads 1 2] [--rounds 9] [--runs 8]

Both Sessions live in one process and take turns: a block of runs of one, then of the other, so
a co-running load on the shared machine slows both alike. Per run it records wall time and the
calling thread's CPU time (at 1 thread all the work is on that thread, and a descheduled run is
not charged); the medians over all blocks are printed, with the speed-up fp32 / bf16 by each.
At 2 threads only wall time measures the run. Relative error: max |bf16 - fp32| / max |fp32|
over the logits, and the L2 norm of the difference over that of fp32.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import msv0
from msv0 import _core, zoo


def timed_block(session, x, runs: int, wall: list, cpu: list) -> None:
    for _ in range(runs):
        w, c = time.perf_counter(), time.thread_time()
        session.run([x])
        cpu.append(time.thread_time() - c)
        wall.append(time.perf_counter() - w)


def bench(model: bytes, threads: int, rounds: int, runs: int) -> dict:
    sessions = {p: msv0.Session(model, num_threads=threads, precision=p) for p in ("fp32", "bf16")}
    x = np.random.default_rng(1).standard_normal(sessions["fp32"].inputs[0].shape).astype(np.float32)
    (ref,), (got,) = (s.run([x]).values() for s in sessions.values())
    diff = got.astype(np.float64) - ref
    out = {"max_rel": float(np.abs(diff).max() / np.abs(ref).max()),
           "l2_rel": float(np.linalg.norm(diff) / np.linalg.norm(ref))}
    times = {p: ([], []) for p in sessions}
    for s in sessions.values():  # warm-up: first-touch of arenas and packed weights
        s.run([x])
    for _ in range(rounds):
        for p, s in sessions.items():
            timed_block(s, x, runs, *times[p])
    for p, (wall, cpu) in times.items():
        out[p] = (statistics.median(wall) * 1e3, statistics.median(cpu) * 1e3)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["mobilenet_v2", "resnet50"], choices=sorted(zoo.NETS))
    ap.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--runs", type=int, default=8)
    args = ap.parse_args()
    if not _core.bf16_available():
        raise SystemExit("no AVX512-BF16 on the avx512vnni tier here: precision='bf16' would run fp32")
    print(f"isa {msv0.isa()}; {args.rounds} blocks of {args.runs} runs per precision; times in ms (median)")
    print("| model | threads | fp32 wall | bf16 wall | speed-up | fp32 cpu | bf16 cpu | speed-up | max rel err "
          "| L2 rel err |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.models:
        model = zoo.NETS[name]().to_ms()
        for t in args.threads:
            r = bench(model, t, args.rounds, args.runs)
            (fw, fc), (bw, bc) = r["fp32"], r["bf16"]
            cpu = f"{fc:.2f} | {bc:.2f} | {fc / bc:.2f}" if t == 1 else "– | – | –"
            print(f"| {name} | {t} | {fw:.2f} | {bw:.2f} | {fw / bw:.2f} | {cpu} | {r['max_rel']:.1e} | "
                  f"{r['l2_rel']:.1e} |", flush=True)


if __name__ == "__main__":
    main()
