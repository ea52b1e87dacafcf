"""Writes small .tflite files with the `tflite` package's generated FlatBuffers builder functions.

    w = TFLiteWriter()
    x = w.input("x", [1, 8, 8, 3])
    y = w.op("CONV_2D", [x, w.const(weight), w.const(bias)], [1, 8, 8, 4],
             "Conv2DOptions", padding=0, stride_h=1, stride_w=1, fused_activation_function=1)
    w.output(y)
    data = w.finish()
Options are given by their schema field names (snake_case); list values become int vectors,
str values strings. `subgraph()` starts another subgraph (CALL_ONCE, WHILE, IF bodies); `use(k)`
goes back to subgraph k. Quantized tensors take `quant=(scales, zero_points, quantized_dimension)`
(per tensor: one scale). `variable()` makes a tensor with is_variable set, as the recurrent ops'
state inputs must be (LiteRT zero-initialises one without data).
"""
from __future__ import annotations

import functools
import importlib

import flatbuffers
import numpy as np

RESOURCE = 13  # TensorType.RESOURCE, as a dtype argument
TYPES = {np.dtype(np.float32): 0, np.dtype(np.float16): 1, np.dtype(np.int32): 2, np.dtype(np.uint8): 3,
         np.dtype(np.int64): 4, np.dtype(np.bool_): 6, np.dtype(np.int16): 7, np.dtype(np.complex64): 8,
         np.dtype(np.int8): 9}


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _mod(name):
    return importlib.import_module(f"tflite.{name}")


class TFLiteWriter:
    def __init__(self):
        self.buffers = [b""]  # buffer 0: the empty sentinel
        self.codes: list[tuple[int, str | None]] = []  # (builtin code, custom code)
        self.graphs = []
        self.variables: set[tuple[int, int]] = set()  # (subgraph, tensor) with is_variable set
        self.signatures: dict[tuple[int, int], list[int]] = {}  # (subgraph, tensor) -> shape_signature
        self.subgraph()

    def subgraph(self) -> int:
        """Start a new subgraph and write into it; returns its index."""
        # tensors: (name, shape, type, buffer index, sparsity or None, quant or None);
        # ops: (opcode index, inputs, outputs, options name, options dict or custom bytes)
        self.graphs.append(([], [], [], []))
        return self.use(len(self.graphs) - 1)

    def use(self, k: int) -> int:
        self.tensors, self.ops, self.inputs, self.outputs = self.graphs[k]
        self.current = k
        return k

    def _tensor(self, name, shape, dtype, data=b"", sparsity=None, quant=None) -> int:
        buf = 0
        if data:
            self.buffers.append(data)
            buf = len(self.buffers) - 1
        typ = RESOURCE if dtype is RESOURCE else TYPES[np.dtype(dtype)]
        self.tensors.append((name, list(shape), typ, buf, sparsity, quant))
        return len(self.tensors) - 1

    def input(self, name, shape, dtype=np.float32, quant=None) -> int:
        i = self._tensor(name, shape, dtype, quant=quant)
        self.inputs.append(i)
        return i

    def variable(self, name, shape, dtype=np.float32, value=None) -> int:
        data = b"" if value is None else np.ascontiguousarray(value, dtype).tobytes()
        i = self._tensor(name, shape, dtype, data)
        self.variables.add((self.current, i))
        return i

    def const(self, value, name=None, quant=None) -> int:
        a = np.ascontiguousarray(value)
        return self._tensor(name or f"const_{len(self.tensors)}", a.shape, a.dtype, a.tobytes(), quant=quant)

    def sparse_const(self, values, shape, order, block_map, dims) -> int:
        """A constant stored sparse: values in traversal order, dims one (dense_size,) or
        (segments, indices) per level of `order` (SparsityParameters in TFLite's schema)."""
        a = np.ascontiguousarray(values)
        return self._tensor(f"sparse_{len(self.tensors)}", shape, a.dtype, a.tobytes(), (order, block_map, dims))

    def op(self, code: str, inputs, out_shape, options: str | None = None, out_dtype=np.float32, quant=None,
           **opts) -> int:
        return self.multi_op(code, inputs, [out_shape], options, out_dtype, quant, **opts)[0]

    def multi_op(self, code: str, inputs, out_shapes, options: str | None = None, out_dtype=np.float32, quant=None,
                 **opts) -> list[int]:
        """quant: the outputs' quantization (one for all)."""
        from tflite.BuiltinOperator import BuiltinOperator
        dtypes = out_dtype if isinstance(out_dtype, list) else [out_dtype] * len(out_shapes)
        outs = [self._tensor(f"{code.lower()}_{len(self.tensors)}", shape, dt, quant=quant)
                for shape, dt in zip(out_shapes, dtypes)]
        self.ops.append((self._code(getattr(BuiltinOperator, code)), list(inputs), outs, options, opts))
        return outs

    def custom(self, name: str, inputs, out_shapes, custom_options: bytes = b"") -> list[int]:
        """A CUSTOM operator `name` with raw custom_options bytes."""
        outs = [self._tensor(f"{name}_{len(self.tensors)}", shape, np.float32) for shape in out_shapes]
        self.ops.append((self._code(32, name), list(inputs), outs, None, bytes(custom_options)))
        return outs

    def _code(self, builtin: int, custom: str | None = None) -> int:
        if (builtin, custom) not in self.codes:
            self.codes.append((builtin, custom))
        return self.codes.index((builtin, custom))

    def output(self, i: int) -> None:
        self.outputs.append(i)

    # ---- serialisation ---------------------------------------------------------------------
    def _sparsity(self, b, order, block_map, dims):
        SP, DM, IV = _mod("SparsityParameters"), _mod("DimensionMetadata"), _mod("Int32Vector")

        def int32_vector(values):
            v = self._ivec(b, IV.Int32VectorStartValuesVector, values)
            IV.Int32VectorStart(b)
            IV.Int32VectorAddValues(b, v)
            return IV.Int32VectorEnd(b)

        metas = []
        for d in dims:
            vecs = [int32_vector(v) for v in d] if len(d) == 2 else []
            DM.DimensionMetadataStart(b)
            if vecs:
                DM.DimensionMetadataAddFormat(b, 1)
                DM.DimensionMetadataAddArraySegmentsType(b, 1)  # SparseIndexVector.Int32Vector
                DM.DimensionMetadataAddArraySegments(b, vecs[0])
                DM.DimensionMetadataAddArrayIndicesType(b, 1)
                DM.DimensionMetadataAddArrayIndices(b, vecs[1])
            else:
                DM.DimensionMetadataAddDenseSize(b, d[0])
            metas.append(DM.DimensionMetadataEnd(b))
        ov = self._ivec(b, SP.SparsityParametersStartTraversalOrderVector, order)
        bv = self._ivec(b, SP.SparsityParametersStartBlockMapVector, block_map)
        SP.SparsityParametersStartDimMetadataVector(b, len(metas))
        for m in reversed(metas):
            b.PrependUOffsetTRelative(m)
        mv = b.EndVector()
        SP.SparsityParametersStart(b)
        SP.SparsityParametersAddTraversalOrder(b, ov)
        SP.SparsityParametersAddBlockMap(b, bv)
        SP.SparsityParametersAddDimMetadata(b, mv)
        return SP.SparsityParametersEnd(b)

    def _quant(self, b, quant):
        Q = _mod("QuantizationParameters")
        scales, zps, dim = quant
        scales, zps = np.atleast_1d(scales), np.atleast_1d(zps)
        Q.QuantizationParametersStartScaleVector(b, len(scales))
        for v in reversed(scales):
            b.PrependFloat32(float(v))
        sv = b.EndVector()
        Q.QuantizationParametersStartZeroPointVector(b, len(zps))
        for v in reversed(zps):
            b.PrependInt64(int(v))
        zv = b.EndVector()
        Q.QuantizationParametersStart(b)
        Q.QuantizationParametersAddScale(b, sv)
        Q.QuantizationParametersAddZeroPoint(b, zv)
        Q.QuantizationParametersAddQuantizedDimension(b, dim)
        return Q.QuantizationParametersEnd(b)

    def _ivec(self, b, start, values):
        start(b, len(values))
        for v in reversed(values):
            b.PrependInt32(int(v))
        return b.EndVector()

    def _options(self, b, name, opts):
        m = _mod(name)
        vecs = {k: self._ivec(b, getattr(m, f"{name}Start{_camel(k)}Vector"), v) for k, v in opts.items()
                if isinstance(v, (list, tuple))}
        vecs.update({k: b.CreateString(v) for k, v in opts.items() if isinstance(v, str)})
        getattr(m, f"{name}Start")(b)
        for k, v in opts.items():
            getattr(m, f"{name}Add{_camel(k)}")(b, vecs.get(k, v))
        return getattr(m, f"{name}End")(b)

    def _graph(self, b, k, tensors, ops, inputs, outputs):
        from tflite.BuiltinOptions import BuiltinOptions
        T, O, SG = _mod("Tensor"), _mod("Operator"), _mod("SubGraph")
        tens = []
        for i, (name, shape, typ, buf, sparsity, quant) in enumerate(tensors):
            nm = b.CreateString(name)
            sh = self._ivec(b, T.TensorStartShapeVector, shape)
            sp = self._sparsity(b, *sparsity) if sparsity else None
            sig = self.signatures.get((k, i))
            sg = self._ivec(b, T.TensorStartShapeSignatureVector, sig) if sig is not None else None
            qp = self._quant(b, quant) if quant is not None else None
            T.TensorStart(b)
            if qp is not None:
                T.TensorAddQuantization(b, qp)
            if sp is not None:
                T.TensorAddSparsity(b, sp)
            T.TensorAddShape(b, sh)
            if sg is not None:
                T.TensorAddShapeSignature(b, sg)
            T.TensorAddType(b, typ)
            T.TensorAddBuffer(b, buf)
            T.TensorAddName(b, nm)
            if (k, i) in self.variables:
                T.TensorAddIsVariable(b, True)
            tens.append(T.TensorEnd(b))
        written = []
        for idx, ins, outs, oname, opts in ops:
            opt = self._options(b, oname, opts) if oname else None
            custom = b.CreateByteVector(opts) if isinstance(opts, bytes) else None
            iv = self._ivec(b, O.OperatorStartInputsVector, ins)
            ov = self._ivec(b, O.OperatorStartOutputsVector, outs)
            O.OperatorStart(b)
            O.OperatorAddOpcodeIndex(b, idx)
            O.OperatorAddInputs(b, iv)
            O.OperatorAddOutputs(b, ov)
            if opt is not None:
                O.OperatorAddBuiltinOptionsType(b, getattr(BuiltinOptions, oname))
                O.OperatorAddBuiltinOptions(b, opt)
            if custom is not None:
                O.OperatorAddCustomOptions(b, custom)
            written.append(O.OperatorEnd(b))
        tv = self._table_vec(b, SG.SubGraphStartTensorsVector, tens)
        opv = self._table_vec(b, SG.SubGraphStartOperatorsVector, written)
        inv = self._ivec(b, SG.SubGraphStartInputsVector, inputs)
        outv = self._ivec(b, SG.SubGraphStartOutputsVector, outputs)
        SG.SubGraphStart(b)
        SG.SubGraphAddTensors(b, tv)
        SG.SubGraphAddInputs(b, inv)
        SG.SubGraphAddOutputs(b, outv)
        SG.SubGraphAddOperators(b, opv)
        return SG.SubGraphEnd(b)

    @staticmethod
    def _table_vec(b, start, items):
        start(b, len(items))
        for it in reversed(items):
            b.PrependUOffsetTRelative(it)
        return b.EndVector()

    def finish(self) -> bytes:
        OC, BF, M = (_mod(n) for n in ("OperatorCode", "Buffer", "Model"))
        b = flatbuffers.Builder(1024)
        bufs = []
        for data in self.buffers:
            vec = b.CreateByteVector(data) if data else None
            BF.BufferStart(b)
            if vec is not None:
                BF.BufferAddData(b, vec)
            bufs.append(BF.BufferEnd(b))
        graphs = [self._graph(b, k, *g) for k, g in enumerate(self.graphs)]
        codes = []
        for c, name in self.codes:
            cname = b.CreateString(name) if name else None
            OC.OperatorCodeStart(b)
            if cname is not None:
                OC.OperatorCodeAddCustomCode(b, cname)
            OC.OperatorCodeAddDeprecatedBuiltinCode(b, min(c, 127))
            OC.OperatorCodeAddBuiltinCode(b, c)
            OC.OperatorCodeAddVersion(b, 1)
            codes.append(OC.OperatorCodeEnd(b))

        table_vec = functools.partial(self._table_vec, b)
        sgv = table_vec(M.ModelStartSubgraphsVector, graphs)
        cv = table_vec(M.ModelStartOperatorCodesVector, codes)
        bv = table_vec(M.ModelStartBuffersVector, bufs)
        desc = b.CreateString("msv0 test")
        M.ModelStart(b)
        M.ModelAddVersion(b, 3)
        M.ModelAddOperatorCodes(b, cv)
        M.ModelAddSubgraphs(b, sgv)
        M.ModelAddBuffers(b, bv)
        M.ModelAddDescription(b, desc)
        b.Finish(M.ModelEnd(b), file_identifier=b"TFL3")
        return bytes(b.Output())
