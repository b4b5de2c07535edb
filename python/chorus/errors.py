"""Exceptions raised by chorus: one class per result code of the C API.

Every exception carries the C library's message (``str(e)``, the text of
``chorus_comm_last_error``) and its result code (``e.code``). A call refused on
one rank fails on every rank of the communicator with the same class (the C
API's rule: one verdict per call)."""


class Error(RuntimeError):
    """A chorus call failed. ``code`` is the C result code (``chorus_result_t``)."""

    code = -1

    def __init__(self, message, code=None):
        super().__init__(message)
        if code is not None:
            self.code = code


class InvalidArgument(Error, ValueError):
    """A bad argument: buffer, dtype, op, root, peer, tag or count (CHORUS_ERR_INVALID_ARGUMENT)."""

    code = 1


class InvalidUsage(Error):
    """A call on a destroyed or aborted communicator, or out of order (CHORUS_ERR_INVALID_USAGE)."""

    code = 2


class Timeout(Error):
    """A deadline expired (CHORUS_ERR_TIMEOUT); the message names the call and the peers."""

    code = 3


class PeerFailure(Error):
    """A peer rank died or left (CHORUS_ERR_PEER_FAILURE); the message names it."""

    code = 4


class Mismatch(Error):
    """Ranks issued different calls, counts or dtypes (CHORUS_ERR_MISMATCH)."""

    code = 5


class IOFailure(Error):
    """A system or network error (CHORUS_ERR_IO)."""

    code = 6


class BootstrapError(Error):
    """The store or the peers could not be found or reached (CHORUS_ERR_BOOTSTRAP)."""

    code = 7


class Unsupported(Error):
    """Not available in this build or setting (CHORUS_ERR_UNSUPPORTED)."""

    code = 8


class Aborted(Error):
    """The communicator was aborted (CHORUS_ERR_ABORTED)."""

    code = 9


class InternalError(Error):
    """An invariant of chorus was violated, a bug (CHORUS_ERR_INTERNAL)."""

    code = 10


class NoMemory(Error, MemoryError):
    """An allocation failed (CHORUS_ERR_NO_MEMORY)."""

    code = 11


# Indexed by result code (0 is success).
BY_CODE = [None, InvalidArgument, InvalidUsage, Timeout, PeerFailure, Mismatch, IOFailure,
           BootstrapError, Unsupported, Aborted, InternalError, NoMemory]

__all__ = [cls.__name__ for cls in BY_CODE[1:]] + ["Error"]
