"""Control flow (format-v0.md §8): Switch/Merge gating, a Merge/Switch loop, Partial, While,
Loop and TensorLists, each against a plain Python reference."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import msv0
from msv0 import dataflow
from msv0.builder import Builder


def scalar(b, name, value, dtype=np.float32):
    return b.const(name, np.array(value, dtype))


@pytest.mark.parametrize("flag", [True, False])
def test_switch_merge_if_else(flag):
    b = Builder("if")
    x = b.input("x", (2, 3))
    c = b.input("c", (1,), np.bool_)
    xt, xf = b.node("Switch", [c, x], outputs=2)
    yt = b.node("Mul", [xt, scalar(b, "two", [2.0])])
    yf = b.node("Add", [xf, scalar(b, "hundred", [100.0])])
    y = b.node("Merge", [yt, yf])
    b.output(y)
    x_val = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = msv0.Session(b.finish()).run([x_val, np.array([flag])])
    want = x_val * 2 if flag else x_val + 100
    np.testing.assert_array_equal(out[b.graph.allTensors[y].name], want)


def test_merge_switch_loop_counts_to_limit():
    """i = 0; while i < 5: i += 1 — lowered the way r1.1's converter lowers While."""
    b = Builder("loop")
    x = b.input("x", (1,))
    i_next = b.tensor("i_next")
    i = b.node("Merge", [x, i_next])
    cond = b.node("Less", [i, scalar(b, "limit", [5.0])], out_dtype=np.bool_)
    i_true, i_false = b.node("Switch", [cond, i], outputs=2)
    b.node("Add", [i_true, scalar(b, "one", [1.0])], outputs=[i_next])
    b.output(i_false)
    s = msv0.Session(b.finish())
    for start in (0.0, 3.5, 7.0):
        got = s.run([np.array([start], np.float32)])[b.graph.allTensors[i_false].name]
        want = start
        while want < 5:
            want += 1
        np.testing.assert_array_equal(got, [want])


def _counting_loop(trips: int, carried: int):
    """i = 0; while i < trips: i += 1, x += 0 — x is `carried` elements passed along."""
    b = Builder("loop")
    x0 = b.input("x", (carried,))
    i0 = scalar(b, "zero", [0.0])
    x_next, i_next = b.tensor("x_next"), b.tensor("i_next")
    x, i = b.node("Merge", [x0, i0, x_next, i_next], outputs=2)
    cond = b.node("Less", [i, scalar(b, "trips", [float(trips)])], out_dtype=np.bool_)
    x_true, i_true, x_false, _ = b.node("Switch", [cond, x, i], outputs=4)
    b.node("Add", [x_true, scalar(b, "nothing", [0.0])], outputs=[x_next])
    b.node("Add", [i_true, scalar(b, "one", [1.0])], outputs=[i_next])
    b.output(x_false)
    return msv0.Session(b.finish()), np.ones(carried, np.float32)


def test_endless_loop_is_model_error(monkeypatch):
    monkeypatch.setattr(dataflow, "MAX_NODE_RUNS", 5000)
    s, x = _counting_loop(float("inf"), 1)
    with pytest.raises(msv0.ModelError, match="without finishing"):
        s.run([x])


def test_loop_work_counts_the_elements_it_produces(monkeypatch):
    """30 trips of about 6 node runs fit in 1000; with 128 Ki elements carried through Merge,
    Switch and Add, each trip costs 48 more."""
    monkeypatch.setattr(dataflow, "MAX_NODE_RUNS", 1000)
    s, x = _counting_loop(30, 1)
    np.testing.assert_array_equal(next(iter(s.run([x]).values())), x)
    s, x = _counting_loop(30, 1 << 17)
    with pytest.raises(msv0.ModelError, match="without finishing"):
        s.run([x])


def test_endless_while_over_empty_subgraphs_is_model_error(monkeypatch):
    monkeypatch.setattr(dataflow, "MAX_NODE_RUNS", 5000)
    b = Builder("while")
    x = b.input("x", (1,), np.bool_)
    ci, bi = b.tensor("cond_i"), b.tensor("body_i")
    cond = b.subgraph("cond", [ci], [ci], [])
    body = b.subgraph("body", [bi], [bi], [])
    y = b.node("While", [x], condSubgraphIndex=cond, bodySubgraphIndex=body)
    b.main_nodes = [len(b.graph.nodes) - 1]
    b.output(y)
    with pytest.raises(msv0.ModelError, match="While_0.*without finishing"):
        msv0.Session(b.finish()).run([np.array([True])])


def _scale_subgraph(b, factor):
    """A subgraph y = x * factor; returns (subgraph index, its node index)."""
    sx = b.tensor(f"sub_x{factor}")
    node_index = len(b.graph.nodes)
    sy = b.node("Mul", [sx, scalar(b, f"f{factor}", [float(factor)])])
    return b.subgraph(f"scale{factor}", [sx], [sy], [node_index]), node_index


def test_partial_runs_its_subgraph():
    b = Builder("partial")
    x = b.input("x", (4,))
    sub, body_node = _scale_subgraph(b, 3)
    y = b.node("Partial", [x], subGraphIndex=sub)
    b.main_nodes = [len(b.graph.nodes) - 1]
    b.output(y)
    v = np.array([1, 2, 3, 4], np.float32)
    out = msv0.Session(b.finish()).run([v])
    np.testing.assert_array_equal(out[b.graph.allTensors[y].name], v * 3)


def test_while_over_subgraphs():
    b = Builder("while")
    x = b.input("x", (1,))
    ci = b.tensor("cond_i")
    first_cond = len(b.graph.nodes)
    c = b.node("Less", [ci, scalar(b, "limit", [10.0])], out_dtype=np.bool_)
    cond = b.subgraph("cond", [ci], [c], [first_cond])
    bi = b.tensor("body_i")
    first_body = len(b.graph.nodes)
    bo = b.node("Mul", [bi, scalar(b, "two", [2.0])])
    body = b.subgraph("body", [bi], [bo], [first_body])
    y = b.node("While", [x], condSubgraphIndex=cond, bodySubgraphIndex=body)
    b.main_nodes = [len(b.graph.nodes) - 1]
    b.output(y)
    s = msv0.Session(b.finish())
    for start, want in [(1.0, 16.0), (10.0, 10.0), (3.0, 12.0)]:
        got = s.run([np.array([start], np.float32)])[b.graph.allTensors[y].name]
        np.testing.assert_array_equal(got, [want])


def test_while_naming_missing_subgraph_is_model_error():
    b = Builder("bad")
    x = b.input("x", (1,))
    y = b.node("While", [x], condSubgraphIndex=5, bodySubgraphIndex=0)
    b.output(y)
    with pytest.raises(msv0.ModelError, match="condSubgraphIndex"):
        msv0.load(b.finish())


def test_tensor_list_round_trip():
    b = Builder("lists")
    x = b.input("x", (3, 4))
    shape = b.const("shape", np.array([4], np.int32))
    lst = b.node("TensorListFromTensor", [x, shape], out_dtype=np.int32)
    item = b.node("TensorListGetItem", [lst, b.const("i", np.array([1], np.int32))])
    lst2 = b.node("TensorListSetItem", [lst, b.const("j", np.array([2], np.int32)), item], out_dtype=np.int32)
    stacked = b.node("TensorListStack", [lst2, shape], numElements=-1)
    b.output(item, stacked)
    v = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = msv0.Session(b.finish()).run([v])
    np.testing.assert_array_equal(out[b.graph.allTensors[item].name], v[1])
    want = v.copy()
    want[2] = v[1]
    np.testing.assert_array_equal(out[b.graph.allTensors[stacked].name], want)


def _assert_model():
    b = Builder("assert")
    c = b.input("cond", (3,), np.bool_)
    x = b.input("x", (2,), np.float32)
    y = b.tensor("y", np.float32)
    b.node("Assert", [c, x], outputs=[])
    b.node("Neg", [x], outputs=[y])
    b.output(y)
    return msv0.Session(b.finish())


def test_assert():
    s = _assert_model()
    np.testing.assert_array_equal(s.run([np.ones(3, bool), np.ones(2, np.float32)])["y"], [-1, -1])
    with pytest.raises(msv0.ModelError, match="assertion failed"):
        s.run([np.array([True, False, True]), np.ones(2, np.float32)])


def test_partial_calling_its_own_subgraph_is_model_error():
    """A subgraph whose Partial calls that same subgraph: bounded nesting, not a RecursionError."""
    b = Builder("recursive")
    x = b.input("x", (4,))
    sx = b.tensor("sx")
    inner = len(b.graph.nodes)
    sy = b.node("Partial", [sx], subGraphIndex=1)
    sub = b.subgraph("itself", [sx], [sy], [inner])
    y = b.node("Partial", [x], subGraphIndex=sub)
    b.main_nodes = [len(b.graph.nodes) - 1]
    b.output(y)
    with pytest.raises(msv0.ModelError, match="nest deeper"):
        msv0.Session(b.finish()).run([np.ones(4, np.float32)])


def test_empty_switch_condition_is_input_error():
    """An empty condition feed (IndexError before) is refused with the other zero-size feeds."""
    b = Builder("empty_cond")
    x = b.input("x", (2, 3))
    c = b.input("c", (1,), np.bool_)
    xt, xf = b.node("Switch", [c, x], outputs=2)
    b.output(b.node("Merge", [xt, xf]))
    with pytest.raises(msv0.InputError, match="zero-size"):
        msv0.Session(b.finish()).run([np.ones((2, 3), np.float32), np.zeros(0, np.bool_)])


def test_empty_computed_switch_condition_is_model_error():
    """A condition computed empty (a Slice of no elements) reaches the Switch: a ModelError
    naming it, not an IndexError."""
    b = Builder("empty_computed_cond")
    x = b.input("x", (2, 3))
    c = b.input("c", (2,), np.bool_)
    empty = b.node("Slice", [c], begin=[0], size=[0], axes=[0])
    xt, xf = b.node("Switch", [empty, x], outputs=2)
    b.output(b.node("Merge", [xt, xf]))
    with pytest.raises(msv0.ModelError, match="Switch.*condition is empty"):
        msv0.Session(b.finish()).run([np.ones((2, 3), np.float32), np.ones(2, np.bool_)])


def _branch(b, name, ops):
    """A subgraph applying [(op, constant)...] in turn to its input; returns its index."""
    s = b.tensor(f"{name}_in")
    first = len(b.graph.nodes)
    y = s
    for k, (op, c) in enumerate(ops):
        y = b.node(op, [y, scalar(b, f"{name}_c{k}", [c])])
    return b.subgraph(name, [s], [y], list(range(first, len(b.graph.nodes))))


def _if_model():
    """x*2+1, then (y*3-0.5 if c else (y+4)*-1) in Partial subgraphs, then m*m+1: straight-line
    regions before the Switch, in each branch and after the Merge."""
    b = Builder("if_regions")
    x = b.input("x", (3, 5))
    c = b.input("c", (1,), np.bool_)
    then_sub = _branch(b, "then", [("Mul", 3.0), ("Sub", 0.5)])
    else_sub = _branch(b, "else", [("Add", 4.0), ("Mul", -1.0)])
    a = b.node("Add", [b.node("Mul", [x, scalar(b, "two", [2.0])]), scalar(b, "one", [1.0])])
    at, af = b.node("Switch", [c, a], outputs=2)
    m = b.node("Merge", [b.node("Partial", [at], subGraphIndex=then_sub),
                         b.node("Partial", [af], subGraphIndex=else_sub)])
    b.output(b.node("Add", [b.node("Mul", [m, m]), scalar(b, "one_more", [1.0])]))
    return b.finish()


@pytest.mark.parametrize("flag", [True, False])
def test_if_else_is_one_step_of_a_straight_line(flag, monkeypatch):
    """Switch + two Partials + Merge (as the converters write an if/else) plan as one step between
    two native Programs; the data-flow executor, its regions native, gives the same."""
    s = msv0.Session(_if_model())
    x = np.linspace(-3, 3, 15, dtype=np.float32).reshape(3, 5)
    a = x * np.float32(2) + np.float32(1)
    y = a * np.float32(3) - np.float32(0.5) if flag else (a + np.float32(4)) * np.float32(-1)
    want = y * y + np.float32(1)
    out, times = s.profile([x, np.array([flag])])
    np.testing.assert_array_equal(out[s.outputs[0].name], want)
    np.testing.assert_array_equal(s.run([x, np.array([flag])])[s.outputs[0].name], want)
    ran = [([s.model.nodes[i].op for i in t.nodes], t.program is not None) for t in times]
    # x*2+1 and m*m+1 each one step (the Add with a constant runs inside the Mul's kernel)
    assert ran == [(["Mul", "Add"], True), (["Switch", "Partial", "Partial", "Merge"], False),
                   (["Mul", "Add"], True)]
    monkeypatch.setattr(msv0.if_step, "find", lambda model: None)
    flow = msv0.Session(_if_model())
    out, times = flow.profile([x, np.array([flag])])
    np.testing.assert_array_equal(out[flow.outputs[0].name], want)
    ran = [([flow.model.nodes[k].op for k in t.nodes], t.program is not None) for t in times]
    # the regions before the Switch, in the taken branch and after the Merge: each a native step
    branch = ["Mul", "Sub"] if flag else ["Add", "Mul"]
    assert ran == [(["Mul", "Add"], True), (branch, True), (["Mul", "Add"], True)]
    assert len({t.program for t in times}) == 3


def test_if_else_step_shared_across_threads():
    """Each thread binds its own branch arenas: concurrent runs taking either branch stay exact."""
    s = msv0.Session(_if_model())
    x = np.linspace(-3, 3, 15, dtype=np.float32).reshape(3, 5)
    want = {flag: s.run([x, np.array([flag])])[s.outputs[0].name] for flag in (True, False)}

    def worker(k):
        for j in range(40):
            flag = (j + k) % 2 == 0
            np.testing.assert_array_equal(s.run([x, np.array([flag])])[s.outputs[0].name], want[flag])

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(worker, range(4)))


def test_if_else_with_branches_of_different_shapes_runs_as_data_flow():
    """Branches whose outputs differ in shape cannot be one planned step: data flow runs them."""
    b = Builder("if_shapes")
    x = b.input("x", (2, 3))
    c = b.input("c", (1,), np.bool_)
    s_in = b.tensor("then_in")
    first = len(b.graph.nodes)
    t = b.node("Reshape", [s_in], shape=[6])
    then_sub = b.subgraph("then", [s_in], [t], list(range(first, len(b.graph.nodes))))
    else_sub = _branch(b, "else", [("Add", 1.0)])
    xt, xf = b.node("Switch", [c, x], outputs=2)
    b.output(b.node("Merge", [b.node("Partial", [xt], subGraphIndex=then_sub),
                              b.node("Partial", [xf], subGraphIndex=else_sub)]))
    s = msv0.Session(b.finish())
    assert s._dataflow
    v = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(s.run([v, np.array([True])])[s.outputs[0].name], v.reshape(6))
    np.testing.assert_array_equal(s.run([v, np.array([False])])[s.outputs[0].name], v + 1)


def test_region_in_a_loop_fires_once_per_iteration():
    """i = 0; while i < 5: i = (i + 1) * 1 — a two-node region in a Merge/Switch loop."""
    b = Builder("loop_region")
    x = b.input("x", (1,))
    i_next = b.tensor("i_next")
    i = b.node("Merge", [x, i_next])
    i_true, i_false = b.node("Switch", [b.node("Less", [i, scalar(b, "limit", [5.0])], out_dtype=np.bool_), i],
                             outputs=2)
    b.node("Mul", [b.node("Add", [i_true, scalar(b, "one", [1.0])]), scalar(b, "unit", [1.0])], outputs=[i_next])
    b.output(i_false)
    s = msv0.Session(b.finish())
    out, times = s.profile([np.array([0.5], np.float32)])
    np.testing.assert_array_equal(out[s.outputs[0].name], [5.5])
    assert [[s.model.nodes[k].op for k in t.nodes] for t in times if t.program is not None] == [["Add", "Mul"]] * 5


def test_region_plans_of_a_growing_loop_stay_within_the_memory_limit():
    """while len(x) < 2**14: x = concat(x, x) + 0 — a region planned anew for each of 14 shapes;
    the plans kept (each holding its arena) stay within the memory_limit together."""
    b = Builder("growing")
    x0 = b.input("x", (1,))
    x_next = b.tensor("x_next")
    x = b.node("Merge", [x0, x_next])
    n = b.node("Shape", [x], out_dtype=np.int32)
    cond = b.node("Less", [n, b.const("limit", np.array([1 << 14], np.int32))], out_dtype=np.bool_)
    x_true, x_false = b.node("Switch", [cond, x], outputs=2)
    b.node("Add", [b.node("Concat", [x_true, x_true], axis=0), scalar(b, "zero", [0.0])], outputs=[x_next])
    b.output(x_false)
    limit = 1 << 18  # the largest arena (2 x 64 KiB and 32 KiB) fits; all 14 (~440 KiB) do not
    s = msv0.Session(b.finish(), memory_limit=limit)
    out = s.run([np.array([3.0], np.float32)])
    np.testing.assert_array_equal(out[s.outputs[0].name], np.full(1 << 14, 3.0, np.float32))
    interpreter = s._idle[0].interpreter
    kept = [plan.arena_bytes for plan, _, _ in interpreter.region_plans.values()]
    assert sum(kept) <= limit
    assert 1 < len(kept) < 14


def test_node_reading_two_regions_stays_alone():
    """Neg reads the Switch's output and a value computed before it: its own wave could start
    before the rest of a region, so it runs alone (from Python), and the rest still match."""
    b = Builder("mixed")
    x = b.input("x", (4,))
    c = b.input("c", (1,), np.bool_)
    pre = b.node("Mul", [x, scalar(b, "two", [2.0])])
    pre2 = b.node("Add", [pre, scalar(b, "one", [1.0])])
    xt, xf = b.node("Switch", [c, x], outputs=2)
    y = b.node("Add", [b.node("Mul", [xt, pre2]), scalar(b, "three", [3.0])])
    b.output(b.node("Merge", [y, xf]))
    s = msv0.Session(b.finish())
    v = np.array([1, -2, 3.5, 7], np.float32)
    out, times = s.profile([v, np.array([True])])
    np.testing.assert_array_equal(out[s.outputs[0].name], v * (v * np.float32(2) + np.float32(1)) + np.float32(3))
    assert [([s.model.nodes[k].op for k in t.nodes], t.program is not None) for t in times] == \
        [(["Mul", "Add"], True), (["Mul"], False), (["Add"], False)]


def test_constant_passed_to_a_branch_is_planned_as_constant(monkeypatch):
    """TFLite's IF hands its branches their weights through Switch and Partial: the branch's
    region plans them as the constants they are (w * 2 folds; MatMul packs it once), and gives
    what running each node alone gives."""
    b = Builder("const_branch")
    x = b.input("x", (2, 6))
    c = b.input("c", (1,), np.bool_)
    w = b.const("w", np.arange(24, dtype=np.float32).reshape(6, 4) - 11)
    sx, sw = b.tensor("sub_x"), b.tensor("sub_w")
    first = len(b.graph.nodes)
    sy = b.node("Add", [b.node("MatMul", [sx, b.node("Mul", [sw, scalar(b, "two", [2.0])])]),
                        scalar(b, "half", [0.5])])
    sub = b.subgraph("then", [sx, sw], [sy], list(range(first, len(b.graph.nodes))))
    xt, wt, xf, wf = b.node("Switch", [c, x, w], outputs=4)
    m = b.node("Merge", [b.node("Partial", [xt, wt], subGraphIndex=sub), xf])
    b.output(m)
    model = b.finish()
    v = np.linspace(-2, 2, 12, dtype=np.float32).reshape(2, 6)
    s = msv0.Session(model)
    out, times = s.profile([v, np.array([True])])
    got = out[s.outputs[0].name]
    np.testing.assert_allclose(got, v @ (np.arange(24, dtype=np.float32).reshape(6, 4) - 11) * 2 + 0.5, rtol=1e-6)
    assert [(s.model.nodes[t.nodes[0]].op, t.program is not None) for t in times] == [("MatMul", True), ("Add", True)]
    monkeypatch.setattr(msv0.dataflow, "regions", lambda model, order, fixed, keep: [model.nodes[i] for i in order])
    np.testing.assert_array_equal(msv0.Session(model).run([v, np.array([True])])[s.outputs[0].name], got)
