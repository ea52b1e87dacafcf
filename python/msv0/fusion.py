"""Plan-time fusion of inverted-residual blocks (MobileNetV2's): a 1x1 expand Conv2D, a
depthwise conv and optionally a 1x1 project Conv2D become one native step
(csrc/kernels/fused_block_f32.cc) that never writes the 6x-expanded tensor to memory. Then an
element-wise Add/Mul/... of two full operands, one of them a GEMM-based Conv2D's output that
nothing else reads (ResNet's residual Adds), and a chain of Activation, PReLU and Binary-with-a-
constant steps that each alone read a Conv2D's, a FullConnection's or an element-wise step's
output run inside that step, on each block of output while it is in cache (HSWISH after every
conv of PP-LCNet and MobileNetV3, PReLU after the convs and residual Adds of MediaPipe's landmark
models, a transformer's GELU, msv0.gelu).

The pass absorbs steps whose Conv2D kernel object (Plan.kernel) is a 1x1 GEMM ("gemm1x1") or a
depthwise conv ("depthwise"), and the fused object reuses their packed weights. It only merges
consecutive steps whose intermediate has that one consumer and is not a graph output, so the
fused step reads and writes exactly what the chain did.
"""
from __future__ import annotations

import numpy as np

from msv0 import _core
from msv0.registry import Plan

# Fewer depthwise output rows than this per thread and the fused step's row split leaves the
# threads unevenly loaded (7 rows on 2 threads: 4 + 3), and each thread streams the whole of
# both weights where the separate layers split them: the separate layers win.
MIN_ROWS_PER_THREAD = 7
# Output rows per band when > 0; 0 lets the kernel take as many as its per-thread L2 budget
# holds. Tests set 1 or 2 so that small images still cross band boundaries.
MAX_BAND = 0


def fuse_blocks(planned: list, uses: dict[int, int], num_threads: int) -> list:
    """planned: the Session's (nodes, Plan, inputs, outputs) steps; uses: how many steps read
    each tensor, graph outputs counting as a use. Returns the steps with each expand ->
    depthwise [-> project] chain replaced by one fused step."""
    out = []
    i = 0
    while i < len(planned):
        fused = _chain(planned, i, uses, num_threads)
        if fused is None:
            out.append(planned[i])
            i += 1
        else:
            step, length = fused
            out.append(step)
            i += length
    return out


def _feeds(planned, i, uses) -> bool:
    """Whether step i's only output is read by step i + 1 alone, as its first input."""
    _, _, _, outs = planned[i]
    if len(outs) != 1 or i + 1 >= len(planned):
        return False
    _, _, ins, _ = planned[i + 1]
    return uses.get(outs[0], 0) == 1 and ins[0] == outs[0] and outs[0] not in ins[1:]


def _is(plan: Plan, algorithm: str) -> bool:
    return plan.kernel is not None and plan.kernel.name == algorithm


def _chain(planned, i, uses, num_threads):
    nodes, expand, ins, _ = planned[i]
    if not _is(expand, "gemm1x1") or not _feeds(planned, i, uses):
        return None
    dw_nodes, dw_plan, _, dw_outs = planned[i + 1]
    if not _is(dw_plan, "depthwise"):
        return None
    (_, oh, _, _), _ = dw_plan.outputs[0]
    if oh < MIN_ROWS_PER_THREAD * num_threads:
        return None
    length, project, outs, nodes = 2, None, dw_outs, nodes + dw_nodes
    if _feeds(planned, i + 1, uses) and _is(planned[i + 2][1], "gemm1x1"):
        project_nodes, project, _, outs = planned[i + 2]
        length = 3
        nodes += project_nodes
    block = _core.FusedBlock(expand.kernel, dw_plan.kernel, project.kernel if project else None, MAX_BAND)
    out_plan = (project or dw_plan).outputs
    return (nodes, Plan(out_plan, kernel=block), [ins[0]], outs), length


def fuse_residuals(planned: list, uses: dict[int, int]) -> list:
    """planned and uses as for fuse_blocks. Returns the steps with each Binary step that reads a
    Conv2D step's output, its only use, merged into that Conv2D (_core.with_residual): the conv's
    kernel object runs the Binary's kernel on each block it has just written, the same kernels on
    the same values as the two steps. The merged step takes the Binary's place, where its other
    operand has been computed."""
    producer = {outs[0]: i for i, (_, plan, _, outs) in enumerate(planned)
                if plan.kernel is not None and len(outs) == 1}
    merged: dict[int, tuple] = {}  # Binary step -> (Conv2D step, merged kernel object, other operand)
    for j, (_, plan, ins, _) in enumerate(planned):
        if not _is(plan, "binary") or ins[0] == ins[1]:
            continue
        for pos in (0, 1):
            i = producer.get(ins[pos])
            if i is None or uses.get(ins[pos], 0) != 1:
                continue
            kernel = _core.with_residual(planned[i][1].kernel, plan.kernel, pos == 0)
            if kernel is not None:
                merged[j] = (i, kernel, ins[1 - pos])
                break
    absorbed = {i for i, _, _ in merged.values()}
    out = []
    for j, (nodes, plan, ins, outs) in enumerate(planned):
        if j in absorbed:
            continue
        if j in merged:
            i, kernel, other = merged[j]
            conv_nodes, _, conv_ins, _ = planned[i]
            out.append((conv_nodes + nodes, Plan(plan.outputs, kernel=kernel), [conv_ins[0], other], outs))
        else:
            out.append(planned[j])
    return out


def fuse_activations(planned: list, uses: dict[int, int], values: dict) -> list:
    """planned and uses as for fuse_blocks; values: the planned Values (for constant operands).
    Returns the steps with each Conv2D, FullConnection or Binary step merged with the chain of
    steps after it that each alone read the one before: Activation and PReLU steps, and Binary
    steps whose other operand is a constant (a Maximum with -0.4 after each LeakyReLU in
    openWakeWord's embedding). The producer's kernel object runs them in order on what it writes,
    the same kernels on the same values as the steps. A PReLU whose slope is computed stays apart."""
    # The step that reads each tensor first. A merged step is moved up to its producer (its other
    # input is a constant): models with two towers interleave them in plan order.
    reader: dict[int, int] = {}
    for j, (_, _, ins, _) in enumerate(planned):
        for k in ins:
            reader.setdefault(k, j)
    out, absorbed = [], set()
    for i, (nodes, plan, ins, outs) in enumerate(planned):
        if i in absorbed:
            continue
        kernel, out_plan = plan.kernel, plan
        while kernel is not None and len(outs) == 1 and uses.get(outs[0], 0) == 1 and outs[0] in reader:
            j = reader[outs[0]]
            fused = _with_post(kernel, planned[j], outs[0], values)
            if fused is None:
                break
            next_nodes, out_plan, _, outs = planned[j]
            kernel, nodes = fused, nodes + next_nodes
            absorbed.add(j)
        if kernel is plan.kernel:
            out.append(planned[i])
        else:
            out.append((nodes, Plan(out_plan.outputs, kernel=kernel), ins, outs))
    return out


def _with_post(kernel, step, tensor: int, values: dict):
    """`kernel` (the producer of `tensor`) followed by `step`, which reads it, as one kernel
    object, or None where `step` is not an Activation or a Binary with a constant operand, or
    the producer cannot run it."""
    _, plan, ins, _ = step
    if _is(plan, "activation"):
        slope = values[ins[1]].const if plan.kernel_inputs == 2 else np.empty(0, np.float32)
        if ins[0] != tensor or slope is None:
            return None
        return _core.with_activation(kernel, plan.kernel, slope)
    if _is(plan, "binary") and ins[0] != ins[1]:
        pos = 1 - ins.index(tensor)  # the constant's position
        constant = values[ins[pos]].const
        if constant is None:
            return None
        return _core.with_binary(kernel, plan.kernel, constant, pos)
    return None
