"""chorus.Mirrored from Python: a linear model trained on every rank's slice
of one global batch stays bit-identical on every rank and equal to a
single-process run on the whole batch; the replica check names a diverged
variable and rank. Variable names differ per test: the strategy's gradients
go to the communicator's fusion engine under their names."""
import numpy as np
import pytest

import chorus
from conftest import torch

FEATURES, OUTPUTS, PER_RANK, STEPS, LR = 5, 3, 4, 4, 0.1


def global_batch(size):
    generator = np.random.default_rng(7)
    x = generator.standard_normal((size * PER_RANK, FEATURES))
    y = generator.standard_normal((size * PER_RANK, OUTPUTS))
    return x, y


def initial_weights(seed):
    generator = np.random.default_rng(seed)
    return generator.standard_normal((FEATURES, OUTPUTS)), generator.standard_normal(OUTPUTS)


def gradients(w, b, x, y):
    """Of the mean squared error 0.5 * mean over samples of |x w + b - y|^2."""
    error = x @ w + b - y
    return x.T @ error / len(x), error.mean(axis=0)


def reference_run(size, optimizer):
    """float64, one process, the whole batch; SGD or momentum as torch.optim has them."""
    w, b = initial_weights(0)
    x, y = global_batch(size)
    buffers = [np.zeros_like(w), np.zeros_like(b)]
    for _ in range(STEPS):
        for param, grad, buf in zip((w, b), gradients(w, b, x, y), buffers):
            if optimizer == "momentum":
                buf *= 0.9
                buf += grad
                grad = buf
            param -= LR * grad
    return w, b


def assert_identical_everywhere(comm, arrays):
    for array in arrays:
        every = comm.allgather(np.ascontiguousarray(array).view(np.uint8).ravel())
        assert all((every[r] == every[0]).all() for r in range(comm.size)), "replicas differ"


@pytest.mark.parametrize("optimizer, use_fusion", [("sgd", True), ("momentum", False)])
def test_numpy_linear_model_matches_one_process(comm, optimizer, use_fusion):
    w, b = (a.astype(np.float32) for a in initial_weights(comm.rank + 100))  # differ until broadcast
    if comm.rank == 0:
        w[...], b[...] = (a.astype(np.float32) for a in initial_weights(0))
    dw, db = np.zeros_like(w), np.zeros_like(b)
    strategy = chorus.Mirrored(comm, use_fusion=use_fusion)
    prefix = f"np-{optimizer}"
    strategy.add_variable(f"{prefix}/w", w, dw)
    strategy.add_variable(f"{prefix}/b", b, db)
    strategy.broadcast_variables()
    x, y = global_batch(comm.size)
    mine = slice(comm.rank * PER_RANK, (comm.rank + 1) * PER_RANK)
    for _ in range(STEPS):
        grad_w, grad_b = gradients(w.astype(np.float64), b.astype(np.float64), x[mine], y[mine])
        dw[...], db[...] = grad_w, grad_b
        strategy.gradient_ready(f"{prefix}/b")  # any order; the rest go in reduce_gradients
        strategy.reduce_gradients()
        strategy.apply(optimizer, lr=LR, momentum=0.9 if optimizer == "momentum" else 0.0)
        strategy.end_step()
        assert_identical_everywhere(comm, [w, b])
    want_w, want_b = reference_run(comm.size, optimizer)
    np.testing.assert_allclose(w, want_w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(b, want_b, rtol=1e-4, atol=1e-5)
    strategy.destroy()


def test_torch_module_parameters_in_place(comm):
    if torch is None:
        pytest.skip("torch is not installed (pip install -r python/requirements.txt)")
    torch.manual_seed(comm.rank + 1)  # different initial weights until the broadcast
    model = torch.nn.Linear(FEATURES, OUTPUTS).double()
    strategy = chorus.Mirrored(comm)
    for name, param in model.named_parameters():
        param.grad = torch.zeros_like(param)  # backward accumulates into these in place
        strategy.add_variable(f"torch/{name}", param.data, param.grad)
    strategy.broadcast_variables()
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    x, y = (torch.from_numpy(a) for a in global_batch(comm.size))
    mine = slice(comm.rank * PER_RANK, (comm.rank + 1) * PER_RANK)
    for _ in range(STEPS):
        for param in model.parameters():
            param.grad.zero_()
        loss = 0.5 * ((model(x[mine]) - y[mine]) ** 2).sum(dim=1).mean()
        loss.backward()
        strategy.reduce_gradients()
        strategy.apply("adam", lr=LR)
        strategy.end_step()
        assert_identical_everywhere(comm, [p.detach().numpy() for p in model.parameters()])
    # The same steps in one process on the whole batch, with torch's own Adam.
    reference = torch.nn.Linear(FEATURES, OUTPUTS).double()
    with torch.no_grad():
        for name, param in reference.named_parameters():
            param.copy_(start[name])
    adam = torch.optim.Adam(reference.parameters(), lr=LR)
    for _ in range(STEPS):
        adam.zero_grad()
        (0.5 * ((reference(x) - y) ** 2).sum(dim=1).mean()).backward()
        adam.step()
    for (name, param), want in zip(model.named_parameters(), reference.parameters()):
        np.testing.assert_allclose(param.detach().numpy(), want.detach().numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=name)
    strategy.destroy()


def test_replica_check_names_the_diverged_variable_and_rank(comm):
    a, b = np.arange(6, dtype=np.float32), np.ones(3, np.float64)
    strategy = chorus.Mirrored(comm, check_replicas=2)
    strategy.add_variable("check/a", a)
    strategy.add_variable("check/b", b)
    strategy.end_step()  # step 1: no check
    strategy.check_replicas()  # identical
    if comm.size == 1:
        strategy.destroy()
        return
    if comm.rank == comm.size - 1:
        b[1] += 1
    with pytest.raises(chorus.Mismatch, match=rf"variable 'check/b' on rank {comm.size - 1} differs"):
        strategy.end_step()  # step 2: checked
    strategy.destroy()
    comm.barrier()  # the communicator is still usable


def test_bad_optimizer_is_refused(comm):
    strategy = chorus.Mirrored(comm)
    with pytest.raises(chorus.InvalidArgument, match="one of 'sgd', 'momentum', 'adam'"):
        strategy.apply("adagrad")
    strategy.destroy()
