// A UCX rank in its own process, for the peer-death test: joins a two-rank
// world, says it is ready, and waits to be killed (at most 60 s).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>

#include "base/bootstrap/tcp_store.hpp"
#include "transports/ucx/ucx_transport.hpp"

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: ucx_peer STORE_ADDR TOKEN PREFIX RANK SIZE\n");
    return 2;
  }
  try {
    chorus::TcpStoreClient store(argv[1], argv[2],
                                 chorus::Deadline::after(std::chrono::seconds(20)));
    chorus::ucx::UcxOptions o;
    o.token = argv[2];
    o.key_prefix = argv[3];
    o.rank = std::atoi(argv[4]);
    o.size = std::atoi(argv[5]);
    o.connect_timeout_s = 20;
    chorus::ucx::UcxTransport transport(store, o);
    store.set(o.key_prefix + "ready/" + argv[4], "1");
    std::this_thread::sleep_for(std::chrono::seconds(60));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ucx_peer: %s\n", e.what());
    return 1;
  }
  return 0;
}
