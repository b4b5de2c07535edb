"""PyTorch's generic distributed test suite (DistributedTest._DistTestBase in
torch/testing/_internal/distributed/distributed_test.py) over the chorus
backend, modelled on PyTorch's test/distributed/test_distributed_spawn.py:
every test starts WORLD_SIZE ranks, each runs init_process_group("chorus")
over a FileStore and the test's body.

    # one test, or any -k expression, through pytest:
    PYTHONPATH=build/python python3 -m pytest -q python/tests/torch/distributed_suite.py \
        -k test_all_reduce_sum
    # the subset CI runs (CI_RUNS below); exit status 1 on any failure or skip:
    PYTHONPATH=build/python python3 python/tests/torch/distributed_suite.py --ci

WORLD_SIZE (default 2) chooses the number of ranks; CHORUS_SUITE_START
(fork, the default, or spawn) how they start; DISTRIBUTED_TESTS_DEFAULT_TIMEOUT
(default here 120) after how many seconds a test's ranks are killed. The
results of a whole run are in distributed_suite_results.md next to this file.

What this driver changes in the suite, and why (distributed_test.py decides
most skips at import time from the backend's name, so these must happen before
it is imported, in the parent and in every spawned rank: both import this
module):
- DistTestCases.backend_feature["plugin"] gets "chorus": it is a backend
  registered from Python (Backend.register_backend); require_backend_is_available
  takes a name in that set as available.
- DistTestCases.backend_feature["ddp"] gets "chorus": DDP over chorus on CPU
  is supported (python-torch-backend checks it against gloo). Where a test
  behind this set also needs GPUs it still skips for its own GPU decorator.
Nothing else is registered: not "gpu", "cuda" nor "subgroup" (chorus has no
GPU path), and the tests the suite reserves for gloo (BACKEND != "gloo",
require_backend_is_available({"gloo"})) stay skipped.
"""
import atexit
import os
import shutil
import sys
import tempfile

os.environ["BACKEND"] = "chorus"
os.environ.setdefault("WORLD_SIZE", "2")
# The suite's own per-test limit (common_distributed.TIMEOUT_DEFAULT, 300 s
# upstream): a hung test is killed after this long and fails.
os.environ.setdefault("DISTRIBUTED_TESTS_DEFAULT_TIMEOUT", "120")
if "TEMP_DIR" not in os.environ:
    # TestDistBackend.setUp makes a fresh TEMP_DIR (with barrier/ and an
    # INIT_METHOD file) per test; this one only satisfies the module's import.
    _import_dir = tempfile.mkdtemp(prefix="chorus-dist-suite-")
    os.makedirs(os.path.join(_import_dir, "barrier"), exist_ok=True)
    os.environ["TEMP_DIR"] = _import_dir
    _creator = os.getpid()  # forked ranks inherit the hook: only the creator removes the folder
    atexit.register(
        lambda: os.getpid() == _creator and shutil.rmtree(_import_dir, ignore_errors=True))
    os.environ.setdefault("INIT_METHOD", "file://" + os.path.join(_import_dir, "init"))

import torch  # noqa: E402

import chorus.torch  # noqa: E402,F401  (registers the backend "chorus")
from torch.testing._internal.common_distributed import DistTestCases  # noqa: E402

DistTestCases.backend_feature["plugin"].add("chorus")
DistTestCases.backend_feature["ddp"].add("chorus")

from torch.testing._internal.distributed.distributed_test import (  # noqa: E402
    DistributedTest,
    TestDistBackend,
)


# How the ranks start: "fork" (the default: the ranks are copies of the
# parent, which has imported everything and made no process group; a test
# takes 0.3-4 s) or "spawn" (as upstream's test_distributed_spawn.py, which
# needs it for CUDA: each rank is a fresh interpreter that imports torch and
# the suite, 10-30 s per test on a busy 2-core machine). The outcomes are the
# same (distributed_suite_results.md).
START_METHOD = os.environ.get("CHORUS_SUITE_START", "fork")


class TestDistBackendWithSpawnCHORUS(TestDistBackend, DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        if START_METHOD == "fork":
            self._start_processes(torch.multiprocessing.get_context("fork").Process)
        else:
            self._spawn_processes()


# The CI subset (meson test python-torch-suite, `--ci`): every test that
# passes on CPU, in two runs (distributed_suite_results.md has the whole list,
# the measured durations and why the rest skip or fail).
CI_RUNS = {
    # 62 tests: collectives on the default group and on a full new_group,
    # complex dtypes, async work, send/recv with tags and under both profilers,
    # object-free gather/scatter argument checks, barrier, destroy, DDP on CPU.
    "3": [
        "test_Backend_enum_class", "test_DistributedDataParallelCPU",
        "test_DistributedDataParallelCPU_grad_is_view",
        "test_DistributedDataParallel_requires_grad",
        "test_all_gather", "test_all_gather_coalesced_complex",
        "test_all_gather_coalesced_full_group", "test_all_gather_coalesced_simple",
        "test_all_gather_coalesced_with_empty", "test_all_gather_complex",
        "test_all_gather_full_group",
        "test_all_reduce_coalesced_max_complex_unsupported",
        "test_all_reduce_complex_unsupported_ops",
        "test_all_reduce_full_group_max", "test_all_reduce_full_group_min",
        "test_all_reduce_full_group_product", "test_all_reduce_full_group_sum",
        "test_all_reduce_max", "test_all_reduce_min", "test_all_reduce_product",
        "test_all_reduce_sum",
        "test_all_reduce_sum_async", "test_all_reduce_sum_complex", "test_barrier",
        "test_barrier_full_group", "test_broadcast", "test_broadcast_full_group",
        "test_ddp_create_graph", "test_destroy_full_group", "test_destroy_group",
        "test_dump_DDP_relevant_env_vars", "test_gather", "test_gather_checks",
        "test_gather_full_group", "test_get_backend", "test_get_rank",
        "test_get_rank_size_full_group", "test_get_rank_size_group", "test_irecv", "test_isend",
        "test_isend_autograd_profiler", "test_isend_torch_profiler",
        "test_reduce_full_group_max", "test_reduce_full_group_min",
        "test_reduce_full_group_product", "test_reduce_full_group_sum", "test_reduce_max",
        "test_reduce_min", "test_reduce_product", "test_reduce_sum", "test_reduce_sum_twice",
        "test_scatter", "test_scatter_checks", "test_scatter_complex", "test_scatter_full_group",
        "test_send_recv", "test_send_recv_autograd_profiler", "test_send_recv_torch_profiler",
        "test_send_recv_with_tag", "test_send_recv_with_tag_autograd_profiler",
        "test_send_recv_with_tag_torch_profiler", "test_static_graph_api_cpu",
    ],
    # The *_group tests use new_group([1, 2]) and skip below 8 ranks
    # (skip_if_small_worldsize): the subgroup's ranks 1 and 2 are not the
    # world's first ranks, and the other six are outside it.
    "8": [
        "test_all_gather_coalesced_group", "test_all_gather_group", "test_all_reduce_group_sum", "test_barrier_group",
        "test_broadcast_group", "test_gather_group", "test_reduce_group_max",
        "test_scatter_group",
    ],
}


def _run_names(names):
    """Runs the named tests in this process; 0 when every one passed (a
    skip counts as a failure: the lists above hold tests that run)."""
    import unittest

    suite = unittest.TestSuite(TestDistBackendWithSpawnCHORUS(name) for name in names)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    bad = len(result.failures) + len(result.errors) + len(result.skipped)
    print(f"WORLD_SIZE={os.environ['WORLD_SIZE']}: {result.testsRun - bad} passed, "
          f"{len(result.skipped)} skipped, {len(result.failures)} failed, "
          f"{len(result.errors)} errors", flush=True)
    return 0 if bad == 0 and result.testsRun == len(names) else 1


def _ci():
    """Each entry of CI_RUNS in a process of its own: WORLD_SIZE is read when
    the suite is imported."""
    import subprocess

    status = 0
    for world_size, names in CI_RUNS.items():
        env = dict(os.environ, WORLD_SIZE=world_size)
        env.pop("TEMP_DIR", None)
        env.pop("INIT_METHOD", None)
        rc = subprocess.run([sys.executable, os.path.abspath(__file__), "--run"] + names,
                            env=env).returncode
        status = status or rc
    return status


if __name__ == "__main__":
    if sys.argv[1:] == ["--ci"]:
        sys.exit(_ci())
    if sys.argv[1:2] == ["--run"]:
        sys.exit(_run_names(sys.argv[2:]))
    from torch.testing._internal.common_utils import run_tests

    run_tests()
