"""Failures through the Python package: each case is a job of its own
(chorusrun -np 2 python3 -c SCRIPT) because a failure ends the communicator
on every rank. Every rank prints what it caught; the test checks the class,
the C library's text and the result code on both ranks."""
import os
import re
import subprocess
import sys
import textwrap

import pytest

CHORUSRUN = os.environ.get("CHORUSRUN", "chorusrun")

PRELUDE = r"""
import os, sys, time
import numpy as np
import chorus
comm = chorus.init()
rank = comm.rank
def say(text):  # one write: the ranks share the output pipe
    os.write(1, (text + "\n").encode())
def report(error):
    say(f"CAUGHT {rank} {type(error).__name__} {error.code} {error}")
"""


def run_job(body, np_=2, timeout=60, env=None):
    script = PRELUDE + textwrap.dedent(body)
    command = [CHORUSRUN, "-np", str(np_), "--timeout", str(timeout), sys.executable, "-c", script]
    full_env = dict(os.environ, CHORUS_TIMEOUT="20", **(env or {}))
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 30, env=full_env)
    caught = {}
    for line in done.stdout.splitlines():
        match = re.search(r"CAUGHT (\d+) (\w+) (-?\d+) (.*)$", line)
        if match:
            caught[int(match.group(1))] = (match.group(2), int(match.group(3)), match.group(4))
    return done, caught


def test_a_refused_buffer_fails_the_call_on_every_rank():
    done, caught = run_job("""
        x = np.zeros((4, 4), np.float32)
        try:
            comm.allreduce(x[:, ::2] if rank == 0 else x[:, 0].copy())
        except chorus.InvalidArgument as e:
            report(e)
    """)
    assert done.returncode == 0, done.stdout + done.stderr
    assert caught[0][:2] == ("InvalidArgument", 1) and "not C-contiguous" in caught[0][2]
    assert caught[1][:2] == ("InvalidArgument", 1), caught
    assert "not C-contiguous" in caught[1][2] and "rank 0" in caught[1][2]


@pytest.mark.parametrize("buffer, text", [
    ("[1.0, 2.0]", "neither a NumPy array nor a torch tensor"),
    ("np.zeros(3, bool)", "has no chorus dtype"),
    ("np.zeros(3, np.complex64)", "has no chorus dtype"),
])
def test_unknown_buffers_are_refused_by_name(buffer, text):
    done, caught = run_job(f"""
        try:
            comm.allreduce({buffer})
        except chorus.InvalidArgument as e:
            report(e)
    """)
    assert done.returncode == 0, done.stdout + done.stderr
    for r in (0, 1):
        assert caught[r][0] == "InvalidArgument" and text in caught[r][2], caught


def test_read_only_output_and_bad_op_carry_the_c_text():
    done, caught = run_job("""
        x = np.ones(3, np.float32)
        x.flags.writeable = False
        try:
            comm.allreduce(x)
        except chorus.InvalidArgument as e:
            report(e)
    """)
    for r in (0, 1):
        assert caught[r][0] == "InvalidArgument" and "read-only" in caught[r][2], caught
    done, caught = run_job("""
        try:
            comm.allreduce(np.ones(3, np.float32), op=17)
        except chorus.Error as e:
            report(e)
    """)
    for r in (0, 1):
        assert caught[r][:2] == ("InvalidArgument", 1) and "op" in caught[r][2].lower(), caught


def test_dtypes_that_differ_across_ranks_are_a_mismatch():
    done, caught = run_job("""
        try:
            comm.allreduce(np.ones(8, np.float32 if rank == 0 else np.int32))
        except chorus.Mismatch as e:
            report(e)
    """)
    assert done.returncode == 0, done.stdout + done.stderr
    for r in (0, 1):
        assert caught[r][:2] == ("Mismatch", 5), caught


def test_a_dead_peer_is_named():
    done, caught = run_job("""
        if rank == 1:
            os._exit(0)  # leaves without destroying its communicator: to rank 0, it died
        try:
            comm.allreduce(np.ones(8, np.float32))
        except chorus.PeerFailure as e:
            report(e)
    """)
    assert caught[0][:2] == ("PeerFailure", 4) and "rank 1" in caught[0][2], done.stdout + done.stderr


def test_a_deadline_names_the_call_and_the_late_rank():
    done, caught = run_job("""
        if rank == 1:
            time.sleep(3)
        try:
            comm.allreduce(np.ones(8, np.float32), timeout=0.5)
        except chorus.Timeout as e:
            report(e)
        except chorus.Error as e:
            report(e)
    """)
    assert caught[0][:2] == ("Timeout", 3), done.stdout + done.stderr
    assert "allreduce" in caught[0][2] and "rank 1" in caught[0][2]


def test_wait_all_past_its_deadline_leaves_the_late_request_pending():
    done, caught = run_job("""
        late = np.ones(4, np.float32)
        if rank == 1:
            time.sleep(2)
        request = comm.iallreduce(late)
        if rank == 0:
            try:
                chorus.wait_all([request], timeout=0.3)
            except chorus.Timeout as e:
                report(e)
            say(f"PENDING {request.done}")
        outputs = chorus.wait_all([request])
        say(f"OUT {rank} {outputs[0][0]}")
    """)
    assert done.returncode == 0, done.stdout + done.stderr
    assert caught[0][:2] == ("Timeout", 3), done.stdout + done.stderr
    assert "allreduce" in caught[0][2]
    assert "PENDING False" in done.stdout
    assert "OUT 0 2.0" in done.stdout and "OUT 1 2.0" in done.stdout


def test_use_after_destroy_and_bad_timeouts():
    done, caught = run_job("""
        request = comm.iallreduce(np.ones(2, np.float32))
        try:
            request.wait(timeout=-1)
        except chorus.InvalidArgument as e:
            say(f"WAIT {rank} {e}")
        request.wait()
        comm.destroy()
        try:
            comm.barrier()
        except chorus.InvalidUsage as e:
            report(e)
    """)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("timeout must be a positive number") == 2
    for r in (0, 1):
        assert caught[r][:2] == ("InvalidUsage", 2) and "destroyed" in caught[r][2], caught


def test_init_arguments_and_result_strings(monkeypatch):
    import chorus
    monkeypatch.setenv("CHORUS_CONNECT_TIMEOUT", "2")  # read by chorus.init (the store is unreachable)
    with pytest.raises(chorus.InvalidArgument, match="together"):
        chorus.init(rank=0)
    with pytest.raises(chorus.BootstrapError) as error:
        chorus.init(rank=1, world_size=2, store_addr="127.0.0.1:1", job_token="t")
    assert error.value.code == 7 and str(error.value)
    assert chorus.result_string(5) and chorus.result_string(0) != chorus.result_string(5)
    assert issubclass(chorus.InvalidArgument, ValueError) and issubclass(chorus.Timeout, chorus.Error)
