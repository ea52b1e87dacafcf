"""Layout ops against NumPy references (format-v0.md §5)."""
import numpy as np
import pytest

import msv0
from msv0.builder import Builder
from msv0.fb.TypeId import TypeId
from oprun import Const, run_op


def arr(shape, rng, dtype=np.float32):
    return (rng.standard_normal(shape) * 10).astype(dtype)


@pytest.mark.parametrize("spec,expect", [([2, -1], (2, 12)), ([0, 0, -1], (2, 3, 4)), ([-1], (24,)),
                                          ([4, 0, 2], (4, 3, 2)), ([1, 2, 3, 4], (1, 2, 3, 4))])
def test_reshape_attr(rng, spec, expect):
    x = arr((2, 3, 4), rng)
    (y,) = run_op("Reshape", [x], shape=spec)
    np.testing.assert_array_equal(y, x.reshape(expect))


@pytest.mark.parametrize("dt,tid", [(np.int32, None), (np.int64, None), (np.int8, None), (np.uint32, None),
                                    (np.float32, TypeId.kNumberTypeFloat)])
def test_reshape_tensor_types(rng, dt, tid):
    x = arr((2, 3, 4), rng)
    spec = np.array([3, -1]).astype(dt) if dt != np.uint32 else np.array([3, 2**32 - 1], dt)
    (y,) = run_op("Reshape", [x, Const(spec, type_id=tid)])
    np.testing.assert_array_equal(y, x.reshape(3, 8))


def test_reshape_float32_shape_rejected(rng):
    with pytest.raises(msv0.ModelError, match="dataType 43"):
        run_op("Reshape", [arr((2, 3), rng), Const(np.array([6], np.float32))])


def test_reshape_empty_shape_gives_scalar():
    (y,) = run_op("Reshape", [np.array([7.5], np.float32)], shape=[])
    assert y.shape == () and y == 7.5
    # A file cannot hold an empty constant (no data means not constant, format-v0.md §2), so
    # the empty shape tensor comes from constant folding here: Slice of size 0.
    b = Builder("t")
    x = b.input("x", (1, 1))
    s = b.node("Slice", [b.const("c", np.array([2, 3], np.int32))], out_dtype=np.int32, begin=[1], size=[0])
    y = b.node("Reshape", [x, s])
    b.output(y)
    out = msv0.Session(b.finish()).run([np.array([[7.5]], np.float32)])
    (y,) = out.values()
    assert y.shape == () and y == 7.5


def test_reshape_runtime_shape_fails(rng):
    with pytest.raises(msv0.ModelError, match="constant"):
        run_op("Reshape", [arr((2, 3), rng), np.array([6], np.int32)])


@pytest.mark.parametrize("spec", [[-1, -1], [5, -1], [7], [-2, 3], [0, 0, 0, 0]])
def test_reshape_bad(rng, spec):
    with pytest.raises(msv0.ModelError):
        run_op("Reshape", [arr((2, 3), rng)], shape=spec)


def test_reshape_int8_and_shape_op(rng):
    x = rng.integers(-128, 127, (3, 5), dtype=np.int8)
    q = [{"scale": 0.1, "zeroPoint": 0, "inited": True, "numBits": 8}]  # r1.1's int8 Reshape reads them
    (y,) = run_op("Reshape", [x], out_dtypes=[np.int8], in_quant=[q], out_quant=[q], shape=[5, 3])
    np.testing.assert_array_equal(y, x.reshape(5, 3))
    (s,) = run_op("Shape", [arr((2, 7, 1, 3), rng)], out_dtypes=[np.int32])
    assert s.dtype == np.int32
    np.testing.assert_array_equal(s, [2, 7, 1, 3])


def test_flatten_identity_dropout(rng):
    x = arr((3, 2, 5, 1), rng)
    np.testing.assert_array_equal(run_op("Flatten", [x])[0], x.reshape(3, 10))
    np.testing.assert_array_equal(run_op("Identity", [x])[0], x)
    np.testing.assert_array_equal(run_op("Dropout", [x], ratio=0.3)[0], x)


@pytest.mark.parametrize("axis,expect", [([], (3, 5)), ([0], (3, 1, 5)), ([0, 2], (3, 5)), ([2], (1, 3, 5)),
                                         ([2, 0], (1, 3, 5)), ([-4], (1, 3, 1, 5))])
def test_squeeze(rng, axis, expect):
    x = arr((1, 3, 1, 5), rng)
    (y,) = run_op("Squeeze", [x], axis=axis)
    np.testing.assert_array_equal(y, x.reshape(expect))


def test_squeeze_non_one_fails(rng):
    with pytest.raises(msv0.ModelError, match="size 3"):
        run_op("Squeeze", [arr((1, 3), rng)], axis=[1])


@pytest.mark.parametrize("axis,expect", [([0], (1, 2, 3)), ([1], (2, 1, 3)), ([0, 3], (1, 2, 3, 1)),
                                         ([-1], (2, 3, 1)), ([0, -1], (1, 2, 3, 1))])
def test_unsqueeze(rng, axis, expect):
    x = arr((2, 3), rng)
    (y,) = run_op("Unsqueeze", [x], axis=axis)
    np.testing.assert_array_equal(y, x.reshape(expect))


def test_unsqueeze_empty_axis_squeezes(rng):
    x = arr((1, 2, 1, 3), rng)
    (y,) = run_op("Unsqueeze", [x], axis=[])
    assert y.shape == (2, 3)


def test_unsqueeze_bad(rng):
    with pytest.raises(msv0.ModelError):
        run_op("Unsqueeze", [arr((2, 3), rng)], axis=[7])


@pytest.mark.parametrize("dim,expect", [(0, (1, 2, 3)), (2, (2, 3, 1)), (-1, (2, 3, 1)), (-3, (1, 2, 3))])
def test_expand_dims(rng, dim, expect):
    x = arr((2, 3), rng)
    np.testing.assert_array_equal(run_op("ExpandDims", [x], dim=dim)[0], x.reshape(expect))
    with pytest.raises(msv0.ModelError):
        run_op("ExpandDims", [x], dim=4)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_concat(rng, axis):
    shapes = [(2, 3, 4)] * 3
    xs = []
    for k, s in enumerate(shapes):
        s = list(s)
        s[axis] = k + 1
        xs.append(arr(s, rng))
    (y,) = run_op("Concat", xs, axis=axis)
    np.testing.assert_array_equal(y, np.concatenate(xs, axis))


def test_concat_const_and_bad(rng):
    a, b = arr((2, 3), rng), arr((2, 5), rng)
    np.testing.assert_array_equal(run_op("Concat", [a, Const(b)], axis=1)[0], np.concatenate([a, b], 1))
    with pytest.raises(msv0.ModelError):
        run_op("Concat", [a, arr((3, 3), rng)], axis=1)
    with pytest.raises(msv0.ModelError):
        run_op("Concat", [a, arr((2, 3, 1), rng)], axis=1)


@pytest.mark.parametrize("n,sizes,dim", [(3, [], 1), (2, [2, 4], 1), (3, [1, 2, -1], -1), (2, [5, -1], 2),
                                         (1, [], 0)])
def test_split(rng, n, sizes, dim):
    x = arr((2, 6, 7), rng)
    outs = run_op("Split", [x], outputs=n, numberSplit=n, sizeSplits=sizes, splitDim=dim)
    d = dim % 3
    cuts = np.cumsum(sizes[:-1]).tolist() if sizes else n
    for o, r in zip(outs, np.split(x, cuts, axis=d)):
        np.testing.assert_array_equal(o, r)


@pytest.mark.parametrize("n,sizes", [(4, []), (2, [2, 2]), (2, [-1, 4]), (3, [2, 3])])
def test_split_bad(rng, n, sizes):
    with pytest.raises(msv0.ModelError):
        run_op("Split", [arr((2, 6), rng)], outputs=n, numberSplit=n, sizeSplits=sizes, splitDim=1)


@pytest.mark.parametrize("axes,begin,size,index", [
    ([], [0, 1, 2], [2, -1, 3], np.s_[0:2, 1:, 2:5]),
    ([1], [2], [1], np.s_[:, 2:3]),
    ([2, 0], [1, 1], [-1, 1], np.s_[1:2, :, 1:]),
    ([-1], [6], [-1], np.s_[:, :, 6:]),
])
def test_slice(rng, axes, begin, size, index):
    x = arr((3, 4, 7), rng)
    (y,) = run_op("Slice", [x], axes=axes, begin=begin, size=size)
    np.testing.assert_array_equal(y, x[index])


def test_slice_tensor_form_and_bad(rng):
    x = arr((3, 4), rng)
    (y,) = run_op("Slice", [x, Const(np.array([1, 0], np.int32)), Const(np.array([2, 3], np.int32))])
    np.testing.assert_array_equal(y, x[1:3, 0:3])
    for begin, size in [([-1, 0], [1, 1]), ([0, 0], [-2, 1]), ([2, 0], [2, 1]), ([4, 0], [-1, 1])]:
        with pytest.raises(msv0.ModelError):
            run_op("Slice", [x], begin=begin, size=size)


def ss_reference(x, begin, end, stride, bm=0, em=0, el=0, na=0, sm=0):
    """An independent loop model of r1.1's StridedSlice (format-v0.md §5)."""
    n = len(begin)
    begin, end, stride = list(begin), list(end), list(stride)
    shape = list(x.shape)
    bit = lambda m, i: i < n and (m >> i) & 1  # noqa: E731
    cleared = set()
    for i in range(n):
        if bit(na, i):
            shape.insert(i, 1)
            begin[i], end[i], stride[i] = 0, 1, 1
            begin.append(0)
            end.append(shape[len(begin) - 1])
            stride.append(1)
            cleared.add(i)
    m = len(begin)
    for i in range(m):
        if bit(bm, i) and i not in cleared:
            begin[i] = 0
        if bit(em, i) and i not in cleared:
            end[i] = shape[i]
    for i in range(n):
        if bit(el, i) and i not in cleared:
            begin[i], end[i] = 0, shape[i]
            break
    xs = x.reshape(shape)
    idx = []
    for i in range(len(shape)):
        if i >= m:
            idx.append(list(range(shape[i])))
            continue
        b = begin[i] + shape[i] if begin[i] < 0 else begin[i]
        e = end[i] + shape[i] if end[i] < 0 else end[i]
        if bit(sm, i) and i not in cleared:
            idx.append([b])
            continue
        s = stride[i]
        got, j = [], b
        while (j < e) if s > 0 else (j > e):
            got.append(j)
            j += s
        idx.append(got)
    out = xs[np.ix_(*idx)]
    keep = [d for i, d in enumerate(out.shape) if not (bit(sm, i) and i not in cleared)]
    return out.reshape(keep)


SS_CASES = [
    ([0, 1, 0], [2, 3, 5], [1, 1, 2]),
    ([1, -1, 4], [3, 0, 0], [1, -1, -2]),
    ([-2, 0], [-1, 4], [1, 3]),
    ([0], [3], [2]),
    ([2, 3, 4], [0, 0, 0], [-1, -1, -1]),
]


@pytest.mark.parametrize("case", range(len(SS_CASES)))
@pytest.mark.parametrize("masks", [(0, 0, 0, 0, 0), (1, 0, 0, 0, 0), (0, 2, 0, 0, 0), (5, 5, 0, 0, 0),
                                   (0, 0, 0, 0, 1), (0, 0, 0, 0, 2), (3, 0, 0, 0, 4), (0, 0, 1, 0, 0),
                                   (0, 0, 2, 0, 2), (0, 0, 6, 0, 0), (7, 7, 0, 0, 0), (0, 0, 0, 1, 0),
                                   (0, 0, 0, 2, 1), (1, 0, 0, 1, 2), (0, 2, 0, 4, 0)])
def test_strided_slice_masks(rng, case, masks):
    x = arr((3, 4, 5), rng)
    begin, end, stride = SS_CASES[case]
    bm, em, el, na, sm = masks
    attrs = dict(begin=begin, end=end, stride=stride, beginMask=bm, endMask=em, ellipsisMask=el,
                 newAxisMask=na, shrinkAxisMask=sm)
    try:
        want = ss_reference(x, begin, end, stride, bm, em, el, na, sm)
        # the reference treats out-of-range reads as valid Python indices; the op must not
        oob = False
    except IndexError:
        oob = True
    if not oob:
        # an index numpy accepted may still be negative (wrapped) or past the end: out of bounds
        pass
    try:
        (y,) = run_op("StridedSlice", [x], **attrs)
    except msv0.ModelError:
        assert oob or _reads_out_of_bounds(x, begin, end, stride, masks)
        return
    assert not oob
    assert y.shape == want.shape
    np.testing.assert_array_equal(y, want)


def _reads_out_of_bounds(x, begin, end, stride, masks):
    """Whether a case legitimately fails: a read outside the input or a negative size."""
    bm, em, el, na, sm = masks
    n = len(begin)
    begin, end, stride = list(begin), list(end), list(stride)
    shape = list(x.shape)
    for i in range(n):
        if (na >> i) & 1:
            shape.insert(i, 1)
            begin[i], end[i], stride[i] = 0, 1, 1
            begin.append(0)
            end.append(shape[len(begin) - 1])
            stride.append(1)
    for i in range(len(begin)):
        if i < n and not (na >> i) & 1:
            if (bm >> i) & 1:
                begin[i] = 0
            if (em >> i) & 1:
                end[i] = shape[i]
    for i in range(n):
        if (el >> i) & 1 and not (na >> i) & 1:
            begin[i], end[i] = 0, shape[i]
            break
    for i in range(len(begin)):
        b = begin[i] + shape[i] if begin[i] < 0 else begin[i]
        e = end[i] + shape[i] if end[i] < 0 else end[i]
        if i < n and (sm >> i) & 1 and not (na >> i) & 1:
            if not 0 <= b < shape[i]:
                return True
            continue
        s = stride[i]
        num = e - b + s + (1 if s < 0 else -1)
        cnt = int(num / s)
        if cnt < 0:
            return True
        if cnt and not (0 <= b < shape[i] and 0 <= b + s * (cnt - 1) < shape[i]):
            return True
    return False


def test_strided_slice_known_values(rng):
    x = arr((4, 6), rng)
    np.testing.assert_array_equal(run_op("StridedSlice", [x], begin=[1, 0], end=[3, 6], stride=[1, 2])[0],
                                  x[1:3, 0:6:2])
    np.testing.assert_array_equal(run_op("StridedSlice", [x], begin=[3, 5], end=[0, 0], stride=[-1, -2])[0],
                                  x[3:0:-1, 5:0:-2])
    # shrink dim 0 at begin -1 (the last row)
    np.testing.assert_array_equal(run_op("StridedSlice", [x], begin=[-1], end=[0], stride=[1],
                                         shrinkAxisMask=1)[0], x[-1])
    # newAxis at 0 overwrites slot 0; slot 1's spec now applies to dim 1 (size 4)
    (y,) = run_op("StridedSlice", [x], begin=[2, 1], end=[3, 3], stride=[1, 1], newAxisMask=1)
    np.testing.assert_array_equal(y, x[None, 1:3, :])


@pytest.mark.parametrize("begin,end,stride", [([0], [9], [1]), ([5], [6], [1]), ([-9], [2], [1]), ([0], [3], [0]),
                                              ([3], [1], [1])])
def test_strided_slice_out_of_bounds_fails(rng, begin, end, stride):
    with pytest.raises(msv0.ModelError):
        run_op("StridedSlice", [arr((4, 3), rng)], begin=begin, end=end, stride=stride)


def test_strided_slice_tensor_forms(rng):
    x = arr((4, 5, 6), rng)
    c = lambda v: Const(np.array(v, np.int32))  # noqa: E731
    (y,) = run_op("StridedSlice", [x, c([1, 0]), c([4, 5]), c([2, 2])])
    np.testing.assert_array_equal(y, x[1:4:2, 0:5:2])
    # 5-input form: axes pick dims; begin/end are clamped into range
    (y,) = run_op("StridedSlice", [x, c([1, -100]), c([100, 4]), c([2, 0]), c([1, 1])])
    np.testing.assert_array_equal(y, x[0:4, :, 1:])
    (y,) = run_op("StridedSlice", [x, c([-1]), c([-100]), c([-1]), c([-2])])
    np.testing.assert_array_equal(y, x[:, :, ::-2])
    with pytest.raises(msv0.ModelError):
        run_op("StridedSlice", [x, Const(np.array([1], np.int64)), c([3]), c([1])])
    with pytest.raises(msv0.ModelError):
        run_op("StridedSlice", [x, np.array([1], np.int32), c([3]), c([1])])


@pytest.mark.parametrize("perm", [(1, 0, 2), (2, 0, 1), (0, 1, 2), (2, 1, 0)])
def test_transpose(rng, perm):
    x = arr((2, 3, 5), rng)
    np.testing.assert_array_equal(run_op("Transpose", [x], perm=perm)[0], x.transpose(perm))
    np.testing.assert_array_equal(run_op("Transpose", [x, Const(np.array(perm, np.int32))])[0], x.transpose(perm))


def test_transpose_fixed_and_bad(rng):
    x = arr((2, 3, 4, 5), rng)
    np.testing.assert_array_equal(run_op("Nchw2Nhwc", [x])[0], x.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(run_op("Nhwc2Nchw", [x])[0], x.transpose(0, 3, 1, 2))
    for perm in [(0, 1), (0, 1, 1, 2), (0, 1, 2, 4)]:
        with pytest.raises(msv0.ModelError):
            run_op("Transpose", [x], perm=perm)
    with pytest.raises(msv0.ModelError):
        run_op("Nchw2Nhwc", [arr((2, 3), rng)])


def test_shape_of_runtime_input_folds_into_reshape():
    """Shape -> Gather -> Concat -> Reshape on a runtime input plans statically."""
    from msv0.builder import Builder

    b = Builder("dynamic_reshape")
    x = b.input("x", (2, 3, 4))
    shp = b.node("Shape", [x], out_dtype=np.int32)
    batch = b.node("Gather", [shp, b.const("i0", np.array([0], np.int32))], out_dtype=np.int32)
    new_shape = b.node("Concat", [batch, b.const("m1", np.array([-1], np.int32))], out_dtype=np.int32)
    y = b.node("Reshape", [x, new_shape])
    b.output(y)
    v = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = msv0.Session(b.finish()).run([v])
    np.testing.assert_array_equal(out[b.graph.allTensors[y].name], v.reshape(2, 12))


def test_permute(rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    (y,) = run_op("Permute", [x], order=[2, 0, 1])
    np.testing.assert_array_equal(y, x.transpose(2, 0, 1))
    with pytest.raises(msv0.ModelError):
        run_op("Permute", [x], order=[0, 0, 1])
