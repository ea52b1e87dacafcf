"""A BERT-style encoder (L layers, d_model D, H heads, sequence S, FFN F; tanh- or erf-GELU, post-norm)
built as ONNX with onnx.helper, converted with msv0.convert, and timed against ONNX Runtime (and
OpenVINO when installed) in the same process: alternating blocks of runs per engine with a pause
between blocks, medians of wall time and of process CPU time (every thread's, so at 1 thread it
is the run's own work and stays comparable while other jobs share the cores), 1 and 2 threads.

    python bench/transformer_encoder.py [--layers 4] [--d 256] [--heads 4] [--seq 128] [--gelu tanh|erf]
                                        [--dynamic-quant] [--runs 10] [--blocks 6]

--gelu erf writes GELU as torch.onnx does nn.GELU() before opset 20: 0.5·x·(1 + Erf(x/√2)).
--dynamic-quant times the encoder after onnxruntime.quantization.quantize_dynamic (int8 weights,
activations quantized per run), as every engine then runs it.
"""
import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper as oh, numpy_helper

import msv0
from msv0.convert import convert


def encoder(layers: int, d: int, heads: int, seq: int, ffn: int, seed: int = 0, gelu_form: str = "tanh") -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes, inits, count = [], [], [0]

    def name(kind):
        count[0] += 1
        return f"{kind}{count[0]}"

    def const(value, kind="c"):
        n = name(kind)
        inits.append(numpy_helper.from_array(np.asarray(value, np.float32 if np.asarray(value).dtype.kind == "f"
                                                        else np.int64), n))
        return n

    def node(op, ins, **attrs):
        out = name(op.lower())
        nodes.append(oh.make_node(op, ins, [out], **attrs))
        return out

    def linear(x, n_in, n_out):
        w = const(rng.standard_normal((n_in, n_out)) / np.sqrt(n_in), "w")
        return node("Add", [node("MatMul", [x, w]), const(rng.standard_normal(n_out) * 0.02, "b")])

    def layer_norm(x):
        return node("LayerNormalization", [x, const(1 + 0.1 * rng.standard_normal(d), "g"),
                                           const(0.1 * rng.standard_normal(d), "beta")], axis=-1, epsilon=1e-5)

    def split_heads(x):  # [1, S, D] -> [1, H, S, D/H]
        return node("Transpose", [node("Reshape", [x, const([1, seq, heads, d // heads], "shape")])], perm=[0, 2, 1, 3])

    def gelu(x):
        if gelu_form == "erf":
            e = node("Erf", [node("Div", [x, const(np.sqrt(2))])])
            return node("Mul", [node("Mul", [x, node("Add", [e, const(1.0)])]), const(0.5)])
        inner = node("Add", [x, node("Mul", [node("Mul", [node("Mul", [x, x]), x]), const(0.044715)])])
        t = node("Tanh", [node("Mul", [inner, const(np.sqrt(2 / np.pi))])])
        return node("Mul", [node("Mul", [x, const(0.5)]), node("Add", [t, const(1.0)])])

    x = "x"
    for _ in range(layers):
        q, k, v = (split_heads(linear(x, d, d)) for _ in range(3))
        scores = node("Mul", [node("MatMul", [q, node("Transpose", [k], perm=[0, 1, 3, 2])]),
                              const(1 / np.sqrt(d // heads))])
        ctx = node("Transpose", [node("MatMul", [node("Softmax", [scores], axis=-1), v])], perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, const([1, seq, d], "shape")])
        x = layer_norm(node("Add", [x, linear(ctx, d, d)]))
        x = layer_norm(node("Add", [x, linear(gelu(linear(x, d, ffn)), ffn, d)]))
    graph = oh.make_graph(nodes, "encoder", [oh.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, d])],
                          [oh.make_tensor_value_info(x, TensorProto.FLOAT, [1, seq, d])], inits)
    model = oh.make_model(graph, opset_imports=[oh.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def engines(onnx_path: str, ms_path: str, threads: int):
    import onnxruntime as ort

    session = msv0.Session(ms_path, num_threads=threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    ort_session = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
    runs = {"msv0": lambda x: session.run([x]), "onnxruntime": lambda x: ort_session.run(None, {"x": x})}
    try:
        import openvino as ov
    except ImportError:
        return runs
    compiled = ov.Core().compile_model(onnx_path, "CPU", {"INFERENCE_NUM_THREADS": threads,
                                                          "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    runs["openvino"] = lambda x: request.infer({0: x})
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--d", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--gelu", choices=["tanh", "erf"], default="tanh")
    p.add_argument("--dynamic-quant", action="store_true")
    p.add_argument("--runs", type=int, default=10, help="runs per block")
    p.add_argument("--blocks", type=int, default=6)
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path, ms_path = str(Path(tmp) / "encoder.onnx"), str(Path(tmp) / "encoder.ms")
        onnx.save(encoder(a.layers, a.d, a.heads, a.seq, 4 * a.d, gelu_form=a.gelu), onnx_path)
        if a.dynamic_quant:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            quantize_dynamic(onnx_path, onnx_path, weight_type=QuantType.QInt8)
        convert(onnx_path, ms_path)
        x = np.random.default_rng(1).standard_normal((1, a.seq, a.d)).astype(np.float32)
        for threads in (1, 2):
            runs = engines(onnx_path, ms_path, threads)
            want = runs["onnxruntime"](x)[0]
            got = next(iter(runs["msv0"](x).values()))
            err = float(np.abs(got - want).max() / np.abs(want).max())
            times = {name: [] for name in runs}
            cpu = {name: [] for name in runs}
            for _ in range(a.blocks):
                for name, run in runs.items():
                    run(x)
                    for _ in range(a.runs):
                        t, c = time.perf_counter(), time.process_time()
                        run(x)
                        times[name].append(time.perf_counter() - t)
                        cpu[name].append(time.process_time() - c)
                    time.sleep(0.5)
            for what, samples in (("wall", times), ("CPU", cpu)):
                med = {name: float(np.median(t)) * 1e3 for name, t in samples.items()}
                best = min((name for name in med if name != "msv0"), key=med.get)
                peers = ", ".join(f"{name} {ms:.2f} ms" for name, ms in med.items() if name != "msv0")
                print(f"encoder L{a.layers} d{a.d} S{a.seq}, {threads} thread(s), {what}: msv0 {med['msv0']:.2f} ms, "
                      f"{peers}; msv0 / {best} {med['msv0'] / med[best]:.2f} "
                      f"(max |diff| / max |y| vs ONNX Runtime {err:.1e})")


if __name__ == "__main__":
    main()
