#include "base/bootstrap/callback_store.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>

#include "base/core/error.hpp"

namespace chorus {
namespace {

class CallbackStore : public Store {
 public:
  explicit CallbackStore(const chorus_store_ops_t& ops) : ops_(ops) {}
  ~CallbackStore() override {
    if (ops_.release) ops_.release(ops_.context);
  }
  CallbackStore(const CallbackStore&) = delete;
  CallbackStore& operator=(const CallbackStore&) = delete;

  void set(const std::string& key, const std::string& value) override {
    check(ops_.set(ops_.context, key.c_str(), value.data(), value.size()),
          fmt::format("set of key '{}'", key));
  }

  std::string get(const std::string& key, const Deadline& deadline) override {
    // The callbacks' get need not block: waiting first gives it its deadline.
    wait({key}, deadline);
    std::string value;
    check(ops_.get(ops_.context, key.c_str(), &deliver, &value),
          fmt::format("get of key '{}'", key));
    return value;
  }

  void wait(const std::vector<std::string>& keys, const Deadline& deadline) override {
    if (keys.empty()) return;
    std::vector<const char*> names;
    names.reserve(keys.size());
    for (const auto& key : keys) names.push_back(key.c_str());
    // At least 1 ms: 0 means "the store's default" to some stores (c10d's).
    const int64_t timeout_ms = std::max<int64_t>(
        1, std::chrono::ceil<std::chrono::milliseconds>(deadline.remaining()).count());
    check(ops_.wait(ops_.context, names.data(), names.size(), timeout_ms),
          fmt::format("wait for key{} {}", keys.size() > 1 ? "s" : "", fmt::join(keys, ", ")));
  }

  int64_t add(const std::string& key, int64_t delta) override {
    int64_t result = 0;
    check(ops_.add(ops_.context, key.c_str(), delta, &result), fmt::format("add to key '{}'", key));
    return result;
  }

 private:
  static void deliver(void* sink, const void* value, size_t length) {
    static_cast<std::string*>(sink)->assign(static_cast<const char*>(value), length);
  }

  // A failed callback becomes an IoError with its code (a timeout stays a
  // timeout) and the caller's words for it.
  void check(chorus_result_t result, const std::string& what) const {
    if (result == CHORUS_SUCCESS) return;
    std::string detail;
    if (ops_.last_error) {
      const char* text = ops_.last_error(ops_.context);
      if (text && *text) detail = fmt::format(": {}", text);
    }
    // The codes a store can honestly report; anything else is the store's I/O failing.
    const chorus_result_t code = (result == CHORUS_ERR_TIMEOUT || result == CHORUS_ERR_NO_MEMORY)
                                     ? result
                                     : CHORUS_ERR_BOOTSTRAP;
    throw IoError(code, fmt::format("the caller's store failed the {} ({}){}", what,
                                    chorus_result_string(result), detail));
  }

  chorus_store_ops_t ops_;
};

}  // namespace

std::unique_ptr<Store> make_callback_store(const chorus_store_ops_t& ops) {
  const char* missing = nullptr;
  if (ops.size < sizeof(chorus_store_ops_t))
    missing = "chorus_store_ops_t.size (set it to sizeof(chorus_store_ops_t))";
  else if (!ops.set)
    missing = "set";
  else if (!ops.wait)
    missing = "wait";
  else if (!ops.get)
    missing = "get";
  else if (!ops.add)
    missing = "add";
  if (missing) {
    if (ops.size >= sizeof(chorus_store_ops_t) && ops.release) ops.release(ops.context);
    throw UsageError(fmt::format("chorus_store_ops_t: {} is missing", missing));
  }
  return std::make_unique<CallbackStore>(ops);
}

}  // namespace chorus
