// A rank program for the end-to-end tests run through chorusrun. Modes:
//   kill VICTIM    all ranks loop large allreduces; VICTIM SIGKILLs itself in
//                  the middle of one. Survivors print their error and exit 3.
//   mismatch BAD   rank BAD passes a different count; every rank prints its
//                  error and exits 3.
//   stranger       rank 0 connects to rank 1's listener with a wrong job token
//                  (the connection must be refused) and then the job runs a
//                  checked allreduce and exits 0.
// SIGTERM is ignored so that chorusrun's stop does not race the survivors'
// reports (chorusrun falls back to SIGKILL after its grace period).
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "include/chorus.h"
#include "lib/bootstrap/tcp_store.hpp"
#include "lib/core/config.hpp"
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

}  // namespace

int main(int argc, char** argv) {
  signal(SIGTERM, SIG_IGN);
  std::string mode = argc > 1 ? argv[1] : "";
  int arg = argc > 2 ? std::atoi(argv[2]) : 0;

  chorus_comm_t comm = nullptr;
  chorus_result_t rc = chorus_init_from_env(&comm);
  if (rc != CHORUS_SUCCESS) return report(-1, "init", rc, nullptr);
  int rank = 0, size = 0;
  chorus_comm_rank(comm, &rank);
  chorus_comm_size(comm, &size);

  if (mode == "kill") {
    std::vector<float> data(std::size_t(8) << 20, 1.0f);
    for (int iter = 0; iter < 200; ++iter) {
      if (rank == arg && iter == 1) {
        std::thread([] {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          kill(getpid(), SIGKILL);
        }).detach();
      }
      rc = chorus_allreduce(comm, data.data(), data.data(), data.size(), CHORUS_FLOAT32, CHORUS_MAX,
                            0);
      if (rc != CHORUS_SUCCESS) return report(rank, "allreduce", rc, comm);
    }
    std::printf("rank %d: all allreduces succeeded (WRONG: a rank was killed)\n", rank);
    return 0;
  }
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
  std::fprintf(stderr, "usage: e2e_rank kill|mismatch|stranger [rank]\n");
  return 2;
}
