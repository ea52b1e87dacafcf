"""A picture of a model's main graph as SVG, or as a standalone HTML page with pan and zoom
(msv0 info --graph). Laid out here, with no graphviz: nodes in layers by longest path from the
graph inputs, ordered within a layer by the mean position of their producers.

Each node shows its op, name, output shapes and dtypes (as planned for the declared input
shapes) and its constant inputs, which get no box of their own. A fused block is framed and
named; each native Program is a coloured stripe on its nodes and a frame around them; nodes
that run no step (folded at plan time, or views of their input's bytes such as Reshape) are
dashed. With per-node times (msv0.profile.node_seconds) the fill goes
from white to red with the node's share of the slowest node's time.
"""
from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr

import numpy as np

from msv0.errors import ModelError
from msv0.model import Model
from msv0.session import PlanInfo

CHAR_W, LINE_H, PAD, GAP_X, GAP_Y = 7.0, 14, 6, 24, 36
MAX_CONST_LINES = 3
PROGRAM_COLOURS = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"]


@dataclass
class Box:
    id: str
    lines: list[str]
    title: str
    layer: int = 0
    x: float = 0.0
    y: float = 0.0
    css: str = "node"

    @property
    def w(self) -> float:
        return max(len(s) for s in self.lines) * CHAR_W + 2 * PAD

    @property
    def h(self) -> float:
        return len(self.lines) * LINE_H + 2 * PAD


def _shape(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def _tensor_text(model: Model, info: PlanInfo, k: int) -> str:
    t = model.tensors[k]
    shape, dtype = info.shapes.get(k, (t.shape, None))
    if dtype is None:
        try:
            dtype = t.dtype
        except ModelError:  # a TypeId with no NumPy dtype: shown by its number
            dtype = f"type {t.type_id}"
    return f"{_shape(shape)} {np.dtype(dtype).name if isinstance(dtype, np.dtype) else dtype}"


def _boxes(model: Model, info: PlanInfo) -> tuple[dict[str, Box], list[tuple[str, str]]]:
    boxes: dict[str, Box] = {}
    producer: dict[int, str] = {}
    for k in model.graph_inputs:
        t = model.tensors[k]
        boxes[f"in-{k}"] = Box(f"in-{k}", [f"input {t.name}", _tensor_text(model, info, k)], f"graph input {t.name}",
                               css="io")
        producer[k] = f"in-{k}"
    edges = []
    for i in model.main_nodes:
        n = model.nodes[i]
        lines = [n.op, n.name[:48]]
        lines += [f"→ {_tensor_text(model, info, k)}" for k in n.outputs]
        consts = [k for k in n.inputs if model.tensors[k].is_const]
        lines += [f"◆ {model.tensors[k].name[:32]} {_tensor_text(model, info, k)}" for k in consts[:MAX_CONST_LINES]]
        if len(consts) > MAX_CONST_LINES:
            lines.append(f"◆ {len(consts) - MAX_CONST_LINES} more constant(s)")
        boxes[f"node-{i}"] = Box(f"node-{i}", lines, n.label)
        for k in n.inputs:
            if k in producer:
                edges.append((producer[k], f"node-{i}"))
        for k in n.outputs:
            producer[k] = f"node-{i}"
    for k in model.graph_outputs:
        t = model.tensors[k]
        boxes[f"out-{k}"] = Box(f"out-{k}", [f"output {t.name}"], f"graph output {t.name}", css="io")
        if k in producer:
            edges.append((producer[k], f"out-{k}"))
    return boxes, edges


def _layout(boxes: dict[str, Box], edges: list[tuple[str, str]]) -> tuple[float, float]:
    """Layers by longest path (boxes are in execution order, so one pass settles them), then a
    barycentre order within each layer; returns the drawing's width and height."""
    preds: dict[str, list[str]] = {b: [] for b in boxes}
    for a, b in edges:
        preds[b].append(a)
    for b in boxes.values():
        b.layer = max((boxes[p].layer + 1 for p in preds[b.id]), default=0)
    layers: dict[int, list[Box]] = {}
    for b in boxes.values():
        layers.setdefault(b.layer, []).append(b)
    width, y = 0.0, 0.0
    order: dict[str, float] = {}
    rows = []
    for layer in sorted(layers):
        row = layers[layer]
        row.sort(key=lambda b: np.mean([order[p] for p in preds[b.id]]) if preds[b.id] else 0.0)
        for pos, b in enumerate(row):
            order[b.id] = pos - (len(row) - 1) / 2
        row_w = sum(b.w for b in row) + GAP_X * (len(row) - 1)
        width = max(width, row_w)
        rows.append((row, row_w, y))
        y += max(b.h for b in row) + GAP_Y
    for row, row_w, top in rows:
        x = (width - row_w) / 2
        for b in row:
            b.x, b.y = x + PAD, top + PAD
            x += b.w + GAP_X
    return width + 2 * PAD, y + PAD


def _heat(fraction: float) -> str:
    """White (no time) to red (the slowest node)."""
    f = min(max(fraction, 0.0), 1.0)
    return f"rgb(255,{int(255 - 180 * f)},{int(255 - 235 * f)})"


def _frame(members: list[Box], margin: float) -> tuple[float, float, float, float]:
    x0 = min(b.x for b in members) - margin
    y0 = min(b.y for b in members) - margin
    x1 = max(b.x + b.w for b in members) + margin
    y1 = max(b.y + b.h for b in members) + margin
    return x0, y0, x1 - x0, y1 - y0


def svg(model: Model, info: PlanInfo, node_seconds: dict[int, float] | None = None) -> str:
    """The picture as an SVG document (every node a <g class="node" id="node-INDEX">)."""
    boxes, edges = _boxes(model, info)
    width, height = _layout(boxes, edges)
    planned = {i: program for nodes, program in info.steps for i in nodes}
    programs = sorted({p for p in planned.values() if p is not None})
    colour = {p: PROGRAM_COLOURS[j % len(PROGRAM_COLOURS)] for j, p in enumerate(programs)}
    slowest = max(node_seconds.values(), default=0.0) if node_seconds else 0.0
    total = sum(node_seconds.values()) * 1e3 if node_seconds else None
    legend = f"{model.name or 'model'}: {len(model.main_nodes)} nodes, {len(programs)} native Program(s)"
    if total is not None:
        legend += f", {total:.3f} ms per run (fill: share of the slowest node, {slowest * 1e3:.3f} ms)"
    width = max(width, len(legend) * CHAR_W + 2 * PAD)
    legend_h = 3 * LINE_H
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height + legend_h:.0f}" '
           f'viewBox="0 {-legend_h} {width:.0f} {height + legend_h:.0f}" font-family="monospace" font-size="11">',
           "<style>.node rect.body{stroke:#333}.io rect.body{fill:#eef;stroke:#88a}.no-step rect.body{stroke-dasharray:4 3;"
           "fill:#f4f4f4}.edge{fill:none;stroke:#777;stroke-width:1}.fused{fill:none;stroke:#d62728;stroke-dasharray:6 3}"
           ".program{fill:none;stroke-width:1.5;stroke-opacity:.6}</style>",
           '<defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="6" markerHeight="6" '
           'orient="auto"><path d="M0,0L8,4L0,8z" fill="#777"/></marker></defs>']
    out.append(f'<text x="{PAD}" y="{-legend_h + LINE_H}">{escape(legend)}</text>')
    for p in programs:
        members = [boxes[f"node-{i}"] for i, q in planned.items() if q == p]
        x, y, w, h = _frame(members, PAD / 2)
        out.append(f'<rect class="program" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" '
                   f'stroke="{colour[p]}"><title>native Program (step {p}), {len(members)} nodes</title></rect>')
    for nodes, _ in info.steps:
        if len(nodes) > 1:
            x, y, w, h = _frame([boxes[f"node-{i}"] for i in nodes], PAD)
            names = " + ".join(model.nodes[i].name for i in nodes)
            out.append(f'<g class="fused-block"><rect class="fused" x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" '
                       f'height="{h:.1f}" rx="6"/><text x="{x + 2:.1f}" y="{y - 2:.1f}" fill="#d62728">fused</text>'
                       f'<title>fused block: {escape(names)}</title></g>')
    for a, b in edges:
        s, t = boxes[a], boxes[b]
        x0, y0, x1, y1 = s.x + s.w / 2, s.y + s.h, t.x + t.w / 2, t.y
        if t.layer - s.layer > 1:  # a skip connection bows out to the right, clear of the boxes between
            bow = max(s.w, t.w) / 2 + 3 * GAP_X
            c0, c1 = f"{x0 + bow:.1f},{y0 + GAP_Y:.1f}", f"{x1 + bow:.1f},{y1 - GAP_Y:.1f}"
        else:
            mid = (y0 + y1) / 2
            c0, c1 = f"{x0:.1f},{mid:.1f}", f"{x1:.1f},{mid:.1f}"
        out.append(f'<path class="edge" d="M{x0:.1f},{y0:.1f} C{c0} {c1} {x1:.1f},{y1:.1f}" marker-end="url(#arrow)"/>')
    for b in boxes.values():
        fill, css, note = "#fff", b.css, ""
        if b.id.startswith("node-"):
            i = int(b.id[5:])
            if info.steps and i not in planned:
                css, note = "node no-step", "\nno step: folded at plan time, or a view of its input's bytes"
            elif i in planned:
                note = "\nruns from Python" if planned[i] is None else f"\nnative Program (step {planned[i]})"
            if node_seconds and i in node_seconds:
                fill = _heat(node_seconds[i] / slowest if slowest else 0.0)
                note += f"\n{node_seconds[i] * 1e3:.4f} ms per run"
        attrs = f'class={quoteattr(css)} id="{b.id}"'
        out.append(f"<g {attrs}><title>{escape(b.title + note)}</title>"
                   f'<rect class="body" x="{b.x:.1f}" y="{b.y:.1f}" width="{b.w:.1f}" height="{b.h:.1f}" rx="3" '
                   f'fill="{fill}"/>')
        if b.id.startswith("node-") and planned.get(int(b.id[5:])) is not None:
            out.append(f'<rect x="{b.x:.1f}" y="{b.y:.1f}" width="4" height="{b.h:.1f}" '
                       f'fill="{colour[planned[int(b.id[5:])]]}"/>')
        for j, line in enumerate(b.lines):
            weight = ' font-weight="bold"' if j == 0 else ""
            out.append(f'<text x="{b.x + PAD + 2:.1f}" y="{b.y + PAD + (j + 0.8) * LINE_H:.1f}"{weight}>'
                       f"{escape(line)}</text>")
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out)


# Pan by dragging, zoom at the pointer with the wheel: both rewrite the SVG's viewBox.
_PAN_ZOOM = """
const svg = document.querySelector("svg");
let [vx, vy, vw, vh] = svg.getAttribute("viewBox").split(" ").map(Number);
svg.removeAttribute("width"); svg.removeAttribute("height");
function show() { svg.setAttribute("viewBox", `${vx} ${vy} ${vw} ${vh}`); }
function toGraph(e) {
  const r = svg.getBoundingClientRect();
  return [vx + (e.clientX - r.left) / r.width * vw, vy + (e.clientY - r.top) / r.height * vh];
}
svg.addEventListener("wheel", (e) => {
  e.preventDefault();
  const [gx, gy] = toGraph(e), k = Math.exp(e.deltaY * 0.001);
  vx = gx - (gx - vx) * k; vy = gy - (gy - vy) * k; vw *= k; vh *= k; show();
}, {passive: false});
let drag = null;
svg.addEventListener("pointerdown", (e) => { drag = [e.clientX, e.clientY]; svg.setPointerCapture(e.pointerId); });
svg.addEventListener("pointermove", (e) => {
  if (!drag) return;
  const r = svg.getBoundingClientRect();
  vx -= (e.clientX - drag[0]) / r.width * vw; vy -= (e.clientY - drag[1]) / r.height * vh;
  drag = [e.clientX, e.clientY]; show();
});
svg.addEventListener("pointerup", () => { drag = null; });
"""


def html(model: Model, info: PlanInfo, node_seconds: dict[int, float] | None = None) -> str:
    """A standalone page: the SVG filling the window, with pan (drag) and zoom (wheel)."""
    title = escape(f"msv0: {model.name or 'model'}")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + title + "</title>"
            "<style>html,body{margin:0;height:100%;overflow:hidden}svg{width:100vw;height:100vh;cursor:grab;"
            "touch-action:none}</style></head><body>\n" + svg(model, info, node_seconds)
            + "\n<script>" + _PAN_ZOOM + "</script></body></html>\n")
