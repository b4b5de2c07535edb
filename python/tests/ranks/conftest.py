"""Fixtures of the tests that every rank of a chorusrun job runs (meson test
python-np<N>: chorusrun -np N python3 -m pytest python/tests/ranks). Every
rank runs the same tests in the same order, so their collectives match; an
assertion that fails on one rank fails that rank's pytest and the job."""
import numpy as np
import pytest

import chorus

try:
    import torch
except ImportError:  # the torch cases skip, saying so
    torch = None

NUMPY_DTYPES = ["float32", "float64", "float16", "int8", "uint8", "int32", "uint32", "int64", "uint64"]
# torch has no arithmetic for uint32/uint64 on the CPU that the reference needs; bfloat16 only here.
TORCH_DTYPES = ["float32", "float64", "float16", "bfloat16", "int8", "uint8", "int32", "int64"]


@pytest.fixture(scope="session")
def comm():
    communicator = chorus.init()
    yield communicator
    communicator.destroy()


def kinds():
    return ["numpy", "torch"]


class Maker:
    """Builds the same values as a NumPy array or a torch tensor of a dtype,
    and reads any of them back as float64 NumPy for the reference."""

    def __init__(self, kind, dtype):
        if kind == "torch" and torch is None:
            pytest.skip("torch is not installed (pip install -r python/requirements.txt)")
        if kind == "numpy" and dtype not in NUMPY_DTYPES:
            pytest.skip(f"NumPy has no {dtype}")
        if kind == "torch" and dtype not in TORCH_DTYPES:
            pytest.skip(f"torch has no CPU arithmetic for {dtype}")
        self.kind, self.dtype = kind, dtype

    def make(self, values):
        values = np.asarray(values, dtype=np.float64)
        if self.kind == "numpy":
            return values.astype(self.dtype)
        return torch.from_numpy(values).to(getattr(torch, self.dtype))

    def empty(self, shape):
        if self.kind == "numpy":
            return np.empty(shape, dtype=self.dtype)
        return torch.empty(shape, dtype=getattr(torch, self.dtype))

    @staticmethod
    def read(buffer):
        if torch is not None and isinstance(buffer, torch.Tensor):
            return buffer.to(torch.float64).numpy()
        return np.asarray(buffer, dtype=np.float64)


def values(rank, count, salt=0):
    """Small integers, different for every rank and element, exact in every
    dtype and under every reduction of up to 4 ranks (sums < 127, products of 1s and 2s)."""
    return (np.arange(count) * 7 + rank * 3 + salt) % 29


def factors(rank, count):
    return 1 + (np.arange(count) + rank) % 2
