// Two rules of <chorus.h> that every rank of a job must see, checked the
// same way by the C API tests (thread ranks) and by the end-to-end test
// (processes under chorusrun): every result of wait and test but TIMEOUT
// frees the request, also after its communicator was destroyed; and
// chorus_comm_last_error is the message of the communicator asked about,
// not of the thread's last call. Each returns nullptr, or what broke.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "include/chorus.h"

namespace chorus::test {

// Two non-blocking allreduces on a child of `comm`, destroyed while they are
// outstanding (destroy waits for them): wait and test then report their
// results and free them (LeakSanitizer checks the freeing where it runs).
inline const char* requests_outlive_their_communicator(int rank, int size, chorus_comm_t comm) {
  chorus_comm_t child = nullptr;
  if (chorus_comm_split(comm, 0, rank, &child) != CHORUS_SUCCESS || !child) return "split";
  int32_t x = rank + 1, y = 10 * (rank + 1);
  chorus_request_t first = nullptr, second = nullptr;
  if (chorus_iallreduce(child, &x, &x, 1, CHORUS_INT32, CHORUS_SUM, &first) != CHORUS_SUCCESS ||
      chorus_iallreduce(child, &y, &y, 1, CHORUS_INT32, CHORUS_SUM, &second) != CHORUS_SUCCESS)
    return "iallreduce";
  if (chorus_comm_destroy(child) != CHORUS_SUCCESS) return "destroy with requests out";
  const int32_t sum = size * (size + 1) / 2;
  if (chorus_wait(&first, 0) != CHORUS_SUCCESS || first != nullptr || x != sum)
    return "wait after the communicator was destroyed";
  int done = 0;
  if (chorus_test(&second, &done) != CHORUS_SUCCESS || !done || second != nullptr || y != 10 * sum)
    return "test after the communicator was destroyed";
  return nullptr;
}

// An error on `comm` (a dtype no rank can use; it fails comm on every
// rank), then a successful call on `other`, a communicator of the same
// `size`: comm keeps its message, and other has none of its own.
inline const char* last_error_is_per_communicator(chorus_comm_t comm, chorus_comm_t other,
                                                  int size) {
  float f = 1;
  if (chorus_allreduce(comm, &f, &f, 1, static_cast<chorus_dtype_t>(77), CHORUS_SUM, 0) !=
      CHORUS_ERR_INVALID_ARGUMENT)
    return "an unknown dtype was not refused";
  const std::string message = chorus_comm_last_error(comm);
  if (message.find("dtype 77") == std::string::npos) return "the refusal does not name the dtype";
  int other_size = 0;
  if (chorus_comm_size(other, &other_size) != CHORUS_SUCCESS || other_size != size)
    return "size of the other communicator";
  if (message != chorus_comm_last_error(comm) || std::strlen(chorus_comm_last_error(other)) != 0)
    return "the last error is not kept per communicator";
  return nullptr;
}

}  // namespace chorus::test
