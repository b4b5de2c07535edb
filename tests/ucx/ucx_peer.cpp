// A UCX rank in its own process, for the peer-death tests: joins a two-rank
// world, says it is ready, and waits to be killed (at most 60 s). With a
// sixth argument SEND_TAG it first sends rank 0 its part of call #3 (16
// bytes, byte i = i * 7 + 3) with that tag, and waits until the send is done.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "transports/ucx/ucx_transport.hpp"

int main(int argc, char** argv) {
  if (argc != 6 && argc != 7) {
    std::fprintf(stderr, "usage: ucx_peer STORE_ADDR TOKEN PREFIX RANK SIZE [SEND_TAG]\n");
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
    if (argc == 7) {
      std::vector<std::byte> part(16);
      for (std::size_t i = 0; i < part.size(); ++i) part[i] = static_cast<std::byte>(i * 7 + 3);
      chorus::CallSignature sig;
      sig.seq = 3;
      sig.count = part.size();
      sig.kind = static_cast<uint8_t>(chorus::CollectiveKind::allreduce);
      auto send = transport.isend(0, static_cast<uint32_t>(std::stoul(argv[6])), sig, part);
      chorus::wait_one(transport, send, chorus::Deadline::after(std::chrono::seconds(20)), 10,
                       "ucx_peer");
    }
    store.set(o.key_prefix + "ready/" + argv[4], "1");
    std::this_thread::sleep_for(std::chrono::seconds(60));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ucx_peer: %s\n", e.what());
    return 1;
  }
  return 0;
}
