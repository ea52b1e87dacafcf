"""Perf history: compare the newest saved benchmark run with the runs before it.

    python -m pytest bench/bench_models.py --benchmark-enable      # saved under .benchmarks/
    python bench/track.py [--threshold 0.1] [--window 5] [--plot ratio.svg]

bench/conftest.py saves every enabled benchmark run (pytest-benchmark's autosave: one JSON per
run, named by commit, with machine and commit info). Absolute times drift between machines
and with load, so a run is judged by the ratio msv0 / peer of each benchmark group, each peer
(ONNX Runtime, LiteRT) measured in the same run on the same machine (extra_info "engine").
The newest ratio of a group is compared with the median of its last --window ratios before it;
a rise over --threshold is a regression and the exit status is 1. --plot draws every group's ratio
over the runs (PNG or SVG by the file name; needs matplotlib: pip install 'msv0[track]').
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ENGINE = "msv0"


@dataclass
class Run:
    path: Path
    when: str
    commit: str  # short id, '+' when the tree had uncommitted changes
    machine: str
    ratios: dict[str, float]  # "group vs peer" -> median msv0 / median peer


def ratios_of(benchmarks: list[dict]) -> dict[str, float]:
    """msv0 / peer median latency for each group that holds msv0 and a peer."""
    groups: dict[str, dict[str, float]] = {}
    for b in benchmarks:
        engine = (b.get("extra_info") or {}).get("engine")
        if engine is not None and b.get("stats"):
            groups.setdefault(b.get("group") or b["name"], {})[engine] = b["stats"]["median"]
    out = {}
    for group, medians in groups.items():
        for peer, t in medians.items():
            if peer != ENGINE and ENGINE in medians and t > 0:
                out[f"{group} vs {peer}"] = medians[ENGINE] / t
    return out


def load_runs(storage: Path) -> list[Run]:
    """Every saved run under `storage`, oldest first (by the run's own datetime)."""
    runs = []
    for path in sorted(storage.rglob("*.json")):
        try:
            data = json.loads(path.read_text())
            commit = data.get("commit_info") or {}
            machine = data.get("machine_info") or {}
            run = Run(path, data["datetime"], (commit.get("id") or "?")[:8] + ("+" if commit.get("dirty") else ""),
                      f"{machine.get('node', '?')} {(machine.get('cpu') or {}).get('brand_raw', '')}".strip(),
                      ratios_of(data["benchmarks"]))
        except (ValueError, KeyError, TypeError) as e:
            print(f"track: skipping {path}: not a pytest-benchmark run ({e})", file=sys.stderr)
            continue
        if run.ratios:
            runs.append(run)
    return sorted(runs, key=lambda r: r.when)


@dataclass
class Verdict:
    key: str
    baseline: float | None  # median ratio of the runs before the newest; None: no history
    newest: float

    def change(self) -> float | None:
        return None if self.baseline is None else self.newest / self.baseline - 1


def judge(runs: list[Run], window: int) -> list[Verdict]:
    newest, before = runs[-1], runs[:-1]
    verdicts = []
    for key, ratio in sorted(newest.ratios.items()):
        history = [r.ratios[key] for r in before if key in r.ratios][-window:]
        verdicts.append(Verdict(key, statistics.median(history) if history else None, ratio))
    return verdicts


def plot(runs: list[Run], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(runs) + 3), 4.5))
    for key in sorted({k for r in runs for k in r.ratios}):
        xs = [i for i, r in enumerate(runs) if key in r.ratios]
        ax.plot(xs, [runs[i].ratios[key] for i in xs], marker="o", label=key)
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_xticks(range(len(runs)), [r.commit for r in runs], rotation=45, ha="right", fontsize=8)
    ax.set_xlabel("run (commit)")
    ax.set_ylabel(f"median latency {ENGINE} / peer (lower is better)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--storage", type=Path, default=Path(".benchmarks"), help="pytest-benchmark storage folder")
    p.add_argument("--threshold", type=float, default=0.10, help="relative rise of the ratio that is a regression")
    p.add_argument("--window", type=int, default=5, help="earlier runs the newest is compared with")
    p.add_argument("--plot", type=Path, metavar="OUT.png|OUT.svg", help="draw the ratios over the runs")
    args = p.parse_args(argv)
    runs = load_runs(args.storage)
    if not runs:
        print(f"track: no saved run with msv0 and a peer under {args.storage}", file=sys.stderr)
        return 2
    newest = runs[-1]
    print(f"newest run: {newest.commit} {newest.when} on {newest.machine} ({newest.path.name}); "
          f"{len(runs) - 1} earlier run(s)")
    regressions = 0
    print(f"{'benchmark':36s} {'baseline':>9s} {'newest':>8s} {'change':>8s}")
    for v in judge(runs, args.window):
        change = v.change()
        if change is None:
            status, base, delta = "no history", "-", "-"
        else:
            status = "REGRESSION" if change > args.threshold else "ok"
            base, delta = f"{v.baseline:.3f}", f"{change:+.1%}"
            regressions += status == "REGRESSION"
        print(f"{v.key:36s} {base:>9s} {v.newest:8.3f} {delta:>8s}  {status}")
    if args.plot:
        plot(runs, args.plot)
        print(f"plot written to {args.plot}")
    if regressions:
        print(f"{regressions} regression(s) over {args.threshold:.0%}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
