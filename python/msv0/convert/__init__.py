"""msv0.convert: ONNX and TFLite models -> MindSpore Lite v0 .ms files, written the way r1.1's converter did.

    from msv0.convert import convert
    data = convert("model.onnx", "model.ms", batch=1)

4-D inputs and outputs are NHWC (dims rewritten; keep_nchw_input keeps the inputs NCHW), weights
KHWC, BatchNormalization folded into convolutions, Relu/Clip(0,6) fused, constants folded.
Every node that cannot be expressed is listed in one UnsupportedOpError before anything is
written. Needs the optional `onnx` package (ONNX) or `tflite` package (TFLite: float32 graphs,
fp16 weights folded, see tflite_frontend.py for the operator list; full-integer int8 and uint8
graphs, see tflite_quant.py).
"""
from __future__ import annotations

import os
import sys

from msv0.errors import ModelError, UnsupportedOpError


def convert(src, dst=None, *, keep_nchw_input=False, batch=None, input_shapes=None, input_values=None) -> bytes:
    """Convert `src` (a .onnx or .tflite path, or bytes) to v0; write it to `dst` when given; return
    the bytes. batch sets every input's dynamic first dimension, input_shapes ({name: shape}) the
    whole shape of the inputs it names (dynamic dims and the sizes the model fixes); for TFLite,
    LiteRT recomputes the shapes that follow. ONNX only: input_values ({name: value}) makes the
    inputs it names constants (a sample rate, a threshold) that fold."""
    is_bytes = isinstance(src, (bytes, bytearray))
    path = "" if is_bytes else os.fspath(src)
    if path.endswith(".tflite") or is_bytes and bytes(src[4:8]) == b"TFL3":
        from msv0.convert.tflite_quant import convert_tflite
        data = convert_tflite(src, input_shapes, batch)  # already NHWC: keep_nchw_input, input_values do not apply
    else:
        from msv0.convert.onnx_quant import convert_onnx
        data = convert_onnx(src, keep_nchw_input=keep_nchw_input, batch=batch, input_shapes=input_shapes,
                            input_values=input_values)
    if dst is not None:
        with open(dst, "wb") as f:
            f.write(data)
    return data


def add_cli(subparsers) -> None:
    """Register `msv0 convert in.onnx -o out.ms [--batch N] [--shape NAME=D0,D1,...] [--value NAME=V0,V1,...]
    [--keep-nchw]`."""
    p = subparsers.add_parser("convert", help="convert an ONNX or TFLite model to a v0 .ms file")
    p.add_argument("src", help="input model (.onnx or .tflite)")
    p.add_argument("-o", "--output", help="output .ms path (default: input name with .ms)")
    p.add_argument("--batch", type=int, default=None, help="value for a dynamic batch dimension")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D0,D1,...",
                   help="the shape of input NAME (its dynamic dims pinned); repeat for several inputs")
    p.add_argument("--value", action="append", default=[], metavar="NAME=V0,V1,...",
                   help="make input NAME a constant with these values (a sample rate, a threshold); repeatable")
    p.add_argument("--keep-nchw", action="store_true", help="keep 4-D inputs NCHW (a Transpose is inserted)")
    p.set_defaults(func=_run_cli)


def _named_lists(items: list[str], flag: str, kind) -> dict[str, tuple]:
    """{NAME: (v0, v1, ...)} from NAME=V0,V1,... arguments."""
    out = {}
    for item in items:
        name, sep, values = item.rpartition("=")
        try:
            out[name] = tuple(kind(v) for v in values.split(","))
        except ValueError:
            name = sep = ""
        if not sep or not name:
            raise ModelError(f"{flag} {item}: expected NAME=V0,V1,... with {kind.__name__} values")
    return out


def _run_cli(args) -> int:
    dst = args.output or os.path.splitext(args.src)[0] + ".ms"
    try:
        data = convert(args.src, dst, keep_nchw_input=args.keep_nchw, batch=args.batch,
                       input_shapes=_named_lists(args.shape, "--shape", int),
                       input_values={k: v[0] if len(v) == 1 else v for k, v in _named_lists(args.value, "--value", float).items()})
    except UnsupportedOpError as err:  # one line per node, for logs; the CLI prints errors on one line
        for name, op, why in err.nodes:
            print(f"{name}: {op} ({why})", file=sys.stderr)
        raise UnsupportedOpError(str(err).splitlines()[0].rstrip(":") + " (listed above)", err.nodes) from None
    print(f"wrote {dst} ({len(data)} bytes)")
    return 0
