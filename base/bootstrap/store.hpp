// Rendezvous store: a small key-value service the ranks of a job use to find
// each other. chorusrun hosts a TCP store; tests may use a file store.
// Values are binary-safe strings. Every wait takes a deadline.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/core/deadline.hpp"

namespace chorus {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, const std::string& value) = 0;
  // Waits until key exists; throws IoError(CHORUS_ERR_TIMEOUT) naming the key.
  virtual std::string get(const std::string& key, const Deadline& deadline) = 0;
  // Waits until every key exists; throws IoError(CHORUS_ERR_TIMEOUT) naming the missing ones.
  virtual void wait(const std::vector<std::string>& keys, const Deadline& deadline) = 0;
  // Atomically adds delta to the integer at key (0 if absent); returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
};

}  // namespace chorus
