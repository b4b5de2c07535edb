"""chorus: collective communication for data-parallel training.

    import numpy as np, chorus
    comm = chorus.init()                  # under chorusrun, mpirun, srun or torchrun
    x = np.full(4, comm.rank, np.float32)
    comm.allreduce(x)                     # in place: x is the sum over ranks
    req = comm.iallreduce(x, op=chorus.MAX)
    req.wait()

The mirrored strategy (synchronous data parallelism, as TensorFlow's
MirroredStrategy): ``chorus.Mirrored(comm)``, ``add_variable(name, variable,
gradient)``, ``broadcast_variables()``, then per step ``gradient_ready(name)``
as gradients finish, ``reduce_gradients()`` (each becomes the mean over the
ranks), ``apply("sgd"|"momentum"|"adam", lr=...)``, ``end_step()``.

The parameter-server strategy (as TensorFlow's ParameterServerStrategy; start
the job with ``chorusrun --ps K``): ``ps = chorus.ParameterServer(comm,
servers=K, mode="async"|"sync"|"bounded", max_staleness=s)``; ``ps.role`` is
"chief", "worker" or "ps"; every rank ``add_variable(name, variable,
gradient)`` then ``start()``; servers ``serve("adam", lr=...)``; workers per
step ``pull()``, compute the gradients, ``push()``, and ``finish()`` at the
end; the chief ``save(path)`` / ``restore(path)``; ``failed_workers()``.

Buffers are NumPy arrays and torch CPU tensors, used where they lie (no copies):
they must be contiguous, and outputs writable. Every collective has a
non-blocking form (``i`` + its name, or ``nonblocking=True``) that returns a
Request; its ``wait()`` returns the output, and ``chorus.wait_all(requests)``
waits for many at once and returns their outputs. Outputs that are not given are
allocated: ``allgather`` stacks every rank's tensor, ``gather`` does so at the
root, ``reduce_scatter`` and ``scatter`` keep one block. Timeouts are in
seconds (None: CHORUS_TIMEOUT). A failure raises a ``chorus.Error`` subclass
(``chorus.Timeout``, ``chorus.PeerFailure``, ...) carrying the C library's
message; as in the C API, a call refused on one rank fails it on every rank.
"""
import enum as _enum
import functools as _functools

from . import _core
from . import errors
from .errors import *  # noqa: F401,F403  (the exception classes)
from ._core import Comm, Mirrored, ParameterServer, Request, result_string, version, wait_all

_core._set_error_classes(errors.BY_CODE)


class ReduceOp(_enum.IntEnum):
    """The reduction of allreduce, reduce, reduce_scatter (chorus_op_t)."""

    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4


SUM, PROD, MIN, MAX, AVG = ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX, ReduceOp.AVG

# The chorus dtype numbers (chorus_dtype_t), by name.
DTYPES = dict(_core.DTYPES)
TAG_MAX = _core.TAG_MAX


def init(rank=None, world_size=None, store_addr=None, job_token=None, transport=None):
    """A communicator of every rank of the job.

    With no arguments, from the environment: chorusrun's CHORUS_* variables,
    or those of Open MPI, Slurm, torchrun, or TF_CONFIG. Otherwise rank,
    world_size and store_addr ('host:port' of the rendezvous store that rank 0
    serves) are given, and job_token and transport optionally."""
    if rank is None and world_size is None and store_addr is None:
        return _core.init_from_env()
    if rank is None or world_size is None or store_addr is None:
        raise InvalidArgument("init: give rank, world_size and store_addr together, or none of them", 1)
    return _core.init(rank, world_size, store_addr, job_token, transport)


def _enter(self):
    return self


def _exit(self, *exc):
    self.destroy()
    return False


Comm.__enter__ = _enter
Comm.__exit__ = _exit
for _name in ("allreduce", "broadcast", "allgather", "reduce_scatter", "reduce", "gather", "scatter",
              "alltoall", "allgatherv", "reduce_scatterv", "barrier", "send", "recv"):
    setattr(Comm, "i" + _name, _functools.partialmethod(getattr(Comm, _name), nonblocking=True))
del _name

__all__ = ["Comm", "Mirrored", "ParameterServer", "Request", "wait_all", "ReduceOp", "SUM", "PROD", "MIN", "MAX", "AVG", "DTYPES", "TAG_MAX", "init",
           "result_string", "version", "errors"] + errors.__all__
