// The C++ API: a gradient average with a non-blocking allreduce, a broadcast of
// "weights" from rank 0, and a check of both.
//
//   chorusrun -np 4 ./allreduce_cpp
#include <chorus/chorus.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    auto comm = chorus::Communicator::from_env();
    const int rank = comm.rank(), size = comm.size();

    std::vector<float> grad(1 << 16);
    for (std::size_t i = 0; i < grad.size(); ++i) grad[i] = float(rank * 2 + int(i % 7));
    chorus::Work work = comm.iallreduce_inplace(std::span<float>(grad), chorus::Op::avg);
    std::vector<double> weights(1000, rank == 0 ? 0.25 : -1.0);
    work.wait();
    comm.broadcast(std::span<double>(weights), 0);

    std::size_t wrong = 0;
    for (std::size_t i = 0; i < grad.size(); ++i)
      if (grad[i] != float(size - 1) + float(i % 7)) ++wrong;  // mean of rank*2 is size-1
    for (double w : weights) wrong += w != 0.25;
    std::printf("rank %d of %d: C++ API: %zu wrong\n", rank, size, wrong);
    return wrong == 0 ? 0 : 4;
  } catch (const chorus::Error& e) {
    std::fprintf(stderr, "chorus error %d: %s\n", static_cast<int>(e.code()), e.what());
    return 3;
  }
}
