"""The parameter-server strategy in real jobs (chorusrun --ps K): sync
training equal to a single-process NumPy reference with 1 and 2 servers; a
worker killed by SIGKILL in async mode (the job goes on, the chief is told);
a server killed by SIGKILL (the job fails naming it within 10 s); a
checkpoint saved by one job and restored by the next. Each case is a job of
its own; ranks print single lines that the test reads."""
import os
import re
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

CHORUSRUN = os.environ.get("CHORUSRUN", "chorusrun")

# A linear model y = x @ w + b, mean squared error; every worker takes its
# slice of a batch that changes every step.
PRELUDE = r"""
import os, signal, sys, threading, time
import numpy as np
import chorus
comm = chorus.init()
rank = comm.rank
def say(text):  # one write: the ranks share the output pipe
    os.write(1, (text + "\n").encode())
FEATURES, BATCH = 6, 12
def batch(step):
    rng = np.random.default_rng(step)
    x = rng.standard_normal((BATCH, FEATURES))
    return x, x @ np.arange(1.0, FEATURES + 1) + 0.5
def gradients(w, b, x, y):
    err = x @ w + b - y
    return x.T @ err / len(y), np.array([err.mean()])
w = np.zeros(FEATURES); b = np.zeros(1)
dw = np.zeros(FEATURES); db = np.zeros(1)
"""


def run_job(body, np_, ps, timeout=60, env=None):
    script = PRELUDE + textwrap.dedent(body)
    command = [CHORUSRUN, "-np", str(np_), "--ps", str(ps), "--timeout", str(timeout),
               sys.executable, "-c", script]
    full_env = dict(os.environ, CHORUS_TIMEOUT="20", **(env or {}))
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 30,
                          env=full_env)
    return done, time.monotonic() - start


def lines(done, tag):
    return [line.split(" ", 1)[1] for line in done.stdout.splitlines() if line.startswith(tag + " ")]


def reference(steps, workers, lr):
    """One process on the whole batch: the mean of equal slices' gradients."""
    w, b = np.zeros(6), np.zeros(1)
    for step in range(steps):
        rng = np.random.default_rng(step)
        x = rng.standard_normal((12, 6))
        y = x @ np.arange(1.0, 7) + 0.5
        err = x @ w + b - y
        w, b = w - lr * (x.T @ err / 12), b - lr * np.array([err.mean()])
    return np.concatenate([w, b])


# 3 servers for 2 variables: one server holds nothing and still serves.
@pytest.mark.parametrize("servers", [1, 2, 3])
def test_sync_training_equals_one_process(servers):
    done, _ = run_job(f"""
        ps = chorus.ParameterServer(comm, servers={servers}, mode="sync")
        ps.add_variable("w", w, dw); ps.add_variable("b", b, db)
        ps.start()
        if ps.role == "ps":
            ps.serve("sgd", lr=0.1)
        else:
            workers = comm.size - {servers}
            for step in range(6):
                ps.pull()
                x, y = batch(step)
                part = slice(rank * BATCH // workers, (rank + 1) * BATCH // workers)
                dw[:], db[:] = gradients(w, b, x[part], y[part])
                ps.push()
            ps.pull()
            say("FINAL " + " ".join(repr(float(v)) for v in np.concatenate([w, b])))
            ps.finish()
        ps.destroy()
    """, np_=2 + servers, ps=servers)
    assert done.returncode == 0, done.stdout + done.stderr
    finals = [np.array([float(v) for v in line.split()]) for line in lines(done, "FINAL")]
    assert len(finals) == 2
    expected = reference(6, 2, 0.1)
    for final in finals:
        np.testing.assert_allclose(final, expected, rtol=1e-12, atol=1e-12)
    assert np.abs(expected).max() > 0.5  # the model moved: the comparison means something


def test_a_killed_worker_leaves_async_training_running_and_the_chief_is_told():
    done, _ = run_job("""
        ps = chorus.ParameterServer(comm, mode="async")  # servers: TF_CONFIG's ps tasks
        ps.add_variable("w", w, dw); ps.add_variable("b", b, db)
        ps.start()
        if ps.role == "ps":
            ps.serve("sgd", lr=0.05)
            say("SERVED")
        else:
            steps = 3 if rank == 2 else 40
            for step in range(steps):
                ps.pull()
                x, y = batch(step)
                dw[:], db[:] = gradients(w, b, x, y)
                ps.push()
                time.sleep(0.02)
            if rank == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            say(f"TOLD {rank} {ps.failed_workers()}")
            x, y = batch(0)
            say(f"LOSS {rank} {float(np.mean((x @ w + b - y) ** 2))}")
            ps.finish()
        ps.destroy()
    """, np_=4, ps=1)
    assert done.returncode == 0, done.stdout + done.stderr
    told = lines(done, "TOLD")
    assert sorted(told) == ["0 [2]", "1 [2]"], done.stdout + done.stderr
    assert "SERVED" in done.stdout  # the server ended normally once the others finished
    assert "rank 2 (worker 1, pid" in done.stderr and "killed by signal 9" in done.stderr
    assert "chief: worker rank 2 failed" in done.stderr
    for line in lines(done, "LOSS"):  # the survivors trained on: the loss fell from ~90
        assert float(line.split()[1]) < 10, done.stdout


def test_a_killed_server_fails_the_job_naming_it_within_10_s():
    done, took = run_job("""
        ps = chorus.ParameterServer(comm, servers=2, mode="async")
        ps.add_variable("w", w, dw); ps.add_variable("b", b, db)
        ps.start()
        if ps.role == "ps":
            if ps.index == 1:
                threading.Timer(1.0, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
            ps.serve("sgd", lr=0.01)
        else:
            try:
                for step in range(100000):
                    ps.pull(); ps.push(); time.sleep(0.01)
            except chorus.PeerFailure as e:
                say(f"CAUGHT {rank} {e}")
                sys.exit(3)
    """, np_=4, ps=2, timeout=60)
    assert done.returncode != 0
    # chorusrun names the server (rank 3, ps task 1) and stops the job; a
    # worker that caught the failure first names it too.
    assert re.search(r"rank 3 \(ps 1, pid \d+\) killed by signal 9", done.stderr), done.stderr
    for line in lines(done, "CAUGHT"):
        assert "parameter server 1 (rank 3) failed" in line, line
    assert took < 10 + 1.5, f"the job took {took:.1f} s"  # the server died 1 s in


def test_a_checkpoint_saved_by_one_job_is_restored_by_the_next(tmp_path):
    path = tmp_path / "ps.ckpt"
    body = """
        ps = chorus.ParameterServer(comm, servers=1, mode="sync")
        w[:] = rank + {offset}  # the chief's values start the servers
        ps.add_variable("w", w, dw); ps.add_variable("b", b, db)
        ps.start()
        if ps.role == "ps":
            ps.serve("sgd", lr=0.1)
        else:
            if {train}:
                for step in range(4):
                    ps.pull(); x, y = batch(step); dw[:], db[:] = gradients(w, b, x, y); ps.push()
                ps.pull()
                if rank == 0:
                    ps.save({path!r})
            elif rank == 0:
                ps.restore({path!r})
            if rank == 0:
                say("VALUES " + " ".join(repr(float(v)) for v in np.concatenate([w, b])))
            ps.finish()
        ps.destroy()
    """
    first, _ = run_job(body.format(offset=0, train=True, path=str(path)), np_=3, ps=1)
    assert first.returncode == 0, first.stdout + first.stderr
    second, _ = run_job(body.format(offset=100, train=False, path=str(path)), np_=3, ps=1)
    assert second.returncode == 0, second.stdout + second.stderr
    saved, restored = lines(first, "VALUES"), lines(second, "VALUES")
    assert len(saved) == 1 and saved == restored
    assert float(restored[0].split()[0]) < 50  # not the second job's own start (100)
