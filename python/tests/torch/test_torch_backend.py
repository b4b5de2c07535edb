"""torch.distributed over the chorus backend: each test spawns its ranks as
processes (a FileStore in the test's temporary directory: no ports) and
checks what they return. Bounded: every job is killed after its timeout."""
import os
import queue
import traceback

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("chorus.torch", reason="chorus was built without the PyTorch backend")
import torch.multiprocessing as mp  # noqa: E402

import workers  # noqa: E402


def _entry(target_name, rank, world_size, init_file, results):
    try:
        value = getattr(workers, target_name)(rank, world_size, init_file)
        results.put((rank, "ok", value))
    except BaseException:  # noqa: BLE001  (reported to the parent)
        results.put((rank, "error", traceback.format_exc()))
    results.close()
    results.join_thread()
    # No interpreter shutdown: a process group left undestroyed must not hang the exit.
    os._exit(0)


def run_ranks(target_name, world_size, tmp_path, timeout=120, expect_ranks=None):
    """Runs workers.<target_name> on world_size ranks; returns {rank: value}.
    Fails with every rank's traceback when one raised or the job timed out."""
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    init_file = str(tmp_path / "store")
    procs = [ctx.Process(target=_entry, args=(target_name, r, world_size, init_file, results))
             for r in range(world_size)]
    for p in procs:
        p.start()
    expected = set(range(world_size) if expect_ranks is None else expect_ranks)
    got, errors = {}, {}
    try:
        while expected - set(got) - set(errors):
            rank, status, value = results.get(timeout=timeout)
            (got if status == "ok" else errors)[rank] = value
    except queue.Empty:
        errors["timeout"] = f"no result within {timeout} s from ranks {sorted(expected - set(got))}"
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    if errors:
        pytest.fail("\n".join(f"rank {r}:\n{text}" for r, text in errors.items()))
    return got


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_collective_against_references(world_size, tmp_path):
    assert run_ranks("collectives", world_size, tmp_path, timeout=240) == {
        r: "ok" for r in range(world_size)}


def test_new_group_of_two_out_of_three(tmp_path):
    got = run_ranks("subgroup", 3, tmp_path)
    assert got[0] == got[2] == [4.0] * 5
    assert got[1] is None


def test_ddp_matches_gloo_with_and_without_fp16_hook(tmp_path):
    got = run_ranks("ddp_against_gloo", 2, tmp_path, timeout=240)
    for rank, report in got.items():
        # Same seeds, same data, same reduction order on 2 ranks: equal up to rounding.
        assert report["plain"] < 1e-6, (rank, report)
        # fp16 on the wire: both backends round the same halves; allow fp16's epsilon.
        assert report["fp16"] < 1e-3, (rank, report)
        assert report["plain_replicas"] == 0 and report["fp16_replicas"] == 0, (rank, report)


def test_a_dead_peer_fails_the_survivor_fast_naming_it(tmp_path):
    got = run_ranks("peer_dies", 2, tmp_path, expect_ranks=[0])
    report = got[0]
    assert report["class"] == "DistBackendError", report
    assert "rank 1" in report["text"], report
    assert report["seconds"] < 20, report
