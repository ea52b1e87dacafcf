"""Schema primitives an inference runtime never runs, each with the reason it is rejected.

Loading a model that contains one of them fails with UnsupportedOpError naming the node and
this reason (session.check_supported). Sources: format-v0.md §3 (converter-internal quant
ops), §5 (graph plumbing) and §6 (training-only kernels, built only with SUPPORT_TRAIN).
"""
from msv0.registry import reject

reject("training only: a gradient op, with no inference kernel in r1.1",
       "FlattenGrad", "Conv2DGradFilter", "Conv2DGradInput", "GroupConv2DGradInput", "DeConv2DGradFilter",
       "PoolingGrad", "BNGrad", "BiasGrad", "ActivationGrad", "AddGrad", "SubGrad", "MulGrad", "DivGrad",
       "PowerGrad", "NegGrad", "LogGrad", "MaximumGrad", "MinimumGrad", "DropoutGrad",
       "BinaryCrossEntropyGrad", "SmoothL1LossGrad", "SigmoidCrossEntropyWithLogitsGrad")

reject("training only: an optimizer or variable update, with no inference kernel in r1.1",
       "ApplyMomentum", "Sgd", "Adam", "Assign", "AssignAdd")

reject("training only: a loss function, with no inference kernel in r1.1",
       "SoftmaxCrossEntropy", "SparseSoftmaxCrossEntropy", "BinaryCrossEntropy", "SmoothL1Loss",
       "SigmoidCrossEntropyWithLogits")

reject("converter-internal quantization op: the converter folds it away and r1.1 has no kernel",
       "FakeQuantWithMinMax", "FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxPerChannel",
       "BatchNormFold", "MulFold", "AddFold", "OnnxInt8Quantize", "OnnxInt8Dequantize")

reject("graph plumbing: deprecated or meaningless in a saved graph, with no r1.1 kernel",
       "NetOutput", "Depend", "Return", "MakeTuple", "ControlDepend", "TupleGetItem", "BlackBox", "Custom")

# "under-specified": no r1.1 kernel, and the schema does not say what the op computes.
reject("under-specified: no r1.1 kernel and an empty schema table; the converter emits Reduce(mode "
       "Min) or Minimum instead, and nothing says which a file means", "Min")
reject("under-specified: no r1.1 kernel and an empty schema table (no target shape); the converter "
       "emits BroadcastTo instead", "Broadcast")
reject("under-specified: no r1.1 kernel and an empty schema table (no axis, no update rule); the "
       "converter emits ScatterND instead", "Scatter")
reject("under-specified: no r1.1 kernel; the combiner is commented out of the schema and sparse "
       "ids/weights have no tensor encoding in v0", "EmbeddingLookupSparse")
reject("under-specified: no r1.1 kernel; Caffe's Proposal needs image-info and anchor conventions "
       "the v0 schema does not record", "Proposal")
reject("graph plumbing: constants are stored as tensors; the table is empty and r1.1 has no kernel",
       "Constant")
reject("graph plumbing: a converter-internal layout marker (format conversions become Transpose); "
       "r1.1 has no kernel", "ToFormat")
