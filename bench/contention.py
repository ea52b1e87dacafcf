"""msv0 at 1 and 2 threads, alone and beside a busy-loop process pinned on one core: the
transformer encoder (bench/transformer_encoder.py, L4 d256 S128) and the zoo's MobileNetV2.

For each thread-pool spin time (MSV0_SPIN_US, read when a pool is made) and thread count a
Session is built up front; then blocks alternate: in each block the busy loop is paused
(SIGSTOP) or running, and every Session does --runs runs. Medians of wall time per run over
all blocks, and of the process CPU time per run (a spinning worker shows there). The machine's
load average is printed beside the table, since other processes share the cores.

    python bench/contention.py [--spin-us 0 50 200 1000] [--blocks 8] [--runs 10] [--models encoder mobilenet_v2]
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx

import msv0
from msv0 import zoo
from msv0.convert import convert

sys.path.insert(0, str(Path(__file__).parent))
from transformer_encoder import encoder  # noqa: E402

BUSY = "import os; os.sched_setaffinity(0, {0}); exec('while True: pass')"


def model(name: str, tmp: str) -> tuple[bytes | str, np.ndarray]:
    rng = np.random.default_rng(1)
    if name == "encoder":
        onnx_path, ms_path = f"{tmp}/encoder.onnx", f"{tmp}/encoder.ms"
        onnx.save(encoder(4, 256, 4, 128, 1024), onnx_path)
        convert(onnx_path, ms_path)
        return ms_path, rng.standard_normal((1, 128, 256)).astype(np.float32)
    net = zoo.NETS[name]()
    return net.to_ms(), rng.standard_normal(net.input_shape).astype(np.float32)


def session(source, threads: int, spin_us: int | None) -> msv0.Session:
    if spin_us is None:
        os.environ.pop("MSV0_SPIN_US", None)
    else:
        os.environ["MSV0_SPIN_US"] = str(spin_us)
    return msv0.Session(source, num_threads=threads)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["encoder", "mobilenet_v2"])
    p.add_argument("--spin-us", nargs="+", type=int, default=None, help="MSV0_SPIN_US values (default: unset)")
    p.add_argument("--threads", nargs="+", type=int, default=[1, 2])
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--runs", type=int, default=10, help="runs per Session per block")
    a = p.parse_args()
    spins = a.spin_us or [None]
    busy = subprocess.Popen([sys.executable, "-c", BUSY])
    os.kill(busy.pid, signal.SIGSTOP)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            configs = {}
            for name in a.models:
                source, x = model(name, tmp)
                for spin in spins:
                    for threads in a.threads:
                        s = session(source, threads, spin)
                        s.run([x])
                        configs[name, spin, threads] = (s, x)
            os.environ.pop("MSV0_SPIN_US", None)
            for (name, spin, _), (s, x) in configs.items():
                ref, xr = configs[name, spins[0], a.threads[0]]
                assert np.array_equal(next(iter(s.run([x]).values())), next(iter(ref.run([xr]).values()))), \
                    f"{name}: results differ across thread counts"
            wall = {(c, load): [] for c in configs for load in ("alone", "busy")}
            cpu = {k: [] for k in wall}
            loads = [os.getloadavg()[0]]
            for block in range(2 * a.blocks):
                load = ("alone", "busy")[block % 2]
                os.kill(busy.pid, signal.SIGCONT if load == "busy" else signal.SIGSTOP)
                time.sleep(0.2)
                for c, (s, x) in configs.items():
                    for _ in range(a.runs):
                        w, t = time.perf_counter(), time.process_time()
                        s.run([x])
                        cpu[c, load].append(time.process_time() - t)
                        wall[c, load].append(time.perf_counter() - w)
                loads.append(os.getloadavg()[0])
    finally:
        busy.kill()
        busy.wait()
    print(f"load average (1 min) during the run: {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores; "
          f"busy loop pinned on core 0; {2 * a.blocks} alternating blocks × {a.runs} runs; ms")
    print("| model | MSV0_SPIN_US | threads | alone wall | alone CPU | busy wall | busy CPU | busy / 1-thread busy |")
    print("|---|---|---|---|---|---|---|---|")
    med = {k: float(np.median(v)) * 1e3 for k, v in wall.items()}
    for (name, spin, threads) in configs:
        c = (name, spin, threads)
        one = med[(name, spin, a.threads[0]), "busy"]
        print(f"| {name} | {'default' if spin is None else spin} | {threads} | {med[c, 'alone']:.2f} | "
              f"{float(np.median(cpu[c, 'alone'])) * 1e3:.2f} | {med[c, 'busy']:.2f} | "
              f"{float(np.median(cpu[c, 'busy'])) * 1e3:.2f} | {med[c, 'busy'] / one:.2f} |")


if __name__ == "__main__":
    main()
