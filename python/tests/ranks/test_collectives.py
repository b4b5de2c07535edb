"""Every collective of chorus.Comm on NumPy arrays and torch tensors, every
dtype, against NumPy references computed from what every rank contributed."""
import numpy as np
import pytest

import chorus
from conftest import Maker, NUMPY_DTYPES, TORCH_DTYPES, factors, values

# Every dtype each kind of buffer has.
KIND_DTYPES = [("numpy", d) for d in NUMPY_DTYPES] + [("torch", d) for d in TORCH_DTYPES]
COUNTS = [1, 7, 1000]


def reference(op, inputs):
    stack = np.stack(inputs)
    if op == chorus.SUM:
        return stack.sum(axis=0)
    if op == chorus.PROD:
        return stack.prod(axis=0)
    if op == chorus.MIN:
        return stack.min(axis=0)
    if op == chorus.MAX:
        return stack.max(axis=0)
    return stack.mean(axis=0)


def inputs_of(op, size, count):
    if op == chorus.PROD:
        return [factors(r, count) for r in range(size)]
    return [values(r, count) for r in range(size)]


def close(got, want, dtype):
    got = Maker.read(got)
    if dtype in ("float16", "bfloat16"):
        np.testing.assert_allclose(got, want, rtol=1e-2)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("kind,dtype", KIND_DTYPES)
@pytest.mark.parametrize("op", list(chorus.ReduceOp))
def test_allreduce_every_dtype_and_op(comm, kind, dtype, op):
    maker = Maker(kind, dtype)
    inputs = inputs_of(op, comm.size, 7)
    x = maker.make(inputs[comm.rank])
    out = comm.allreduce(x, op=op)
    assert out is x
    if op != chorus.AVG:
        close(out, reference(op, inputs), dtype)
    elif dtype.startswith(("int", "uint")):
        close(out, np.stack(inputs).sum(axis=0) // comm.size, dtype)  # integer division, as the C API
    else:
        np.testing.assert_allclose(Maker.read(out), reference(op, inputs), rtol=1e-2 if "16" in dtype else 1e-6)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("count", COUNTS)
def test_allreduce_out_of_place_and_nonblocking(comm, kind, count):
    maker = Maker(kind, "float32")
    inputs = inputs_of(chorus.SUM, comm.size, count)
    x = maker.make(inputs[comm.rank])
    before = Maker.read(x).copy()
    out = maker.empty(count)
    assert comm.allreduce(x, out=out) is out
    close(out, reference(chorus.SUM, inputs), "float32")
    np.testing.assert_array_equal(Maker.read(x), before)  # the input is left as it was
    request = comm.iallreduce(x, op=chorus.MAX)
    assert request.wait() is x
    assert request.done
    close(x, reference(chorus.MAX, inputs), "float32")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "int64", "bfloat16", "uint8"])
def test_broadcast_from_every_root(comm, kind, dtype):
    maker = Maker(kind, dtype)
    for root in range(comm.size):
        x = maker.make(values(comm.rank, 13, salt=root))
        assert comm.broadcast(x, root=root) is x
        close(x, values(root, 13, salt=root), dtype)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
def test_allgather_stacks_in_rank_order(comm, kind, dtype):
    maker = Maker(kind, dtype)
    x = maker.make(values(comm.rank, 6).reshape(2, 3))
    out = comm.allgather(x)
    assert tuple(out.shape) == (comm.size, 2, 3)
    close(out, np.stack([values(r, 6).reshape(2, 3) for r in range(comm.size)]), dtype)
    given = maker.empty(comm.size * 6)
    assert comm.allgather(x, out=given) is given
    close(given, np.concatenate([values(r, 6) for r in range(comm.size)]), dtype)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
@pytest.mark.parametrize("op", [chorus.SUM, chorus.MAX])
def test_reduce_scatter_keeps_this_ranks_block(comm, kind, op):
    maker = Maker(kind, "int32")
    block = 5
    inputs = inputs_of(op, comm.size, comm.size * block)
    out = comm.reduce_scatter(maker.make(inputs[comm.rank]), op=op)
    assert tuple(out.shape) == (block,)
    close(out, reference(op, inputs)[comm.rank * block:(comm.rank + 1) * block], "int32")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_reduce_at_every_root(comm, kind):
    maker = Maker(kind, "float64")
    inputs = inputs_of(chorus.SUM, comm.size, 9)
    for root in range(comm.size):
        x = maker.make(inputs[comm.rank])
        out = comm.reduce(x, root=root)
        if comm.rank == root:
            assert out is x
            close(out, reference(chorus.SUM, inputs), "float64")
        else:
            assert out is None
            close(x, inputs[comm.rank], "float64")  # not the root: the input is left as it was


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_gather_and_scatter(comm, kind):
    maker = Maker(kind, "int64")
    root = comm.size - 1
    gathered = comm.gather(maker.make(values(comm.rank, 4)), root=root)
    if comm.rank == root:
        close(gathered, np.stack([values(r, 4) for r in range(comm.size)]), "int64")
    else:
        assert gathered is None
    whole = np.stack([values(r, 4, salt=5) for r in range(comm.size)])
    if comm.rank == root:
        out = comm.scatter(maker.make(whole), root=root)
    else:
        out = comm.scatter(None, out=maker.empty(4), root=root)
    close(out, whole[comm.rank], "int64")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_alltoall(comm, kind):
    maker = Maker(kind, "float32")
    block = 3
    sent = [values(r, comm.size * block, salt=1).reshape(comm.size, block) for r in range(comm.size)]
    out = comm.alltoall(maker.make(sent[comm.rank]))
    close(out, np.stack([sent[r][comm.rank] for r in range(comm.size)]), "float32")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_variable_counts(comm, kind):
    maker = Maker(kind, "float32")
    counts = [r + 2 for r in range(comm.size)]
    gathered = comm.allgatherv(maker.make(values(comm.rank, counts[comm.rank])), counts)
    close(gathered, np.concatenate([values(r, counts[r]) for r in range(comm.size)]), "float32")
    total = sum(counts)
    inputs = [values(r, total) for r in range(comm.size)]
    out = comm.reduce_scatterv(maker.make(inputs[comm.rank]), counts)
    start = sum(counts[:comm.rank])
    close(out, reference(chorus.SUM, inputs)[start:start + counts[comm.rank]], "float32")


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_send_recv_around_a_ring(comm, kind):
    if comm.size == 1:
        pytest.skip("a rank cannot send to itself; needs 2 ranks")
    maker = Maker(kind, "float64")
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    got = maker.empty(11)
    receive = comm.irecv(got, left, tag=7)
    comm.send(maker.make(values(comm.rank, 11)), right, tag=7)
    assert receive.wait() is got
    close(got, values(left, 11), "float64")


def test_nonblocking_forms_complete_in_order(comm):
    x = np.full(4, comm.rank + 1, np.int32)
    y = np.zeros(comm.size * 4, np.int32)
    requests = [comm.iallreduce(x), comm.iallgather(np.full(4, comm.rank, np.int32), out=y), comm.ibarrier()]
    while not all(r.test() for r in requests):
        pass
    np.testing.assert_array_equal(x, np.full(4, comm.size * (comm.size + 1) // 2))
    np.testing.assert_array_equal(y, np.repeat(np.arange(comm.size), 4))
    assert requests[2].wait() is None


def test_wait_all_returns_every_output_in_order(comm):
    x = np.full(4, comm.rank + 1, np.int32)
    y = np.zeros(comm.size * 4, np.int32)
    fused = np.full(3, float(comm.rank), np.float32)
    requests = [comm.iallreduce(x), comm.ibarrier(),
                comm.iallgather(np.full(4, comm.rank, np.int32), out=y),
                comm.fused_allreduce("wait_all/fused", fused)]
    outputs = chorus.wait_all(requests, timeout=60)
    assert len(outputs) == 4 and outputs[0] is x and outputs[1] is None
    assert outputs[2] is y and outputs[3] is fused
    assert all(r.done for r in requests)
    np.testing.assert_array_equal(x, np.full(4, comm.size * (comm.size + 1) // 2))
    np.testing.assert_array_equal(y, np.repeat(np.arange(comm.size), 4))
    np.testing.assert_array_equal(fused, np.full(3, comm.size * (comm.size - 1) / 2))
    assert chorus.wait_all([]) == []
    assert chorus.wait_all(requests)[2] is y  # finished requests give their outputs again
    twice = comm.iallreduce(np.ones(2, np.int32))
    with pytest.raises(chorus.Error, match="listed twice"):
        chorus.wait_all([twice, twice])
    assert not twice.done and twice.wait() is not None


def test_split_into_even_and_odd_ranks(comm):
    sub = comm.split(comm.rank % 2, key=-comm.rank)  # reversed order inside each group
    members = [r for r in range(comm.size) if r % 2 == comm.rank % 2]
    assert sub.size == len(members)
    assert sub.rank == sorted(members, reverse=True).index(comm.rank)
    x = np.array([comm.rank], np.int64)
    sub.allreduce(x)
    assert x[0] == sum(members)
    sub.destroy()
    assert comm.split(None) is None if comm.size == 1 else True


def test_wire_compression_bfloat16(comm):
    x = np.linspace(1, 2, 64, dtype=np.float32) * (comm.rank + 1)
    want = np.linspace(1, 2, 64) * sum(range(1, comm.size + 1))
    comm.allreduce(x, wire_dtype="bfloat16")
    np.testing.assert_allclose(x, want, rtol=comm.size * 2.0 ** -8)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_fused_allreduce_in_any_order(comm, kind):
    maker = Maker(kind, "float32")
    names = [f"layer{i}" for i in range(12)]
    order = names if comm.rank % 2 == 0 else list(reversed(names))
    tensors = {n: maker.make(values(comm.rank, 5 + i)) for i, n in enumerate(names)}
    requests = {n: comm.fused_allreduce(f"{kind}/{n}", tensors[n]) for n in order}
    for i, n in enumerate(names):
        assert requests[n].wait() is tensors[n]
        close(tensors[n], sum(values(r, 5 + i) for r in range(comm.size)), "float32")
    stats = comm.fusion_stats()
    assert stats["tensors"] >= len(names)
    assert stats["allreduces"] <= stats["tensors"]


def test_dtype_numbers_match_the_c_api():
    assert chorus.DTYPES["float32"] == 0 and chorus.DTYPES["uint64"] == 9
    assert chorus._core.dtype_of(np.zeros(1, np.int8)) == chorus.DTYPES["int8"]
