"""msv0: a fast CPU inference runtime for MindSpore Lite v0 (.ms) models."""
from msv0.errors import Error, InputError, ModelError, ResourceError, UnsupportedOpError
from msv0.model import Model, TensorInfo, load
from msv0.registry import supported_ops
from msv0.session import Session
from msv0.isa import available_isas, isa, isa_cap, set_isa

__version__ = "0.1.0"

__all__ = [
    "Error", "InputError", "ModelError", "ResourceError", "UnsupportedOpError", "Model", "TensorInfo", "load", "Session",
    "supported_ops", "isa", "available_isas", "set_isa", "isa_cap", "__version__",
]
