"""Plan-time fusion of inverted-residual blocks (MobileNetV2's): a 1x1 expand Conv2D, a
depthwise conv and optionally a 1x1 project Conv2D become one native step
(csrc/kernels/fused_block_f32.cc) that never writes the 6x-expanded tensor to memory.

Build functions describe a step the pass may absorb by setting Plan.parts to a Conv1x1 or a
Depthwise; the pass only merges consecutive steps whose intermediate has that one consumer and
is not a graph output, so the fused step reads and writes exactly what the chain did.
"""
from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Conv1x1:
    """A 1x1, stride-1, unpadded, group-1 Conv2D: y = clamp(x · weight^T + bias)."""

    weight: np.ndarray  # [cout, cin] float32
    bias: np.ndarray | None
    lo: float
    hi: float


@dataclass(frozen=True)
class Depthwise:
    """A depthwise conv with one output channel per input channel."""

    weight: np.ndarray  # [c, kh, kw] float32
    bias: np.ndarray | None
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    lo: float
    hi: float


def fuse_blocks(planned: list, uses: dict[int, int], num_threads: int) -> list:
    """planned: the Session's (label, Plan, inputs, outputs) steps; uses: how many steps read
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


def _chain(planned, i, uses, num_threads):
    label, expand, ins, _ = planned[i]
    if not isinstance(expand.parts, Conv1x1) or not _feeds(planned, i, uses):
        return None
    dw_label, dw_plan, _, dw_outs = planned[i + 1]
    dw = dw_plan.parts
    if not isinstance(dw, Depthwise):
        return None
    (n, h, w, _), _ = expand.outputs[0]
    (_, oh, ow, _), _ = dw_plan.outputs[0]
    if oh < MIN_ROWS_PER_THREAD * num_threads:
        return None
    length, project, outs, labels = 2, None, dw_outs, [label, dw_label]
    if _feeds(planned, i + 1, uses) and isinstance(planned[i + 2][1].parts, Conv1x1):
        project_label, project_plan, _, outs = planned[i + 2]
        project, length = project_plan.parts, 3
        labels.append(project_label)
    e = expand.parts
    op = _core.FusedBlock(e.weight, e.bias, e.lo, e.hi, dw.weight, dw.bias, dw.sh, dw.sw, dw.dh, dw.dw, dw.pt,
                          dw.pl, dw.lo, dw.hi, project.weight if project else None,
                          project.bias if project else None, project.lo if project else 0.0,
                          project.hi if project else 0.0, n, h, w, oh, ow, MAX_BAND)
    out_plan = (project_plan if project else dw_plan).outputs

    def run(inputs, outputs):
        op.run(inputs[0], outputs[0])

    return ("fused " + " + ".join(labels), Plan(out_plan, run, native=op), [ins[0]], outs), length
