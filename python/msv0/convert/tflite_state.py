"""TFLite resource variables (VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE, set up by a
CALL_ONCE init subgraph), as streaming models keep their state between calls.

v0 has no state that outlives a run, so each variable becomes a graph input named after it
(its shared_name) holding the value before the call, and a graph output `<name>/next` with
the value after it: feed `<name>/next` back as `<name>` on the next call. The input's data is
the value the init subgraph assigns, its default (Model.input_defaults): a first call may leave
it out. Reads and assignments keep their order within the graph. A variable the graph reads but
never assigns is the init subgraph's constant.
"""
from __future__ import annotations

import numpy as np

from msv0.convert.emit import Unsupported, Val, handler_table

STATE_HANDLERS, handles = handler_table()
NEXT = "/next"  # suffix of the output that carries a variable's new value


class Variables:
    """Resource variables of the main graph: their names, initial and current values."""

    def __init__(self, conv, g, main: bool):
        self.main = main
        self.names: dict[int, str] = {}  # resource tensor -> variable name
        self.assigned: list[str] = []  # variables the graph assigns, in order
        self.initial: dict[str, np.ndarray] = {}  # value the init subgraph assigns
        self.current: dict[str, Val] = {}  # value at this point of the graph
        self.inputs: dict[str, Val] = {}  # state inputs, in order of first read
        # which variables are assigned decides, at their first read, input or constant
        for j in range(g.OperatorsLength()):
            raw = g.Operators(j)
            code = conv.codes[raw.OpcodeIndex()]
            if code == "VAR_HANDLE":
                self.names[int(raw.OutputsAsNumpy()[0])] = _shared_name(raw, g)
            elif code == "ASSIGN_VARIABLE" and raw.InputsLength() and int(raw.Inputs(0)) in self.names:
                name = self.names[int(raw.Inputs(0))]
                if name not in self.assigned:
                    self.assigned.append(name)

    def name_of(self, o, k: int) -> str:
        if not self.main:
            raise Unsupported("resource variables inside a WHILE/IF subgraph")
        t = o.inputs[k] if k < len(o.inputs) else -1
        if t not in self.names:
            raise Unsupported(f"input {k} is not a VAR_HANDLE resource")
        return self.names[t]

    def outputs(self) -> list[tuple[str, Val]]:
        return [(name + NEXT, self.current[name]) for name in self.assigned]


def _shared_name(raw, g) -> str:
    from tflite.VarHandleOptions import VarHandleOptions
    table = raw.BuiltinOptions()
    if table is not None:
        opt = VarHandleOptions()
        opt.Init(table.Bytes, table.Pos)
        if opt.SharedName():
            return opt.SharedName().decode()
    return g.Tensors(int(raw.OutputsAsNumpy()[0])).Name().decode()


@handles("VAR_HANDLE")
def var_handle(o):
    """Its variable was named when the graph was scanned."""


@handles("READ_VARIABLE")
def read_variable(o):
    v, e = o.conv.variables, o.e
    name = v.name_of(o, 0)
    if name not in v.current:  # first read: the value from before this call
        shape, dtype = o.out()
        if name in v.assigned:
            start = v.initial.get(name)
            if start is not None and (start.dtype != dtype or start.size != np.prod(shape, dtype=np.int64)):
                raise Unsupported(f"variable '{name}' starts as {list(start.shape)} {start.dtype}, is read as "
                                  f"{list(shape)} {np.dtype(dtype)}")
            index = e.b.input(name, shape, dtype, default=start)
            v.current[name] = v.inputs[name] = Val(shape, dtype, index=index)
        elif name in v.initial:
            a = np.asarray(v.initial[name], dtype).reshape(shape)
            v.current[name] = Val.of(a)
        else:
            raise Unsupported(f"variable '{name}' is read but neither initialised nor assigned")
    o.set(v.current[name])


@handles("ASSIGN_VARIABLE")
def assign_variable(o):
    v = o.conv.variables
    name = v.name_of(o, 0)
    value = o.inp(1)
    before = v.inputs.get(name)
    if before is not None and (tuple(before.shape), before.dtype) != (tuple(value.shape), value.dtype):
        raise Unsupported(f"variable '{name}' changes from {list(before.shape)} {before.dtype} to "
                          f"{list(value.shape)} {value.dtype}")
    v.current[name] = value


@handles("CALL_ONCE")
def call_once(o):
    """Runs the init subgraph at conversion: it may only give variables constant values."""
    conv, v = o.conv, o.conv.variables
    k = o.options("CallOnceOptions").InitSubgraphIndex()
    if not 0 < k < conv.model.SubgraphsLength():
        raise Unsupported(f"init subgraph {k} does not exist")
    g = conv.model.Subgraphs(k)
    names: dict[int, str] = {}
    for j in range(g.OperatorsLength()):
        raw = g.Operators(j)
        code = conv.codes[raw.OpcodeIndex()]
        ins = [int(i) for i in raw.InputsAsNumpy()] if raw.InputsLength() else []
        value = conv.constant_in(g, ins[1]) if code == "ASSIGN_VARIABLE" and len(ins) == 2 else None
        if code == "VAR_HANDLE":
            names[int(raw.OutputsAsNumpy()[0])] = _shared_name(raw, g)
        elif value is not None and ins[0] in names:
            v.initial[names[ins[0]]] = value
        else:
            raise Unsupported(f"init subgraph {k} computes with {code} (only constant assignments are converted)")

