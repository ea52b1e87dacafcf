"""The native Copy kernel object (csrc/kernels/copy.cc) behind float32 and int8 Pad, Concat, Slice,
StridedSlice and Transpose: every output element written once and nothing outside it, bounds
checked at construction, and inside a Program. The ops' results are tested against NumPy in
test_pad.py and test_shape.py (float32) and test_array_s8.py (int8)."""
import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from msv0.fb.PaddingMode import PaddingMode
from msv0.ops import copy_moves
from oprun import assert_program_matches_single_calls, run_op

F = np.float32
GUARD = 37  # elements on each side of the output, checked untouched
DTYPES = [np.float32, np.int8]
FILL = {np.float32: 2.5, np.int8: -7}  # a Pad's value


@pytest.fixture(params=DTYPES, ids=lambda d: np.dtype(d).name)
def dt(request):
    return request.param


def _data(rng, shape, dt):
    return rng.standard_normal(shape).astype(F) if dt == F else rng.integers(-128, 128, shape, dtype=np.int8)


def _guard(size, dt):
    """NaN (float32) or 0x5A (int8) everywhere."""
    return np.full(size, np.nan if dt == F else 0x5A, dt)


def _untouched(a) -> bool:
    return bool(np.isnan(a).all()) if a.dtype == F else bool((a == 0x5A).all())


def _run_guarded(kernel, inputs, out_shape):
    size = int(np.prod(out_shape))
    buf = _guard(size + 2 * GUARD, inputs[0].dtype)
    y = buf[GUARD:GUARD + size].reshape(out_shape)
    kernel(inputs, [y])
    assert _untouched(buf[:GUARD]) and _untouched(buf[GUARD + size:]), "wrote outside y"
    return y


@pytest.mark.parametrize("mode,np_mode", [(PaddingMode.CONSTANT, "constant"), (PaddingMode.REFLECT, "reflect"),
                                          (PaddingMode.SYMMETRIC, "symmetric")])
@pytest.mark.parametrize("shape,before,after", [((1, 5, 6, 3), (0, 2, 1, 0), (0, 1, 3, 2)), ((7,), (3,), (2,)),
                                                ((2, 3, 17), (1, 2, 0), (0, 0, 4))])
def test_pad_kernel(isa, rng, dt, mode, np_mode, shape, before, after):
    x = _data(rng, shape, dt)
    out_shape = tuple(d + b + e for d, b, e in zip(shape, before, after))
    y = _run_guarded(copy_moves.pad(shape, before, after, mode, FILL[dt], dt), [x], out_shape)
    kw = {"constant_values": FILL[dt]} if np_mode == "constant" else {}
    np.testing.assert_array_equal(y, np.pad(x, list(zip(before, after)), mode=np_mode, **kw))


@pytest.mark.parametrize("perm", [(0, 2, 3, 1), (0, 3, 1, 2), (3, 2, 1, 0), (1, 0, 2, 3)])
def test_transpose_kernel(isa, rng, dt, perm):
    x = _data(rng, (2, 3, 5, 17), dt)
    out_shape = tuple(x.shape[p] for p in perm)
    kernel = copy_moves.gather(x.shape, out_shape, out_shape, perm, [0] * 4, [1] * 4, dt)
    np.testing.assert_array_equal(_run_guarded(kernel, [x], out_shape), x.transpose(perm))


# Transposes copied in blocks of 16 rows: rows per inner run that are not a multiple of the block,
# several runs (the block stops at each run's end), and two threads that split rows mid-block.
@pytest.mark.parametrize("shape,perm", [((2, 37, 40), (0, 2, 1)), ((3, 20, 1, 35), (0, 3, 2, 1)),
                                        ((5, 16, 3), (2, 0, 1)), ((2, 3, 33, 18), (0, 3, 1, 2))], ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_transpose_kernel_blocks(isa, rng, dt, shape, perm, threads):
    x = _data(rng, shape, dt)
    out_shape = tuple(x.shape[p] for p in perm)
    kernel = copy_moves.gather(x.shape, out_shape, out_shape, perm, [0] * len(shape), [1] * len(shape), dt)
    pool = msv0._core.ThreadPool(threads)
    pool.bind()
    try:
        np.testing.assert_array_equal(_run_guarded(kernel, [x], out_shape), x.transpose(perm))
    finally:
        msv0._core.ThreadPool.unbind()


# Over 16 KB the rows are split in parts, each the same share of every move's rows (a Pad's copy
# and its fills, each Concat input), run by one thread or two: part boundaries fall at other rows
# in each move, inside transposed blocks, and at other indices of the row odometer.
@pytest.mark.parametrize("case", ["channel_pad", "pad_all_sides", "concat", "transpose"])
@pytest.mark.parametrize("threads", [1, 2])
def test_copy_kernel_in_parts(isa, rng, dt, case, threads):
    if case in ("channel_pad", "pad_all_sides"):
        x = _data(rng, (2, 37, 29, 13), dt)
        before, after = ((0, 0, 0, 0), (0, 0, 0, 3)) if case == "channel_pad" else ((1, 2, 1, 3), (0, 3, 4, 1))
        inputs, want = [x], np.pad(x, list(zip(before, after)), constant_values=FILL[dt])
        kernel = copy_moves.pad(x.shape, before, after, PaddingMode.CONSTANT, FILL[dt], dt)
    elif case == "concat":
        inputs = [_data(rng, (3, 33, 31, c), dt) for c in (5, 16, 1)]
        want = np.concatenate(inputs, axis=3)
        kernel = copy_moves.concat([v.shape for v in inputs], 3, want.shape, dt)
    else:
        x = _data(rng, (3, 150, 41), dt)
        inputs, want = [x], x.transpose(0, 2, 1)
        kernel = copy_moves.gather(x.shape, want.shape, want.shape, (0, 2, 1), [0] * 3, [1] * 3, dt)
    assert want.nbytes > 16384
    pool = msv0._core.ThreadPool(threads)
    pool.bind()
    try:
        np.testing.assert_array_equal(_run_guarded(kernel, inputs, want.shape), want)
    finally:
        msv0._core.ThreadPool.unbind()


# Split: one move per output, each into its own array (over 16 KB in parts), nothing written
# outside any of them.
@pytest.mark.parametrize("shape,axis,sizes", [((2, 37, 29, 13), 3, (5, 8)), ((3, 40, 50), 1, (7, 33)),
                                              ((1, 7, 5), 2, (1, 1, 3))], ids=str)
@pytest.mark.parametrize("threads", [1, 2])
def test_split_kernel(isa, rng, dt, shape, axis, sizes, threads):
    x = _data(rng, shape, dt)
    out_shapes = [shape[:axis] + (n,) + shape[axis + 1:] for n in sizes]
    bufs = [_guard(int(np.prod(s)) + 2 * GUARD, dt) for s in out_shapes]
    ys = [b[GUARD:-GUARD].reshape(s) for b, s in zip(bufs, out_shapes)]
    kernel = copy_moves.split(shape, axis, out_shapes, dt)
    pool = msv0._core.ThreadPool(threads)
    pool.bind()
    try:
        kernel([x], ys)
    finally:
        msv0._core.ThreadPool.unbind()
    for b, y, want in zip(bufs, ys, np.split(x, np.cumsum(sizes)[:-1], axis=axis)):
        assert _untouched(b[:GUARD]) and _untouched(b[-GUARD:]), "wrote outside an output"
        np.testing.assert_array_equal(y, want)


def test_strided_gather_and_concat_kernels(isa, rng, dt):
    x = _data(rng, (4, 9, 19), dt)
    kernel = copy_moves.gather(x.shape, (2, 3, 6), (2, 3, 6), range(3), [3, 1, 18], [-2, 3, -3], dt)
    np.testing.assert_array_equal(_run_guarded(kernel, [x], (2, 3, 6)), x[3::-2, 1::3, 18::-3][:2, :3, :6])
    parts = [_data(rng, (4, 9, c), dt) for c in (3, 16, 1)]
    y = _run_guarded(copy_moves.concat([p.shape for p in parts], 2, (4, 9, 20), dt), parts, (4, 9, 20))
    np.testing.assert_array_equal(y, np.concatenate(parts, axis=2))


def test_copy_kernel_checks_its_moves():
    with pytest.raises(ValueError, match="reads outside"):
        msv0._core.Copy([[2, 3]], [[2, 3]], [(0, 0, 0.0, 1, 0, [2, 3], [3, 1], [3, 1])], "f")
    with pytest.raises(ValueError, match="writes outside"):
        msv0._core.Copy([[2, 3]], [[2, 3]], [(-1, 0, 0.0, 0, 0, [3, 3], [0, 0], [3, 1])], "f")
    with pytest.raises(ValueError, match="input index"):
        msv0._core.Copy([[2, 3]], [[2, 3]], [(1, 0, 0.0, 0, 0, [2, 3], [3, 1], [3, 1])], "f")
    with pytest.raises(ValueError, match="output index"):
        msv0._core.Copy([[2, 3]], [[2, 3]], [(0, 1, 0.0, 0, 0, [2, 3], [3, 1], [3, 1])], "f")
    with pytest.raises(ValueError, match="writes outside"):  # inside the first output, not the second
        msv0._core.Copy([[2, 3]], [[2, 3], [2, 1]], [(0, 1, 0.0, 0, 0, [2, 2], [3, 1], [1, 1])], "f")
    with pytest.raises(ValueError, match="reads outside"):  # a negative stride below the start
        msv0._core.Copy([[6]], [[3]], [(0, 0, 0.0, 1, 0, [3], [-1], [1])], "f")
    with pytest.raises(ValueError, match="int8 fill value"):
        msv0._core.Copy([[2, 3]], [[2, 3]], [(-1, 0, 0.5, 0, 0, [2, 3], [0, 0], [3, 1])], "b")
    with pytest.raises(ValueError, match="type"):
        msv0._core.Copy([[2, 3]], [[2, 3]], [(0, 0, 0.0, 0, 0, [2, 3], [3, 1], [3, 1])], "i")


def test_copies_run_inside_one_program(rng):
    """Transpose → Pad (reflect) → Slice → Concat → Activation: one native Program, equal to
    calling each kernel object alone."""
    b = Builder("copies")
    x = b.input("x", (1, 3, 6, 5), F)
    t, p, s, c, y = (b.tensor(n) for n in "tpscy")
    b.node("Transpose", [x], outputs=[t], perm=[0, 2, 3, 1])  # (1, 6, 5, 3)
    b.node("Pad", [t], outputs=[p], paddings=[0, 0, 1, 2, 2, 1, 0, 0], paddingMode=PaddingMode.REFLECT)
    b.node("Slice", [p], outputs=[s], begin=[0, 0, 0, 1], size=[1, 9, 8, 2])
    b.node("Concat", [s, p], outputs=[c], axis=3)
    b.node("Activation", [c], outputs=[y], type=1)
    b.output(y)
    feeds = [rng.standard_normal((1, 3, 6, 5)).astype(F)]
    for threads in (1, 2):
        assert_program_matches_single_calls(b.finish(), feeds, threads, program_steps=5)


def test_rank_above_the_kernels_moves_through_numpy(rng):
    x = rng.standard_normal((2, 1, 3, 1, 2, 1, 2, 1, 3)).astype(F)
    perm = list(range(9))[::-1]
    (y,) = run_op("Transpose", [x], perm=perm)
    np.testing.assert_array_equal(y, x.transpose(perm))
