"""msv0.graph_picture and `msv0 info --graph`: every node drawn with its op, shapes and dtypes;
constants inside their consumers; fused blocks, Programs and stepless (folded) nodes marked; time as
fill colour; the HTML page run in a real headless browser."""
from __future__ import annotations

import os
import shutil
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import msv0
from msv0 import cli, graph_picture, zoo
from msv0.builder import Builder
from test_profile import mixed_model

MIXED = mixed_model()

SVG = "{http://www.w3.org/2000/svg}"


def texts(g: ET.Element) -> list[str]:
    return [t.text for t in g.iter(SVG + "text")]


def nodes_of(svg: str) -> dict[str, ET.Element]:
    root = ET.fromstring(svg)
    return {g.get("id"): g for g in root.iter(SVG + "g") if g.get("id")}


def folding_model() -> bytes:
    """x + (c1 * c2): the Mul is folded at plan time, the Add runs."""
    b = Builder("fold")
    x = b.input("x", (1, 3))
    c = b.node("Mul", [b.const("c1", np.ones(3, np.float32)), b.const("c2", np.full(3, 2, np.float32))], name="mul")
    b.output(b.node("Add", [x, c], name="add"))
    return b.finish()


@pytest.mark.parametrize("name", ["mobilenet_tiny", "resnet50"])
def test_svg_has_every_node(name):
    data = zoo.mobilenet_tiny() if name == "mobilenet_tiny" else zoo.NETS[name]().to_ms()
    s = msv0.Session(data)
    m = s.model
    drawn = nodes_of(graph_picture.svg(m, s.plan_info))
    for i in m.main_nodes:
        n = m.nodes[i]
        lines = texts(drawn[f"node-{i}"])
        assert lines[:2] == [n.op, n.name]
        for k in n.outputs:
            shape, dtype = s.plan_info.shapes[k]
            assert f"→ [{','.join(map(str, shape))}] {dtype.name}" in lines
        consts = [m.tensors[k].name for k in n.inputs if m.tensors[k].is_const]
        assert [line.split()[1] for line in lines if line.startswith("◆")] == consts[:graph_picture.MAX_CONST_LINES]
    assert {f"in-{k}" for k in m.graph_inputs} | {f"out-{k}" for k in m.graph_outputs} <= set(drawn)
    assert not any(k.startswith("tensor") for k in drawn)  # constants have no box of their own
    root = ET.fromstring(graph_picture.svg(m, s.plan_info))
    fused = [g for g in root.iter(SVG + "g") if g.get("class") == "fused-block"]
    assert len(fused) == sum(len(nodes) > 1 for nodes, _ in s.plan_info.steps)
    assert fused  # MobileNet's inverted-residual blocks; ResNet's Conv2D+Add
    programs = [r for r in root.iter(SVG + "rect") if r.get("class") == "program"]
    assert len(programs) == len({p for _, p in s.plan_info.steps if p is not None})


def test_stepless_node_dashed_and_python_step_named():
    s = msv0.Session(folding_model())
    drawn = nodes_of(graph_picture.svg(s.model, s.plan_info))
    mul, add = (next(i for i in s.model.main_nodes if s.model.nodes[i].name == n) for n in ("mul", "add"))
    assert "no-step" in drawn[f"node-{mul}"].get("class")
    assert "no-step" not in drawn[f"node-{add}"].get("class")
    s = msv0.Session(MIXED)
    drawn = nodes_of(graph_picture.svg(s.model, s.plan_info))
    how = {s.model.nodes[i].name: drawn[f"node-{i}"].find(SVG + "title").text.split("\n")[-1] for i in s.model.main_nodes}
    assert how == {"fc1": "native Program (step 0)", "cos": "runs from Python", "fc2": "native Program (step 2)"}


def test_time_colours_the_slowest_node_red():
    s = msv0.Session(zoo.mobilenet_tiny())
    x = np.zeros(s.model.inputs[0].shape, np.float32)
    seconds = {}
    for t in s.profile([x])[1]:
        for i in t.nodes:
            seconds[i] = t.seconds / len(t.nodes)
    slowest = max(seconds, key=seconds.get)
    drawn = nodes_of(graph_picture.svg(s.model, s.plan_info, seconds))
    fill = {k: g.find(SVG + "rect").get("fill") for k, g in drawn.items()}
    assert fill[f"node-{slowest}"] == graph_picture._heat(1.0)
    assert all(fill[f"node-{i}"] != "#fff" for i in seconds)


def test_cli_info_graph(tmp_path, capsys):
    model = tmp_path / "m.ms"
    model.write_bytes(zoo.mobilenet_tiny())
    trace = tmp_path / "t.json"
    assert cli.main(["bench", str(model), "-t", "1", "--warmup", "0", "--runs", "1", "--trace", str(trace)]) == 0
    out = tmp_path / "g.svg"
    assert cli.main(["info", str(model), "--graph", str(out), "--times", str(trace)]) == 0
    drawn = nodes_of(out.read_text())
    m = msv0.load(model)
    assert {f"node-{i}" for i in m.main_nodes} <= set(drawn)
    assert sum("ms per run" in g.find(SVG + "title").text for g in drawn.values()) == len(m.main_nodes)
    assert cli.main(["info", str(model), "--graph", str(tmp_path / "g.png")]) == cli.EXIT_ERROR
    assert "writes .svg or .html" in capsys.readouterr().err


def chromium_driver():
    webdriver = pytest.importorskip("selenium.webdriver")
    chrome, driver = shutil.which("chromium") or shutil.which("chromium-browser"), shutil.which("chromedriver")
    if not chrome or not driver:
        pytest.skip("no chromium + chromedriver (Debian: apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # Under scripts/sanitize.sh the browser must not inherit the ASan preload meant for Python: it aborts.
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    return webdriver.Chrome(service=webdriver.ChromeService(executable_path=driver, env=env), options=opts)


def test_html_pans_and_zooms_in_chromium(tmp_path):
    s = msv0.Session(zoo.mobilenet_tiny())
    page = tmp_path / "g.html"
    page.write_text(graph_picture.html(s.model, s.plan_info))
    browser = chromium_driver()
    try:
        browser.get(page.as_uri())
        view = "return document.querySelector('svg').getAttribute('viewBox')"
        before = browser.execute_script(view)
        assert browser.execute_script("return document.querySelectorAll('g.node').length") == len(s.model.main_nodes)
        browser.execute_script("document.querySelector('svg').dispatchEvent(new WheelEvent('wheel', "
                               "{deltaY: -300, clientX: 100, clientY: 100, bubbles: true, cancelable: true}))")
        zoomed = browser.execute_script(view)
        assert float(zoomed.split()[2]) < float(before.split()[2])  # zoomed in: a narrower view
        errors = [e for e in browser.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]
        assert errors == []
    finally:
        browser.quit()
