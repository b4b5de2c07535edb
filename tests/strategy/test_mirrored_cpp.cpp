// The mirrored strategy's C++ form (include/chorus/mirrored.hpp) on two
// thread ranks: a linear model y = w . x trained with momentum, the same on
// both ranks and as worked out here; a replica check that throws
// chorus::Error with CHORUS_ERR_MISMATCH.
#include <catch2/catch.hpp>

#include <chorus/mirrored.hpp>

#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "tests/api/api_harness.hpp"

TEST_CASE("mirrored: the C++ form", "[mirrored]") {
  const int n = 2;
  chorus::TcpStoreServer server(chorus::test::kToken);
  std::vector<std::vector<double>> weights(n);
  std::vector<int> mismatch(n, -1);
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      try {
        auto comm = chorus::Communicator::create(r, n, server.address(), chorus::test::kToken);
        std::vector<double> w(2, double(r)), dw(2);  // rank 1's initial values are overwritten
        std::vector<int32_t> seen(1, 0);
        chorus::Mirrored mirrored(comm);
        mirrored.add_variable("w", std::span<double>(w), std::span<double>(dw));
        mirrored.add_variable("seen", std::span<int32_t>(seen));
        mirrored.broadcast_variables();
        // Rank r's gradient is (r + 1, 2 (r + 1)): the mean over 2 ranks is (1.5, 3).
        for (int step = 0; step < 2; ++step) {
          dw = {double(r + 1), 2.0 * (r + 1)};
          mirrored.gradient_ready("w");
          mirrored.reduce_gradients();
          mirrored.apply(chorus::Optimizer::momentum_sgd(0.1, 0.5));
          mirrored.end_step();
        }
        weights[r] = w;
        if (r == 1) seen[0] = 7;
        try {
          mirrored.check_replicas();
        } catch (const chorus::Error& e) {
          mismatch[r] = e.code();
          errors[r] = e.what();
        }
      } catch (const std::exception& e) {
        errors[r] = std::string("unexpected: ") + e.what();
      }
    });
  for (auto& t : threads) t.join();
  // Momentum 0.5, lr 0.1, gradient g = (1.5, 3) twice: buf g then 1.5 g;
  // w = 0 - 0.1 g - 0.15 g = -0.25 g.
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(weights[r].size() == 2);
    CHECK(weights[r][0] == Approx(-0.375).epsilon(1e-15));
    CHECK(weights[r][1] == Approx(-0.75).epsilon(1e-15));
    CHECK(mismatch[r] == CHORUS_ERR_MISMATCH);
    CHECK(errors[r].find("variable 'seen' on rank 1 differs from rank 0") != std::string::npos);
  }
  CHECK(weights[0] == weights[1]);
}
