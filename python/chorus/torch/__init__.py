"""Chorus as a torch.distributed backend.

    import torch.distributed as dist
    import chorus.torch                      # registers the backend "chorus"
    dist.init_process_group("chorus", rank=rank, world_size=world_size,
                            init_method="tcp://127.0.0.1:29500")
    dist.all_reduce(tensor)                  # CPU tensors

Each process group (the default one and every ``new_group``) gets a Chorus
communicator of its own, built over the c10d store torch gives that group, so
a subgroup needs no collective on the world group. Collectives run as Chorus's
non-blocking calls; the returned work's ``wait()`` raises
``torch.distributed.DistBackendError`` with Chorus's message (naming the
failing rank) when a peer dies, disagrees or times out, and its future
completes with the output tensors (DDP's communication hooks chain on it).
"""
import torch.distributed as _dist

from . import _backend

BACKEND_NAME = "chorus"


def _create(store, rank, world_size, timeout):
    return _backend.create_backend(store, rank, world_size, timeout)


if BACKEND_NAME not in _dist.Backend.backend_list:
    _dist.Backend.register_backend(BACKEND_NAME, _create, devices=["cpu"])
