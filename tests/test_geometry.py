"""msv0.geometry: the r1.1 differences between the windowed ops' output-size rules."""
from types import SimpleNamespace

import pytest

import msv0
from msv0.fb.PadMode import PadMode
from msv0.fb.RoundMode import RoundMode
from msv0.geometry import conv_size, deconv_size, depthwise_size, pool_size

NODE = SimpleNamespace(label="node 0 'n' (Op)")


def test_same_upper_without_padding_zeroes_conv_pads_but_keeps_depthwise_pads():
    # size 9, k 1, s 3: the SAME total is -2
    assert conv_size(9, 1, 3, 1, PadMode.SAME_UPPER, 2, 2) == (3, 0)
    assert depthwise_size(NODE, 9, 1, 3, 1, PadMode.SAME_UPPER, 2, 2, "height") == (3, 2)


def test_an_empty_output_is_raised_to_one_for_conv_and_pool_but_fails_for_depthwise():
    assert conv_size(1, 5, 1, 1, PadMode.NOTSET, 0, 0) == (1, 0)
    assert pool_size(NODE, 1, 5, 1, PadMode.NOTSET, RoundMode.FLOOR, 0, 0, "height") == (1, 0)
    with pytest.raises(msv0.ModelError, match="output height would be"):
        depthwise_size(NODE, 1, 5, 1, 1, PadMode.NOTSET, 0, 0, "height")


def test_pool_round_modes():
    assert pool_size(NODE, 5, 2, 2, PadMode.NOTSET, RoundMode.FLOOR, 0, 0, "width") == (2, 0)
    assert pool_size(NODE, 5, 2, 2, PadMode.NOTSET, RoundMode.CEIL, 0, 0, "width") == (3, 0)


@pytest.mark.parametrize("mode,pads,want", [
    (PadMode.NOTSET, (1, 1), (5, 1)), (PadMode.CAFFE, (1, 1), (5, 1)), (PadMode.SAME_UPPER, (9, 9), (6, 0)),
    (PadMode.VALID, (1, 1), (7, 0))])
def test_deconv_pad_modes(mode, pads, want):
    assert deconv_size(NODE, 3, 3, 2, 1, mode, *pads) == want


def test_deconv_rejects_same_lower():
    with pytest.raises(msv0.ModelError, match="unsupported pad mode"):
        deconv_size(NODE, 3, 3, 2, 1, PadMode.SAME_LOWER, 0, 0)
