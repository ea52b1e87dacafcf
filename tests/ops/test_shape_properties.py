"""Property tests of shape inference: broadcasting binary ops against NumPy's rules and values,
and Reshape/Transpose/Concat against NumPy, on shapes drawn by hypothesis.

Derandomized with a bounded number of examples, so the suite stays fast and reproducible."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import array_shapes, mutually_broadcastable_shapes

from oprun import run_op

PROPERTY = settings(max_examples=20, deadline=None, derandomize=True, database=None)
BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Maximum": np.maximum, "Minimum": np.minimum}


def _values(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


@PROPERTY
@given(shapes=mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=5, min_side=1, max_side=4),
       name=st.sampled_from(sorted(BINARY)), seed=st.integers(0, 2**16))
def test_binary_broadcast_matches_numpy(shapes, name, seed):
    a_shape, b_shape = shapes.input_shapes
    a, b = _values(a_shape, seed), _values(b_shape, seed + 1)
    (y,) = run_op(name, [a, b])
    assert y.shape == np.broadcast_shapes(a_shape, b_shape)
    np.testing.assert_array_equal(y, BINARY[name](a, b))


@st.composite
def reshapes(draw):
    """A shape and a target with the same element count (dims regrouped), maybe one -1."""
    shape = draw(array_shapes(min_dims=1, max_dims=5, min_side=1, max_side=4))
    dims = list(shape)
    target = []
    while dims:  # merge runs of neighbouring dims of a random permutation into target dims
        k = draw(st.integers(1, len(dims)))
        target.append(int(np.prod(dims[:k])))
        dims = dims[k:]
    target = draw(st.permutations(target))
    if draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return shape, target


@PROPERTY
@given(case=reshapes(), seed=st.integers(0, 2**16))
def test_reshape_matches_numpy(case, seed):
    shape, target = case
    x = _values(shape, seed)
    (y,) = run_op("Reshape", [x], shape=target)
    np.testing.assert_array_equal(y, x.reshape(target))


@st.composite
def transposes(draw):
    shape = draw(array_shapes(min_dims=1, max_dims=5, min_side=1, max_side=4))
    return shape, draw(st.permutations(range(len(shape))))


@PROPERTY
@given(case=transposes(), seed=st.integers(0, 2**16))
def test_transpose_matches_numpy(case, seed):
    shape, perm = case
    x = _values(shape, seed)
    (y,) = run_op("Transpose", [x], perm=list(perm))
    np.testing.assert_array_equal(y, x.transpose(perm))


@st.composite
def concats(draw):
    """2 to 4 shapes equal except along a (possibly negative) axis."""
    shape = draw(array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=4))
    rank = len(shape)
    axis = draw(st.integers(-rank, rank - 1))
    sizes = draw(st.lists(st.integers(1, 4), min_size=2, max_size=4))
    return [tuple(n if i == axis % rank else d for i, d in enumerate(shape)) for n in sizes], axis


@PROPERTY
@given(case=concats(), seed=st.integers(0, 2**16))
def test_concat_matches_numpy(case, seed):
    shapes, axis = case
    xs = [_values(s, seed + k) for k, s in enumerate(shapes)]
    (y,) = run_op("Concat", xs, axis=axis)
    np.testing.assert_array_equal(y, np.concatenate(xs, axis))
