// Exception-to-result mapping for every extern "C" entry point.
#pragma once

#include <new>

#include "base/core/error.hpp"

namespace chorus::api {

template <typename Fn>
chorus_result_t guarded(chorus_comm_t comm, Fn&& fn) noexcept {
  try {
    clear_last_error(comm);
    fn();
    return CHORUS_SUCCESS;
  } catch (const chorus::Error& e) {
    set_last_error(comm, e.what());
    return e.code();
  } catch (const std::bad_alloc& e) {
    set_last_error(comm, "out of memory");
    return CHORUS_ERR_NO_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(comm, std::string("internal error: ") + e.what());
    return CHORUS_ERR_INTERNAL;
  } catch (...) {
    set_last_error(comm, "internal error: unknown exception");
    return CHORUS_ERR_INTERNAL;
  }
}

}  // namespace chorus::api
