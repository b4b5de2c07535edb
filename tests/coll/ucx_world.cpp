#include "tests/coll/ucx_world.hpp"

#include "transports/ucx/ucx_transport.hpp"

namespace chorus::test {

std::unique_ptr<Transport> connect_ucx(Store& store, int rank, int size) {
  ucx::UcxOptions o;
  o.rank = rank;
  o.size = size;
  o.token = "coll-test";
  o.connect_timeout_s = 30;
  o.close_timeout_s = 10;
  return std::make_unique<ucx::UcxTransport>(store, o);
}

}  // namespace chorus::test
