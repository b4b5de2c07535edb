// A Store over callbacks supplied through the C API (chorus_store_ops_t):
// how a framework hands Chorus its own key-value store (PyTorch's c10d::Store
// of a process group) instead of Chorus opening one of its own.
#pragma once

#include <memory>

#include "base/bootstrap/store.hpp"
#include "include/chorus.h"

namespace chorus {

// Takes ownership of ops.context: ops.release runs when the store is
// destroyed. Throws UsageError naming the missing callback when set, wait, get
// or add is NULL or ops.size is too small (release has run by then).
std::unique_ptr<Store> make_callback_store(const chorus_store_ops_t& ops);

}  // namespace chorus
