// The one source each collective test binary compiles itself: which
// transport its sweeps run over (tests/coll/harness.hpp).
#include "tests/coll/harness.hpp"

namespace chorus::test {

TransportKind default_transport() {
#if defined(CHORUS_TEST_TCP)
  return TransportKind::tcp;
#elif defined(CHORUS_TEST_UCX)
  return TransportKind::ucx;
#elif defined(CHORUS_TEST_SHM)
  return TransportKind::shm;
#else
  return TransportKind::inproc;
#endif
}

}  // namespace chorus::test
