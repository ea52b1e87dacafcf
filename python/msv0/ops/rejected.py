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
