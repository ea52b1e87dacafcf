"""Fuzz target: bytes -> msv0.convert (ONNX). Every outcome but a written model or an
msv0.Error is a finding. Run through scripts/fuzz.sh."""
import sys

import atheris

import msv0
from msv0.convert import convert

from instrument import instrument_msv0


def test_one_input(data: bytes) -> None:
    try:
        convert(data)
    except msv0.Error:
        pass


if __name__ == "__main__":
    instrument_msv0()
    test_one_input(b"")  # imports onnx (seconds), which would count against the first input's -timeout
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
