#include "base/bootstrap/file_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <filesystem>
#include <optional>
#include <thread>

#include "base/bootstrap/net.hpp"
#include "base/bootstrap/store_wire.hpp"
#include "base/core/error.hpp"

namespace chorus {
namespace {

using bootstrap::UniqueFd;

uint64_t fnv1a(std::string_view s, uint64_t h) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// File name of a key: "k_" + the key with bytes outside [A-Za-z0-9._-]
// written as %XX, so any key (with '/', "..", binary) is one plain file.
// Names beyond what file systems allow fall back to two 64-bit hashes.
std::string file_name(std::string_view key) {
  std::string name = "k_";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '.' || c == '_' || c == '-')
      name += static_cast<char>(c);
    else
      name += fmt::format("%{:02X}", c);
  }
  if (name.size() <= 200) return name;
  return fmt::format("h_{:016x}{:016x}_{}", fnv1a(key, 14695981039346656037ull),
                     fnv1a(key, 0x9e3779b97f4a7c15ull), key.size());
}

class FileStore : public Store {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec)
      throw IoError(CHORUS_ERR_IO,
                    fmt::format("file store: cannot create '{}': {}", dir_, ec.message()));
  }

  void set(const std::string& key, const std::string& value) override {
    write_atomic(path(key), value);
  }

  std::string get(const std::string& key, const Deadline& deadline) override {
    auto start = Clock::now();
    Backoff backoff;
    for (;;) {
      if (auto v = read(path(key))) return *v;
      if (deadline.expired())
        throw IoError(CHORUS_ERR_TIMEOUT,
                      fmt::format("file store get: key '{}' did not appear in {} within {:.1f} s",
                                  key, dir_, seconds_since(start)));
      backoff.sleep(deadline);
    }
  }

  void wait(const std::vector<std::string>& keys, const Deadline& deadline) override {
    auto start = Clock::now();
    Backoff backoff;
    for (;;) {
      std::vector<std::string> missing;
      for (const auto& k : keys)
        if (access(path(k).c_str(), F_OK) != 0) missing.push_back(k);
      if (missing.empty()) return;
      if (deadline.expired())
        throw IoError(
            CHORUS_ERR_TIMEOUT,
            fmt::format("file store wait: key(s) {} did not appear in {} within {:.1f} s",
                        bootstrap::wire::describe_keys(missing), dir_, seconds_since(start)));
      backoff.sleep(deadline);
    }
  }

  int64_t add(const std::string& key, int64_t delta) override {
    std::string lock_path = dir_ + "/l_" + file_name(key).substr(2);
    UniqueFd lock(open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
    if (!lock.valid())
      throw IoError(CHORUS_ERR_IO, errno_message("file store: " + lock_path, errno));
    while (flock(lock.get(), LOCK_EX) < 0) {
      if (errno != EINTR) throw IoError(CHORUS_ERR_IO, errno_message("file store: flock", errno));
    }
    // The lock is released when `lock` closes.
    int64_t current = 0;
    if (auto v = read(path(key))) {
      auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), current);
      if (ec != std::errc() || ptr != v->data() + v->size())
        throw UsageError(
            fmt::format("file store add: the value at key '{}' is not an integer", key));
    }
    int64_t result = 0;
    if (__builtin_add_overflow(current, delta, &result))
      throw UsageError(fmt::format("file store add: overflow at key '{}'", key));
    write_atomic(path(key), std::to_string(result));
    return result;
  }

 private:
  // Polling interval grows from 1 ms to 50 ms: quick when the key comes soon,
  // cheap when it takes long.
  struct Backoff {
    std::chrono::microseconds step{1000};
    void sleep(const Deadline& deadline) {
      std::this_thread::sleep_for(std::min<std::chrono::nanoseconds>(step, deadline.remaining()));
      step = std::min(step * 2, std::chrono::microseconds(50000));
    }
  };

  std::string path(const std::string& key) const { return dir_ + "/" + file_name(key); }

  std::optional<std::string> read(const std::string& p) const {
    UniqueFd fd(open(p.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return std::nullopt;
      throw IoError(CHORUS_ERR_IO, errno_message("file store: open " + p, errno));
    }
    std::string out;
    char buf[8192];
    for (;;) {
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n > 0) {
        out.append(buf, static_cast<size_t>(n));
      } else if (n == 0) {
        return out;
      } else if (errno != EINTR) {
        throw IoError(CHORUS_ERR_IO, errno_message("file store: read " + p, errno));
      }
    }
  }

  void write_atomic(const std::string& p, const std::string& value) {
    static std::atomic<uint64_t> counter{0};
    // Host and pid keep writers on a shared file system apart.
    static const std::string host = [] {
      char name[256] = {};
      gethostname(name, sizeof name - 1);
      return std::string(name);
    }();
    std::string tmp = fmt::format("{}/.tmp.{}.{}.{}", dir_, host, getpid(), counter.fetch_add(1));
    {
      UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
      if (!fd.valid())
        throw IoError(CHORUS_ERR_IO, errno_message("file store: create " + tmp, errno));
      size_t done = 0;
      while (done < value.size()) {
        ssize_t n = ::write(fd.get(), value.data() + done, value.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          int err = errno;
          unlink(tmp.c_str());
          throw IoError(CHORUS_ERR_IO, errno_message("file store: write " + tmp, err));
        }
        done += static_cast<size_t>(n);
      }
    }
    if (rename(tmp.c_str(), p.c_str()) < 0) {
      int err = errno;
      unlink(tmp.c_str());
      throw IoError(CHORUS_ERR_IO, errno_message("file store: rename to " + p, err));
    }
  }

  std::string dir_;
};

}  // namespace

std::unique_ptr<Store> make_file_store(const std::string& dir) {
  return std::make_unique<FileStore>(dir);
}

}  // namespace chorus
