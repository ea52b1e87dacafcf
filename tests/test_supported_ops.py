"""Every schema primitive is either runnable or rejected with a reason."""
import msv0
from msv0.fb.PrimitiveType import PrimitiveType
from msv0.registry import REJECTED


def schema_ops():
    return sorted(n for n in vars(PrimitiveType) if not n.startswith("_") and n != "NONE")


def test_every_primitive_is_supported_or_rejected():
    supported = set(msv0.supported_ops())
    stragglers = [n for n in schema_ops() if n not in supported and n not in REJECTED]
    assert stragglers == []


def test_no_primitive_is_both():
    assert sorted(set(msv0.supported_ops()) & set(REJECTED)) == []


def test_rejections_give_reasons():
    assert all(reason.strip() for reason in REJECTED.values())
    assert set(REJECTED) <= set(schema_ops())
