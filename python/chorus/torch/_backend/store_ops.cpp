// chorus_store_ops_t over a c10d::Store: how chorus meets its peers through
// the store torch gives each process group (a PrefixStore per group).
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <string>

#include "backend.hpp"

namespace chorus::torch_backend {
namespace {

struct StoreContext {
  c10::intrusive_ptr<c10d::Store> store;
};

// The text of the calling thread's last failed callback, for last_error.
thread_local std::string last_store_error;

c10d::Store& store_of(void* context) {
  return *static_cast<StoreContext*>(context)->store;
}

// Runs a c10d::Store call; its exception becomes a result code and words.
template <typename Body>
chorus_result_t guarded(Body&& body) noexcept {
  try {
    body();
    return CHORUS_SUCCESS;
  } catch (const c10::DistStoreError& e) {
    // c10d's stores report an expired wait as a DistStoreError ("timeout").
    last_store_error = e.what_without_backtrace();
    return CHORUS_ERR_TIMEOUT;
  } catch (const c10::Error& e) {
    last_store_error = e.what_without_backtrace();
    return CHORUS_ERR_IO;
  } catch (const std::exception& e) {
    last_store_error = e.what();
    return CHORUS_ERR_IO;
  } catch (...) {
    last_store_error = "unknown exception";
    return CHORUS_ERR_IO;
  }
}

chorus_result_t store_set(void* context, const char* key, const void* value, size_t length) {
  return guarded([&] {
    const auto* bytes = static_cast<const uint8_t*>(value);
    store_of(context).set(key, std::vector<uint8_t>(bytes, bytes + length));
  });
}

chorus_result_t store_wait(void* context, const char* const* keys, size_t count,
                           int64_t timeout_ms) {
  return guarded([&] {
    std::vector<std::string> names(keys, keys + count);
    store_of(context).wait(names, std::chrono::milliseconds(timeout_ms));
  });
}

chorus_result_t store_get(void* context, const char* key,
                          void (*deliver)(void* sink, const void* value, size_t length),
                          void* sink) {
  return guarded([&] {
    std::vector<uint8_t> value = store_of(context).get(key);
    deliver(sink, value.data(), value.size());
  });
}

chorus_result_t store_add(void* context, const char* key, int64_t delta, int64_t* result) {
  return guarded([&] { *result = store_of(context).add(key, delta); });
}

const char* store_last_error(void*) {
  return last_store_error.c_str();
}

void store_release(void* context) {
  delete static_cast<StoreContext*>(context);
}

}  // namespace

chorus_store_ops_t store_ops_for(const c10::intrusive_ptr<c10d::Store>& store) {
  chorus_store_ops_t ops{};
  ops.size = sizeof ops;
  ops.context = new StoreContext{store};
  ops.set = store_set;
  ops.wait = store_wait;
  ops.get = store_get;
  ops.add = store_add;
  ops.last_error = store_last_error;
  ops.release = store_release;
  return ops;
}

std::string shared_network_address(const c10::intrusive_ptr<c10d::Store>& store) {
  c10::intrusive_ptr<c10d::Store> base = store;
  if (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(store.get()))
    base = prefixed->getUnderlyingNonPrefixStore();
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(base.get())) {
    const std::string& host = tcp->getHost();
    return host.find(':') != std::string::npos ? "[" + host + "]:" + std::to_string(tcp->getPort())
                                               : host + ":" + std::to_string(tcp->getPort());
  }
  return "";
}

}  // namespace chorus::torch_backend
