"""The `msv0` command line: info, run, demo, bench, ops, quantize, and convert (with msv0.convert).

Every msv0.Error (and an unreadable file) ends the command with a one-line message on stderr
and exit status 2, without a traceback.
"""
from __future__ import annotations

import argparse
import collections
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np

import msv0
from msv0.fb.Format import Format
from msv0.fb.QuantType import QuantType
from msv0.progress import bar, progress
from msv0.session import PRECISIONS, PlanInfo

EXIT_ERROR = 2
README_BEGIN, README_END = "<!-- ops:begin -->", "<!-- ops:end -->"


def _names(enum: type) -> dict[int, str]:
    """Number -> name of a generated msv0.fb enum class."""
    return {v: k for k, v in vars(enum).items() if not k.startswith("_")}


QUANT_TYPES = _names(QuantType)
FORMATS = _names(Format)


class CliError(msv0.Error):
    """A usage problem found after argument parsing (bad --input spec, missing feeds)."""


# ---- output helpers --------------------------------------------------------------------------
def table(headers: Sequence[str], rows: Sequence[Sequence], out=None) -> None:
    """Print rows as a plain aligned table."""
    out = out or sys.stdout
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = "  ".join("-" * w for w in widths)
    for k, r in enumerate(cells):
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip(), file=out)
        if k == 0:
            print(line, file=out)


def _shape(s) -> str:
    return "[" + ", ".join(str(d) for d in s) + "]"


def _fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f}"


# ---- feeds -----------------------------------------------------------------------------------
def random_feed(shape, dtype, rng: np.random.Generator) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -128), min(info.max, 127) + 1, shape).astype(dtype)


def collect_feeds(model: msv0.Model, inputs: Sequence[str], npz: str | None, random: bool,
                  seed: int = 0) -> dict[str, np.ndarray]:
    feeds: dict[str, np.ndarray] = {}
    if npz:
        with np.load(npz) as f:
            feeds.update({k: f[k] for k in f.files})
    for spec in inputs or ():
        name, sep, path = spec.partition("=")
        if not sep:
            raise CliError(f"--input expects name=file.npy, got {spec!r}")
        feeds[name] = np.load(path)
    rng = np.random.default_rng(seed)
    missing = [t for t in model.inputs if t.name not in feeds and t.name not in model.input_defaults]
    if missing and not random:
        raise CliError(f"no feed for input(s) {[t.name for t in missing]}: use --input, --inputs or --random")
    for t in missing:
        feeds[t.name] = random_feed(t.shape, t.dtype, rng)
    return feeds


# ---- subcommands -----------------------------------------------------------------------------
def cmd_info(args) -> None:
    m = msv0.load(args.model)
    print(f"model: {args.model}  name: {m.name!r}  version: {m.version!r}")
    print(f"{len(m.nodes)} nodes, {len(m.tensors)} tensors, {len(m.subgraphs)} subgraph(s)\n")
    for title, infos in (("inputs", m.inputs), ("outputs", m.outputs)):
        print(f"{title}:")
        table(["name", "shape", "dtype", "format"],
              [(t.name, _shape(t.shape), t.dtype, FORMATS.get(t.format, t.format)) for t in infos])
        if title == "inputs" and m.input_defaults:
            print(f"with a default that a run takes when not fed: {', '.join(m.input_defaults)}")
        print()
    hist = collections.Counter(n.op for n in m.nodes)
    supported = set(msv0.supported_ops())
    print("ops:")
    table(["op", "count", "supported"], [(op, c, "yes" if op in supported else "NO") for op, c in hist.most_common()])
    consts = [t for t in m.tensors if t.is_const]
    params = sum(int(np.prod(t.shape, dtype=np.int64)) for t in consts)
    nbytes = sum(t.raw.size for t in consts)
    print(f"\nparameters: {params:,} in {len(consts)} constant tensors ({nbytes / 2**20:.2f} MiB)")
    qt = collections.Counter(QUANT_TYPES.get(n.quant_type, str(n.quant_type)) for n in m.nodes)
    quantized = [t for t in m.tensors if t.quant]
    per_channel = sum(1 for t in quantized if len(t.quant) > 1)
    dtypes = collections.Counter(str(t.dtype) for t in consts)
    print("\nquantization:")
    table(["what", "value"], [
        ("node quantType", ", ".join(f"{k} x{v}" for k, v in qt.most_common()) or "-"),
        ("tensors with quant params", f"{len(quantized)} ({per_channel} per-channel)"),
        ("constant dtypes", ", ".join(f"{k} x{v}" for k, v in dtypes.most_common()) or "-"),
    ])
    info_graph(args, m)


def info_graph(args, model: msv0.Model) -> None:
    """info --graph: the picture of the graph (SVG, or HTML with pan and zoom), coloured by
    per-node time from a `bench --trace` file when --times gives one."""
    if not args.graph:
        if args.times:
            raise CliError("--times needs --graph")
        return
    from msv0 import graph_picture, profile

    suffix = Path(args.graph).suffix.lower()
    if suffix not in (".svg", ".html"):
        raise CliError(f"--graph writes .svg or .html, not {args.graph!r}")
    seconds = profile.node_seconds(args.times, model) if args.times else None
    try:
        info = msv0.Session(model).plan_info
    except msv0.Error as e:  # a model msv0 cannot plan is still drawn, as the file has it
        print(f"msv0: the graph is drawn without a plan: {' '.join(str(e).split())}", file=sys.stderr)
        info = PlanInfo([], {})
    draw = graph_picture.svg if suffix == ".svg" else graph_picture.html
    Path(args.graph).write_text(draw(model, info, seconds))
    print(f"\ngraph picture written to {args.graph}")


def cmd_run(args) -> None:
    m = msv0.load(args.model)
    feeds = collect_feeds(m, args.input, args.inputs, args.random, args.seed)
    session = msv0.Session(m, num_threads=args.threads, precision=args.precision)
    start = time.perf_counter()
    outs = session.run(feeds)
    elapsed = time.perf_counter() - start
    rows = []
    for name, a in outs.items():
        stats = (f"{a.min():.6g}", f"{a.max():.6g}", f"{a.mean():.6g}") if a.size and a.dtype.kind in "fiub" else ("-",) * 3
        rows.append((name, _shape(a.shape), a.dtype, *stats))
    table(["output", "shape", "dtype", "min", "max", "mean"], rows)
    print(f"\nrun: {_fmt_ms(elapsed)} ms ({args.threads} thread(s), {session.precision})")
    if args.output:
        np.savez(args.output, **outs)
        print(f"outputs written to {args.output}")


def cmd_demo(args) -> None:
    from msv0 import zoo

    out_dir = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="msv0-demo-"))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "mobilenet_tiny.ms"
    t0 = time.perf_counter()
    path.write_bytes(zoo.mobilenet_tiny())
    t1 = time.perf_counter()
    model = msv0.load(path)
    t2 = time.perf_counter()
    session = msv0.Session(model, num_threads=args.threads)
    t3 = time.perf_counter()
    info = model.inputs[0]
    x = np.random.default_rng(0).standard_normal(info.shape).astype(np.float32)
    (name, y), = session.run({info.name: x}).items()
    runs = []
    for _ in range(args.runs):
        s = time.perf_counter()
        session.run({info.name: x})
        runs.append(time.perf_counter() - s)
    print(f"msv0 {msv0.__version__}, ISA {msv0.isa()}, {args.threads} thread(s)")
    print(f"built {path} ({path.stat().st_size:,} bytes, {len(model.nodes)} nodes) in {_fmt_ms(t1 - t0)} ms")
    print(f"input  {info.name} {_shape(info.shape)} {info.dtype}")
    print(f"output {name} {_shape(y.shape)} {y.dtype}")
    flat = y.reshape(-1)
    top = np.argsort(-flat)[:5]
    print("top-5: " + ", ".join(f"#{i}={flat[i]:.4f}" for i in top))
    table(["step", "ms"], [("load", _fmt_ms(t2 - t1)), ("session (plan + pack)", _fmt_ms(t3 - t2)),
                           (f"run (median of {len(runs)})", _fmt_ms(float(np.median(runs))))])


def _timings(fn, warmup: int, runs: int, label: str) -> np.ndarray:
    times = []
    for i in progress(range(warmup + runs), warmup + runs, label):
        s = time.perf_counter()
        fn()
        if i >= warmup:
            times.append(time.perf_counter() - s)
    return np.array(times)


def _fits(shape, want) -> bool:
    """Whether an array of `shape` fits an ONNX input declared `want` (named dims fit any size)."""
    return len(shape) == len(want) and all(not isinstance(w, int) or w == s for s, w in zip(shape, want))


def _onnx_feeds(sess, ms_inputs: list[msv0.TensorInfo], feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Match the ONNX model's inputs to the msv0 feeds by position, NHWC -> NCHW where needed."""
    ort_inputs = sess.get_inputs()
    if len(ort_inputs) != len(ms_inputs):
        raise CliError(f"the ONNX model has {len(ort_inputs)} inputs, the .ms model {len(ms_inputs)}")
    out = {}
    for oi, mi in zip(ort_inputs, ms_inputs):
        a = feeds[mi.name]
        want = tuple(oi.shape)
        if a.ndim == 4 and not _fits(a.shape, want) and _fits(a.transpose(0, 3, 1, 2).shape, want):
            a = np.ascontiguousarray(a.transpose(0, 3, 1, 2))
        if not _fits(a.shape, want):
            raise CliError(f"ONNX input '{oi.name}' is declared {list(want)}; the feed is {list(a.shape)}")
        out[oi.name] = a
    return out


def _onnxruntime_runner(path: str, threads: int, ms_inputs: list[msv0.TensorInfo], feeds: dict[str, np.ndarray]):
    try:
        import onnxruntime as ort
    except ImportError:
        raise CliError("--compare-onnx needs onnxruntime: pip install onnxruntime") from None
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    ort_feeds = _onnx_feeds(sess, ms_inputs, feeds)
    return lambda: sess.run(None, ort_feeds)


def litert_interpreter(model: str | bytes, threads: int, shapes: dict[str, tuple[int, ...]]):
    """LiteRT as an application gets it (default op resolver, XNNPACK delegate included) on a
    .tflite file (its path, or its bytes), allocated for the shapes fed to the .ms model's inputs
    (input name -> shape, in the .ms model's order). bench/zoo_models.py builds its peer with it."""
    try:
        from ai_edge_litert.interpreter import Interpreter
    except ImportError:
        raise CliError("--compare-tflite needs ai-edge-litert: pip install ai-edge-litert") from None
    source = {"model_content": model} if isinstance(model, bytes) else {"model_path": model}
    it = Interpreter(**source, num_threads=threads)
    details = it.get_input_details()
    if len(details) != len(shapes):
        raise CliError(f"the TFLite model has {len(details)} inputs, the .ms model {len(shapes)}")
    for d, (name, have) in zip(details, shapes.items()):  # by position: the converter keeps their order and layout
        want = tuple(int(s) for s in d["shape"])
        if have != want and (len(have) != len(want) or have[1:] != want[1:]):
            raise CliError(f"TFLite input '{d['name']}' has shape {list(want)}, the .ms input '{name}' {list(have)}")
        if have != want:  # another batch: LiteRT resizes its input
            it.resize_tensor_input(d["index"], list(have))
    it.allocate_tensors()
    return it


def _litert_runner(path: str, threads: int, ms_inputs: list[msv0.TensorInfo], feeds: dict[str, np.ndarray]):
    it = litert_interpreter(path, threads, {mi.name: feeds[mi.name].shape for mi in ms_inputs})
    details = it.get_input_details()

    def run():
        for d, mi in zip(details, ms_inputs):
            it.set_tensor(d["index"], feeds[mi.name])
        it.invoke()
    return run


PEERS = {"compare_onnx": ("onnxruntime", _onnxruntime_runner), "compare_tflite": ("litert", _litert_runner)}


def _batched(feeds: dict[str, np.ndarray], n: int) -> dict[str, np.ndarray]:
    """bench --batch: each feed with n samples along its first axis (a one-sample feed repeated)."""
    if n < 1:
        raise CliError(f"--batch must be at least 1, got {n}")
    out = {}
    for name, a in feeds.items():
        if a.ndim == 0 or a.shape[0] not in (1, n):
            raise CliError(f"--batch {n}: input '{name}' has shape {list(a.shape)}; its first dim must be 1 or {n}")
        out[name] = np.ascontiguousarray(np.repeat(a, n, axis=0)) if a.shape[0] != n else a
    return out


def cmd_bench(args) -> None:
    import resource

    t0 = time.perf_counter()
    m = msv0.load(args.model)
    t1 = time.perf_counter()
    feeds = collect_feeds(m, args.input, args.inputs, True, args.seed)
    if args.batch is not None:
        feeds = _batched(feeds, args.batch)
    t2 = time.perf_counter()
    session = msv0.Session(m, num_threads=args.threads, precision=args.precision)
    t3 = time.perf_counter()
    session.run(feeds)
    t4 = time.perf_counter()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    peers = [(label, make(getattr(args, opt), args.threads, m.inputs, feeds))
             for opt, (label, make) in PEERS.items() if getattr(args, opt)]
    results = [("msv0", _timings(lambda: session.run(feeds), args.warmup, args.runs, "msv0"))]
    results += [(label, _timings(run, args.warmup, args.runs, label)) for label, run in peers]
    print(f"{args.model}: {args.threads} thread(s), {args.warmup} warm-up, {args.runs} runs, ISA {msv0.isa()}, "
          f"precision {session.precision}")
    print(f"cold start: load {_fmt_ms(t1 - t0)} ms, Session {_fmt_ms(t3 - t2)} ms, "
          f"first run {_fmt_ms(t4 - t3)} ms; peak RSS {rss_mib:.0f} MiB (before any peer)")
    rows = []
    for name, t in results:
        p50, p90, p99 = np.percentile(t, [50, 90, 99])
        rows.append((name, _fmt_ms(p50), _fmt_ms(p90), _fmt_ms(p99), _fmt_ms(t.mean()))
                    + ((f"{args.batch / p50:.1f}",) if args.batch else ()))
    table(["engine", "p50 ms", "p90 ms", "p99 ms", "mean ms"] + (["samples/s"] if args.batch else []), rows)
    for name, t in results[1:]:
        print(f"\nmsv0 / {name} (p50): {np.median(results[0][1]) / np.median(t):.3f}x")
    bench_profile(args, m, session, feeds)


def bench_profile(args, model: msv0.Model, session: msv0.Session, feeds: dict[str, np.ndarray]) -> None:
    """bench --profile / --trace: --runs more runs, each step timed (Session.profile)."""
    if not (args.profile or args.trace):
        return
    from msv0 import profile

    runs = [session.profile(feeds)[1] for _ in progress(range(args.runs), args.runs, "profiling")]
    if args.profile:
        print(f"\ntime per op type (mean of {args.runs} profiled runs):")
        table(["op", "steps", "ms", "%"], [(op, n, f"{ms:.3f}", f"{pct:.1f}") for op, n, ms, pct in profile.op_table(runs)])
    if args.trace:
        profile.write_trace(args.trace, model, runs)
        print(f"\nChrome trace written to {args.trace} (open in chrome://tracing or ui.perfetto.dev)")


def _op_note(name: str) -> str:
    """The first sentence of the op's build-function docstring, as a table cell."""
    from msv0.registry import OPS

    doc = " ".join((OPS[name].build.__doc__ or "").split())
    note = doc.split(". ")[0].rstrip(".")
    return note.replace("|", "\\|")


def ops_markdown() -> str:
    """The supported-ops table of README.md, generated from msv0.supported_ops()."""
    from msv0.registry import CONTROL

    lines = ["| op | fp32 | int8 | notes |", "|---|---|---|---|"]
    int8 = set(msv0.supported_ops(int8=True))
    for name in msv0.supported_ops():
        fp32 = "yes (data flow)" if name in CONTROL else "yes"
        lines.append(f"| `{name}` | {fp32} | {'yes' if name in int8 else '–'} | {_op_note(name)} |")
    return "\n".join(lines)


def update_readme(path: Path) -> bool:
    """Rewrite the table between the ops markers of README.md; True if it changed."""
    text = path.read_text()
    head, sep, rest = text.partition(README_BEGIN)
    _, sep2, tail = rest.partition(README_END)
    if not sep or not sep2:
        raise CliError(f"{path} has no {README_BEGIN} ... {README_END} block")
    new = f"{head}{README_BEGIN}\n{ops_markdown()}\n{README_END}{tail}"
    path.write_text(new)
    return new != text


def cmd_ops(args) -> None:
    if args.update_readme:
        changed = update_readme(Path(args.update_readme))
        print(f"{args.update_readme}: {'updated' if changed else 'already current'}")
    elif args.markdown:
        print(ops_markdown())
    else:
        for name in msv0.supported_ops():
            print(name)


def calibration_data(args, m: msv0.Model) -> dict[str, np.ndarray]:
    """quantize's samples: from --calib (an .npz, or a directory of images for a model with one
    input), --random, or, for --weights-only, --check random ones for the SNR report alone."""
    if args.calib and Path(args.calib).is_dir():
        from msv0.calib_images import image_samples

        if len(m.inputs) != 1:
            raise CliError(f"a directory of images calibrates a model with one input, this one has {len(m.inputs)}")
        t = m.inputs[0]
        layout = args.layout or ("nchw" if FORMATS.get(t.format) == "NCHW" else "nhwc")
        return {t.name: image_samples(args.calib, t.shape, layout, args.mean, args.std)}
    if args.calib:
        with np.load(args.calib) as data:
            return {k: data[k] for k in data.files}
    count = args.random or (args.check if args.weights_only else 0)
    if not count:
        raise CliError("post-training quantization needs --calib or --random")
    rng = np.random.default_rng(args.seed)
    return {t.name: np.stack([random_feed(t.shape, t.dtype, rng) for _ in range(count)]) for t in m.inputs}


def cmd_quantize(args) -> None:
    from msv0.quantize import layer_snr, quantize, samples, snr_db

    m = msv0.load(args.model)
    calib = calibration_data(args, m)
    if args.weights_only:
        out = quantize(m, weights_only=True, bits=args.bits, kmeans=args.kmeans)
    else:
        total = len(next(iter(calib.values()))) if calib else 0
        with bar(total * (1 if args.calib_method == "minmax" else 2), "calibrating") as b:
            out = quantize(m, calib, num_threads=args.threads, on_sample=lambda k: b.update(k - b.n),
                           method=args.calib_method, percentile=args.percentile, bits=args.bits, kmeans=args.kmeans)
    Path(args.output).write_bytes(out)
    size = Path(args.model).stat().st_size
    print(f"{args.output}: {len(out):,} bytes, {size / len(out):.2f}x smaller than {args.model} ({size:,} bytes)")
    fp32, quantized = msv0.Session(m, num_threads=args.threads), msv0.Session(out, num_threads=args.threads)
    rows = []
    feeds = list(samples(m, calib))[:args.check]
    ref, got = [fp32.run(f) for f in feeds], [quantized.run(f) for f in feeds]
    for t in m.outputs:
        snr = snr_db(np.concatenate([r[t.name].ravel() for r in ref]), np.concatenate([g[t.name].ravel() for g in got]))
        rows.append((t.name, f"{snr:.1f}"))
    what = f"{args.bits}-bit{' k-means' if args.kmeans else ''} weights" if args.weights_only else "int8"
    print(f"\n{what} against fp32 on {len(feeds)} {'calibration' if args.calib else 'random'} sample(s):")
    table(["output", "SNR dB"], rows)
    if args.weights_only:
        return
    layers = layer_snr(m, out, feeds, args.threads)
    if layers:
        print(f"\nper layer, the {min(args.layers, len(layers))} of {len(layers)} int8 layers that hurt most:")
        table(["node", "op", "SNR dB"], [(n, op, f"{v:.1f}") for n, op, v in layers[:args.layers]])


def cmd_reserved(args) -> None:
    raise CliError(f"'{args.command}' is not available in this build of msv0")


# ---- parser ----------------------------------------------------------------------------------
def _feed_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="feed one input from a .npy file")
    p.add_argument("--inputs", metavar="FEEDS.npz", help="feed inputs from an .npz file (keys = input names)")
    p.add_argument("--seed", type=int, default=0, help="seed for random feeds")


def _threads(p: argparse.ArgumentParser, default: int | None = 1) -> None:
    p.add_argument("--threads", "-t", type=int, default=default, required=default is None,
                   help="number of threads")


def _precision(p: argparse.ArgumentParser) -> None:
    p.add_argument("--precision", choices=PRECISIONS, default="fp32",
                   help="bf16 (AVX512-BF16) or fp16 (ARMv8.2-A FP16) for the GEMM-based float kernels; "
                        "fp32 with a warning where the CPU lacks it")


def _graph_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--graph", metavar="OUT.svg|OUT.html", help="draw the graph (HTML: with pan and zoom)")
    p.add_argument("--times", metavar="TRACE.json", help="colour the nodes by time from `msv0 bench --trace`")


def _profile_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", action="store_true", help="print the time per op type")
    p.add_argument("--trace", metavar="OUT.json", help="write a Chrome trace of the profiled runs")


def _floats(text: str) -> list[float]:
    try:
        return [float(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="msv0", description="Run MindSpore Lite v0 (.ms) models on the CPU.")
    parser.add_argument("--version", action="version", version=f"msv0 {msv0.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("info", help="inputs, outputs, op histogram, parameters, quantization")
    p.add_argument("model")
    _graph_args(p)
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("run", help="run a model on feeds from .npy/.npz files or random data")
    p.add_argument("model")
    _feed_args(p)
    p.add_argument("--random", action="store_true", help="random data for inputs without a feed")
    p.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs to an .npz file")
    _threads(p)
    _precision(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("demo", help="build a small MobileNet, save, load and run it")
    _threads(p)
    p.add_argument("--out", metavar="DIR", help="where to write the model (default: a temporary folder)")
    p.add_argument("--runs", type=int, default=20, help="timed runs")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("bench", help="latency percentiles, optionally next to ONNX Runtime or LiteRT")
    p.add_argument("model")
    _threads(p, default=None)
    _precision(p)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--compare-onnx", metavar="MODEL.onnx", help="also time this ONNX model with onnxruntime")
    p.add_argument("--batch", type=int, metavar="N",
                   help="N samples per run (each input's first dim; the Session plans that shape once) and samples/s")
    _profile_args(p)
    p.add_argument("--compare-tflite", metavar="MODEL.tflite", help="also time this TFLite model with LiteRT")
    _feed_args(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("ops", help="list the supported ops")
    p.add_argument("--markdown", action="store_true", help="as the README's markdown table")
    p.add_argument("--update-readme", metavar="README.md", help="rewrite the table in this README")
    p.set_defaults(func=cmd_ops)

    # `convert` comes from msv0.convert when that package exports add_cli(subparsers).
    add_cli = None
    if importlib.util.find_spec("msv0.convert") is not None:
        add_cli = getattr(importlib.import_module("msv0.convert"), "add_cli", None)
    if add_cli is not None:
        add_cli(sub)
    else:
        sub.add_parser("convert", help="(not available)").set_defaults(func=cmd_reserved)
    p = sub.add_parser("quantize", help="post-training int8 quantization (min/max, KL or percentile calibration), "
                                        "or weight-only compression")
    p.add_argument("model")
    p.add_argument("-o", "--output", required=True, metavar="OUT.ms")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--calib", metavar="DATA.npz|DIR", help="calibration samples: one [K, *shape] array per input "
                                                            "name, or a directory of PNG/JPEG images")
    src.add_argument("--random", type=int, metavar="K", help="calibrate on K random samples")
    p.add_argument("--layout", choices=["nhwc", "nchw"], help="images: the input's layout (default: its format)")
    p.add_argument("--mean", type=_floats, default=[0.0], metavar="M[,M,...]",
                   help="images: subtracted from pixels in [0, 255], one value or one per channel")
    p.add_argument("--std", type=_floats, default=[1.0], metavar="S[,S,...]", help="images: then divided by")
    p.add_argument("--weights-only", action="store_true",
                   help="compress the weights alone (r1.1 WeightQuant); activations stay float")
    p.add_argument("--bits", type=int, default=8, metavar="N", help="--weights-only: bits per weight, 2 to 16")
    p.add_argument("--kmeans", action="store_true", help="--weights-only: 2^N clustered values per tensor (N <= 8)")
    p.add_argument("--seed", type=int, default=0, help="seed for random samples")
    p.add_argument("--check", type=int, default=4, metavar="K", help="samples for the SNR report")
    p.add_argument("--calib-method", choices=["minmax", "kl", "percentile"], default="minmax",
                   help="activation ranges: observed min/max, or clipped by KL divergence or a percentile of |x|")
    p.add_argument("--percentile", type=float, default=99.99, help="share of |x| kept by --calib-method percentile")
    p.add_argument("--layers", type=int, default=10, metavar="N", help="rows of the per-layer SNR table")
    _threads(p)
    p.set_defaults(func=cmd_quantize)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "threads", None) is not None and args.threads < 1:
        print("msv0: error: --threads must be at least 1", file=sys.stderr)
        return EXIT_ERROR
    try:
        args.func(args)
    except msv0.Error as e:
        print(f"msv0: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_ERROR
    except OSError as e:
        print(f"msv0: error: {e.strerror or e}: {e.filename or ''}".rstrip(": "), file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
