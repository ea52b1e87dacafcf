"""The exceptions msv0 raises for bad models and bad inputs. All derive from Error."""


class Error(Exception):
    """Base class of every msv0 error."""


class ModelError(Error, ValueError):
    """The model is malformed or inconsistent; the message names the tensor or node."""


class UnsupportedOpError(Error, NotImplementedError):
    """Nodes msv0 cannot run; `nodes` lists (node name, op, reason) for every one of them."""

    def __init__(self, message: str, nodes: list[tuple[str, str, str]] | None = None):
        super().__init__(message)
        self.nodes = nodes or []


class InputError(Error, ValueError):
    """Feeds do not match the model's inputs (names, count, dtype or shape), or a Session argument is
    out of range."""


class ResourceError(Error):
    """A model or feed needs more memory or work than the Session's limits allow; the message
    names the node or tensor and how much."""


def node_error(label: str, e: Exception) -> Error:
    """The msv0 error for a plain exception raised while a node plans or runs: an op's own
    check that slipped through (ModelError), or memory that ran out (ResourceError)."""
    if isinstance(e, MemoryError):
        return ResourceError(f"{label}: out of memory: {e}")
    return ModelError(f"{label}: {type(e).__name__}: {e}")
