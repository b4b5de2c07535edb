// A rank program for the end-to-end tests run through chorusrun. Modes:
//   kill VICTIM    all ranks loop large allreduces, every result checked;
//                  VICTIM SIGKILLs itself in the middle of one, printing the
//                  time (CLOCK_REALTIME, ns) just before. Survivors print
//                  their error with the time they saw it and exit 3.
//   mismatch BAD   rank BAD passes a different count; every rank prints its
//                  error and exits 3.
//   stranger       rank 0 connects to rank 1's listener with a wrong job token
//                  (the connection must be refused) and then the job runs a
//                  checked allreduce and exits 0.
//   check          every collective (allreduce small and large, broadcast,
//                  allgather, reduce-scatter, barrier) with its result checked
//                  in full, under whatever CHORUS_TRANSPORT / CHORUS_ALGO the
//                  job sets; prints "rank R: all collectives correct" after
//                  the communicator is destroyed, and exits 0.
//   split-kill V   ranks split by parity and alternate large allreduces on
//                  the parent and the child; V SIGKILLs itself in the middle.
//                  Survivors print how each communicator failed (both must)
//                  and exit 3.
//   api-rules      two requests outlive their communicator (wait and test
//                  finish and free them), then an error on one communicator
//                  leaves another's last error empty; prints "rank R: api
//                  rules hold" and exits 0 (else "WRONG: ..." and 1).
//   p2p-kill V     rank 0 waits in a receive from V, which SIGKILLs itself
//                  after a barrier; rank 0 prints its error and exits 3.
//   setup-kill     rank 0 creates the job's shared-memory segment
//                  (shm::Domain::join) and waits in the set-up window for the
//                  others, which never join; it prints its pid first, so the
//                  test can kill it there.
// Every mode prints "rank R: token T" first (the job's segments and
// processes are found by it). SIGTERM is ignored so that chorusrun's stop
// does not race the survivors' reports (chorusrun falls back to SIGKILL).
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/config.hpp"
#include "collectives/shm/domain.hpp"
#include "include/chorus.h"
#include "tests/common/api_rules.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/wire.hpp"

namespace {

// Prints the error, then destroys the communicator as a careful program does
// (destroy must work, and be quick, after a failure).
int report(int rank, const char* what, chorus_result_t rc, chorus_comm_t comm) {
  std::printf("rank %d: %s failed: code %d (%s): %s\n", rank, what, static_cast<int>(rc),
              chorus_result_string(rc), chorus_comm_last_error(comm));
  std::fflush(stdout);
  chorus_comm_destroy(comm);
  return 3;
}

// Returns 0 when the stranger's connection was closed by the rank without an
// answer, as it must be.
int connect_as_stranger(int target) {
  const auto& config = chorus::global_config();
  auto deadline = chorus::Deadline::after(std::chrono::seconds(20));
  chorus::TcpStoreClient store(config.store_addr, config.job_token, deadline);
  std::string addr = store.get("comm1/tcp/addr/" + std::to_string(target), deadline);
  auto fd = chorus::bootstrap::connect_with_retry(addr, deadline);
  auto hello = chorus::tcp::make_hello("not-the-job-token", 0, target, config.world_size);
  chorus::tcp::write_all(fd.get(), chorus::tcp::bytes_of(hello), deadline);
  char byte;
  pollfd p{fd.get(), POLLIN, 0};
  ::poll(&p, 1, 20000);  // until the rank answers or closes
  ssize_t n = ::recv(fd.get(), &byte, 1, MSG_DONTWAIT);
  std::printf("rank 0: stranger connection to rank %d at %s %s\n", target, addr.c_str(),
              n == 0 ? "was closed (refused)" : "got an answer (WRONG)");
  std::fflush(stdout);
  return n == 0 ? 0 : 1;
}

int64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// SIGKILLs this process 20 ms from now (inside the collective it is about
// to start), printing the time first.
void kill_myself_soon(int rank) {
  std::thread([rank] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::printf("rank %d: killing myself at %lld\n", rank, (long long)now_ns());
    std::fflush(stdout);
    kill(getpid(), SIGKILL);
  }).detach();
}

// Every collective once, each result compared in full with values computed
// here; returns the number of wrong elements (or reports and exits 3).
std::size_t check_all(int rank, int size, chorus_comm_t comm) {
  std::size_t wrong = 0;
  chorus_result_t rc;
  // allreduce: distinct per rank and element; a large and a small call.
  for (std::size_t count : {std::size_t(100003), std::size_t(3)}) {
    std::vector<int32_t> in(count), out(count, -7);
    for (std::size_t i = 0; i < count; ++i) in[i] = int32_t(i % 1000) * 7 + rank * 1001 + 1;
    rc = chorus_allreduce(comm, in.data(), out.data(), count, CHORUS_INT32, CHORUS_SUM, 0);
    if (rc != CHORUS_SUCCESS) std::exit(report(rank, "allreduce", rc, comm));
    for (std::size_t i = 0; i < count; ++i) {
      int64_t want = 0;
      for (int q = 0; q < size; ++q) want += int32_t(i % 1000) * 7 + q * 1001 + 1;
      wrong += out[i] != want;
    }
  }
  // broadcast from the last rank.
  const int root = size - 1;
  std::vector<double> b(5003);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = rank == root ? 0.5 * double(i) : -1.0;
  rc = chorus_broadcast(comm, b.data(), b.size(), CHORUS_FLOAT64, root, 0);
  if (rc != CHORUS_SUCCESS) std::exit(report(rank, "broadcast", rc, comm));
  for (std::size_t i = 0; i < b.size(); ++i) wrong += b[i] != 0.5 * double(i);
  // allgather.
  const std::size_t per = 1031;
  std::vector<int64_t> mine(per), all(per * std::size_t(size), -1);
  for (std::size_t i = 0; i < per; ++i) mine[i] = int64_t(rank) * 1000000 + int64_t(i);
  rc = chorus_allgather(comm, mine.data(), all.data(), per, CHORUS_INT64, 0);
  if (rc != CHORUS_SUCCESS) std::exit(report(rank, "allgather", rc, comm));
  for (std::size_t i = 0; i < all.size(); ++i)
    wrong += all[i] != int64_t(i / per) * 1000000 + int64_t(i % per);
  // reduce-scatter, max: the winning rank changes from element to element.
  auto contribution = [](int q, std::size_t i) {
    return float((i * 7 + std::size_t(q) * 13) % 101);
  };
  std::vector<float> rs_in(per * std::size_t(size)), rs_out(per, -1.0f);
  for (std::size_t i = 0; i < rs_in.size(); ++i) rs_in[i] = contribution(rank, i);
  rc = chorus_reduce_scatter(comm, rs_in.data(), rs_out.data(), per, CHORUS_FLOAT32, CHORUS_MAX, 0);
  if (rc != CHORUS_SUCCESS) std::exit(report(rank, "reduce_scatter", rc, comm));
  for (std::size_t i = 0; i < per; ++i) {
    float want = -1.0f;
    for (int q = 0; q < size; ++q)
      want = std::max(want, contribution(q, std::size_t(rank) * per + i));
    wrong += rs_out[i] != want;
  }
  rc = chorus_barrier(comm, 0);
  if (rc != CHORUS_SUCCESS) std::exit(report(rank, "barrier", rc, comm));
  return wrong;
}

// Rank 0 holds the job's shared-memory segment, waiting in Domain::join for
// the others to map it (they never do).
int hold_setup_window(int rank, int size) {
  const auto& config = chorus::global_config();
  auto deadline = chorus::Deadline::after(std::chrono::seconds(60));
  chorus::TcpStoreClient store(config.store_addr, config.job_token, deadline);
  if (rank != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(60));  // until the job is stopped
    return 0;
  }
  std::printf("rank 0: pid %d joining the shared-memory domain\n", int(getpid()));
  std::fflush(stdout);
  chorus::shm::Domain::Options o;
  o.rank = 0;
  o.layout.ranks = size;
  o.name_prefix = chorus::shm::segment_name_prefix(config.job_token);
  o.key_prefix = "e2e-setup/";
  o.deadline = deadline;
  chorus::shm::Domain::join(store, o);
  std::printf("rank 0: joined (WRONG: the others never map the segment)\n");
  return 1;
}

// The header's rules for requests and errors (tests/common/api_rules.hpp),
// on every rank of a job.
int api_rules(int rank, int size, chorus_comm_t comm) {
  chorus_comm_t other = nullptr;
  const char* broke = chorus::test::requests_outlive_their_communicator(rank, size, comm);
  if (!broke && (chorus_comm_split(comm, 0, rank, &other) != CHORUS_SUCCESS || !other))
    broke = "second split";
  if (!broke) broke = chorus::test::last_error_is_per_communicator(comm, other, size);
  if (broke)
    std::printf("rank %d: WRONG: %s: %s\n", rank, broke, chorus_comm_last_error(comm));
  else
    std::printf("rank %d: api rules hold\n", rank);
  std::fflush(stdout);
  if (other) chorus_comm_destroy(other);
  chorus_comm_destroy(comm);
  return broke ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGTERM, SIG_IGN);
  std::string mode = argc > 1 ? argv[1] : "";
  int arg = argc > 2 ? std::atoi(argv[2]) : 0;
  {
    const char* token = std::getenv("CHORUS_JOB_TOKEN");
    const char* r = std::getenv("CHORUS_RANK");
    std::printf("rank %s: token %s\n", r ? r : "?", token ? token : "");
    std::fflush(stdout);
  }
  if (mode == "setup-kill") {
    const auto& config = chorus::global_config();
    return hold_setup_window(config.rank, config.world_size);
  }

  chorus_comm_t comm = nullptr;
  chorus_result_t rc = chorus_init_from_env(&comm);
  if (rc != CHORUS_SUCCESS) return report(-1, "init", rc, nullptr);
  int rank = 0, size = 0;
  chorus_comm_rank(comm, &rank);
  chorus_comm_size(comm, &size);

  if (mode == "kill") {
    // Small integers: sums are exact in float32 and differ per rank and element.
    std::vector<float> data(std::size_t(8) << 20);
    for (int iter = 0; iter < 200; ++iter) {
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = float(rank + 1 + int(i % 7) + iter);
      if (rank == arg && iter == 1) kill_myself_soon(rank);
      rc = chorus_allreduce(comm, data.data(), data.data(), data.size(), CHORUS_FLOAT32, CHORUS_SUM,
                            0);
      if (rc != CHORUS_SUCCESS) {
        std::printf("rank %d: failed at %lld\n", rank, (long long)now_ns());
        return report(rank, "allreduce", rc, comm);
      }
      for (std::size_t i = 0; i < data.size(); ++i) {
        const float want = float(size * (size + 1) / 2 + size * (int(i % 7) + iter));
        if (data[i] != want) {
          std::printf("rank %d: iteration %d element %zu is %g, not %g (WRONG)\n", rank, iter, i,
                      double(data[i]), double(want));
          return 4;
        }
      }
    }
    std::printf("rank %d: all allreduces succeeded (WRONG: a rank was killed)\n", rank);
    return 0;
  }
  if (mode == "api-rules") return api_rules(rank, size, comm);
  if (mode == "mismatch") {
    std::size_t count = rank == arg ? 1001 : 1000;
    std::vector<float> data(count, 1.0f);
    rc = chorus_allreduce(comm, data.data(), data.data(), count, CHORUS_FLOAT32, CHORUS_SUM, 0);
    if (rc != CHORUS_SUCCESS) return report(rank, "allreduce", rc, comm);
    std::printf("rank %d: mismatched allreduce succeeded (WRONG)\n", rank);
    return 0;
  }
  if (mode == "stranger") {
    int status = 0;
    if (rank == 0 && size > 1) status = connect_as_stranger(1);
    std::vector<int32_t> data(100000);
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int32_t>(i) + rank;
    rc = chorus_allreduce(comm, data.data(), data.data(), data.size(), CHORUS_INT32, CHORUS_SUM, 0);
    if (rc != CHORUS_SUCCESS) return report(rank, "allreduce", rc, comm);
    int64_t rank_sum = int64_t(size) * (size - 1) / 2;
    for (std::size_t i = 0; i < data.size(); ++i)
      if (data[i] != static_cast<int64_t>(i) * size + rank_sum) {
        std::printf("rank %d: wrong value at %zu\n", rank, i);
        return 4;
      }
    rc = chorus_comm_destroy(comm);
    if (rc != CHORUS_SUCCESS) return report(rank, "destroy", rc, nullptr);
    std::printf("rank %d: job completed\n", rank);
    return status;
  }
  if (mode == "split-kill") {
    chorus_comm_t child = nullptr;
    rc = chorus_comm_split(comm, rank % 2, rank, &child);
    if (rc != CHORUS_SUCCESS) return report(rank, "split", rc, comm);
    std::vector<float> data(std::size_t(4) << 20, 1.0f);
    for (int iter = 0; iter < 200; ++iter) {
      if (rank == arg && iter == 1) kill_myself_soon(rank);
      for (chorus_comm_t c : {comm, child}) {
        rc = chorus_allreduce(c, data.data(), data.data(), data.size(), CHORUS_FLOAT32, CHORUS_MAX,
                              0);
        if (rc == CHORUS_SUCCESS) continue;
        // The other communicator must fail too, and quickly.
        chorus_comm_t other = c == comm ? child : comm;
        std::printf("rank %d: %s failed at %lld: code %d: %s\n", rank,
                    c == comm ? "parent" : "child", (long long)now_ns(), int(rc),
                    chorus_comm_last_error(c));
        chorus_result_t rc2 = chorus_allreduce(other, data.data(), data.data(), data.size(),
                                               CHORUS_FLOAT32, CHORUS_MAX, 0);
        std::printf("rank %d: %s failed at %lld: code %d: %s\n", rank,
                    other == comm ? "parent" : "child", (long long)now_ns(), int(rc2),
                    chorus_comm_last_error(other));
        std::fflush(stdout);
        chorus_comm_destroy(child);
        chorus_comm_destroy(comm);
        return 3;
      }
    }
    std::printf("rank %d: all allreduces succeeded (WRONG: a rank was killed)\n", rank);
    return 0;
  }
  if (mode == "p2p-kill") {
    rc = chorus_barrier(comm, 0);
    if (rc != CHORUS_SUCCESS) return report(rank, "barrier", rc, comm);
    if (rank == arg) {
      std::printf("rank %d: killing myself at %lld\n", rank, (long long)now_ns());
      std::fflush(stdout);
      kill(getpid(), SIGKILL);
    }
    if (rank != 0) {
      std::this_thread::sleep_for(std::chrono::seconds(60));  // until the job is stopped
      return 0;
    }
    std::vector<int32_t> buf(1000);
    rc = chorus_recv(comm, buf.data(), buf.size(), CHORUS_INT32, arg, 5, 0);
    std::printf("rank 0: recv failed at %lld\n", (long long)now_ns());
    if (rc != CHORUS_SUCCESS) return report(rank, "recv", rc, comm);
    std::printf("rank 0: received from a dead rank (WRONG)\n");
    return 0;
  }
  if (mode == "parked-abort") {
    // Rank 0 sends rank 1 a frame larger than the sockets hold, which rank 1
    // does not receive (it waits in an allreduce), then aborts and stays
    // alive: its abort notice queues behind the frame's unread bytes.
    rc = chorus_barrier(comm, 0);
    if (rc != CHORUS_SUCCESS) return report(rank, "barrier", rc, comm);
    if (rank == 0) {
      std::vector<float> big(std::size_t(16) << 20, 1.0f);  // 64 MiB
      chorus_request_t send = nullptr;
      rc = chorus_isend(comm, big.data(), big.size(), CHORUS_FLOAT32, 1, 7, &send);
      if (rc != CHORUS_SUCCESS) return report(rank, "isend", rc, comm);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 parks it
      std::printf("rank 0: aborting at %lld\n", (long long)now_ns());
      std::fflush(stdout);
      chorus_comm_abort(comm, "parked-abort test");
      std::this_thread::sleep_for(std::chrono::seconds(arg));
      return 0;
    }
    std::vector<float> data(16, 1.0f);
    rc = chorus_allreduce(comm, data.data(), data.data(), data.size(), CHORUS_FLOAT32, CHORUS_SUM,
                          0);
    std::printf("rank %d: allreduce failed at %lld\n", rank, (long long)now_ns());
    if (rc != CHORUS_SUCCESS) return report(rank, "allreduce", rc, comm);
    std::printf("rank %d: allreduce succeeded beside an aborted rank (WRONG)\n", rank);
    return 0;
  }
  if (mode == "check") {
    std::size_t wrong = check_all(rank, size, comm);
    rc = chorus_comm_destroy(comm);
    if (rc != CHORUS_SUCCESS) return report(rank, "destroy", rc, nullptr);
    if (wrong) {
      std::printf("rank %d: %zu elements wrong\n", rank, wrong);
      return 4;
    }
    std::printf("rank %d: all collectives correct\n", rank);
    return 0;
  }
  std::fprintf(
      stderr,
      "usage: e2e_rank kill|mismatch|stranger|check|setup-kill|split-kill|p2p-kill|parked-abort "
      "[rank]\n");
  return 2;
}
