// The header-only C++ API over the newer calls: spans in, exceptions out.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "include/chorus/chorus.hpp"
#include "tests/api/api_harness.hpp"

TEST_CASE("c++ api: reduce, gather, scatter, alltoall, v-variants, messages and split", "[api]") {
  const int n = 3;
  chorus::TcpStoreServer server(chorus::test::kToken);
  std::vector<int> results(n, -1);
  std::atomic<int> arrived{0};
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto comm = chorus::Communicator::create(r, n, server.address(), chorus::test::kToken);
        std::vector<int32_t> in(5, r + 1), out(5, 0);
        comm.reduce<int32_t>(in, out, chorus::Op::sum, 0);
        if (r == 0 && out != std::vector<int32_t>(5, 6)) throw std::runtime_error("reduce");
        std::vector<int32_t> all(15, -1);
        comm.gather<int32_t>(in, all, 1);
        if (r == 1 && (all[0] != 1 || all[5] != 2 || all[14] != 3))
          throw std::runtime_error("gather");
        std::vector<int32_t> part(5, -1);
        comm.scatter<int32_t>(all, part, 1);
        if (part != in) throw std::runtime_error("scatter");
        std::vector<int32_t> a_in(6), a_out(6, -1);
        for (int i = 0; i < 6; ++i) a_in[i] = r * 10 + i / 2;
        comm.alltoall<int32_t>(a_in, a_out);
        for (int i = 0; i < 6; ++i)
          if (a_out[i] != (i / 2) * 10 + r) throw std::runtime_error("alltoall");
        std::vector<std::size_t> counts{1, 2, 3};
        std::vector<double> v_in(counts[r], double(r)), v_out(6, -1);
        comm.allgatherv<double>(v_in, v_out, counts);
        if (v_out != std::vector<double>{0, 1, 1, 2, 2, 2}) throw std::runtime_error("allgatherv");
        std::vector<double> rs_in(6, 1.0), rs_out(counts[r]);
        comm.reduce_scatterv<double>(rs_in, rs_out, counts, chorus::Op::sum);
        if (rs_out != std::vector<double>(counts[r], 3.0))
          throw std::runtime_error("reduce_scatterv");
        // A ring of messages.
        std::vector<int64_t> token{int64_t(r)}, got{-1};
        auto w = comm.irecv<int64_t>(got, (r + n - 1) % n, 3);
        comm.send<int64_t>(token, (r + 1) % n, 3);
        w.wait();
        if (got[0] != (r + n - 1) % n) throw std::runtime_error("messages");
        auto child = comm.split(r == 2 ? CHORUS_UNDEFINED : 0, -r);
        if ((r == 2) != !child.has_value()) throw std::runtime_error("split");
        if (child && child->rank() != 1 - r) throw std::runtime_error("split order");
        if (child) child->barrier();
        chorus::test::all_arrive(arrived, n);
        try {  // refused on every rank, which fails the communicator everywhere
          std::vector<int32_t> wrong(4);
          comm.alltoall<int32_t>(wrong, wrong);
          throw std::runtime_error("an alltoall of 4 elements on 3 ranks was accepted");
        } catch (const chorus::Error& e) {
          if (e.code() != CHORUS_ERR_INVALID_ARGUMENT) throw;
        }
        try {
          comm.barrier();
          throw std::runtime_error("a barrier after a refused call succeeded");
        } catch (const chorus::Error& e) {
          if (e.code() != CHORUS_ERR_ABORTED) throw;
        }
        results[r] = 0;
      } catch (const std::exception& e) {
        UNSCOPED_INFO("rank " << r << ": " << e.what());
        results[r] = 1;
      }
    });
  for (auto& t : threads) t.join();
  CHECK(chorus::test::all_zero(results));
}
