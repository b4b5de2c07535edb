// File store: atomic values, waits with deadlines, add under flock.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <filesystem>
#include <thread>

#include "base/bootstrap/file_store.hpp"
#include "base/core/error.hpp"

using namespace chorus;

namespace {

struct TempDir {
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "chorus-fs-XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

}  // namespace

TEST_CASE("file store: set, get, overwrite, binary values and odd keys", "[file_store]") {
  TempDir dir;
  auto s = make_file_store(dir.path + "/nested/store");
  s->set("a", "1");
  CHECK(s->get("a", Deadline::after_ms(1000)) == "1");
  s->set("a", "2");
  CHECK(s->get("a", Deadline::after_ms(1000)) == "2");
  std::string binary("\0\x01\xff", 3);
  s->set("../etc/passwd", binary);
  CHECK(s->get("../etc/passwd", Deadline::after_ms(1000)) == binary);
  CHECK_FALSE(std::filesystem::exists(dir.path + "/nested/etc"));
  std::string long_key(1000, 'k');
  s->set(long_key, "long");
  CHECK(s->get(long_key, Deadline::after_ms(1000)) == "long");
  s->set("", "empty key");
  CHECK(s->get("", Deadline::after_ms(1000)) == "empty key");
  // A second store on the same directory sees the same keys.
  auto other = make_file_store(dir.path + "/nested/store");
  CHECK(other->get("a", Deadline::after_ms(1000)) == "2");
}

TEST_CASE("file store: get and wait block until the key appears", "[file_store]") {
  TempDir dir;
  auto s = make_file_store(dir.path);
  auto writer = make_file_store(dir.path);
  std::thread t([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    writer->set("x", "later");
    writer->set("y", "too");
  });
  CHECK(s->get("x", Deadline::after_ms(10000)) == "later");
  s->wait({"x", "y"}, Deadline::after_ms(10000));
  t.join();
}

TEST_CASE("file store: timeouts name the missing keys", "[file_store]") {
  TempDir dir;
  auto s = make_file_store(dir.path);
  s->set("here", "1");
  try {
    s->get("nowhere", Deadline::after_ms(100));
    FAIL("no timeout");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(e.what(), Catch::Contains("nowhere"));
  }
  try {
    s->wait({"here", "gone"}, Deadline::after_ms(100));
    FAIL("no timeout");
  } catch (const IoError& e) {
    CHECK(e.code() == CHORUS_ERR_TIMEOUT);
    CHECK_THAT(e.what(), Catch::Contains("gone") && !Catch::Contains("here"));
  }
}

TEST_CASE("file store: add is atomic across threads and processes", "[file_store]") {
  TempDir dir;
  constexpr int kThreads = 4, kAdds = 100;
  pid_t child = fork();
  if (child == 0) {
    // Nothing may escape into the child's copy of the test runner.
    try {
      auto s = make_file_store(dir.path);
      for (int i = 0; i < kAdds; ++i) s->add("count", 1);
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      auto s = make_file_store(dir.path);
      for (int i = 0; i < kAdds; ++i) s->add("count", 1);
    });
  for (auto& t : threads) t.join();
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  auto s = make_file_store(dir.path);
  CHECK(s->add("count", 0) == (kThreads + 1) * kAdds);
  CHECK(s->get("count", Deadline::after_ms(100)) == std::to_string((kThreads + 1) * kAdds));
  s->set("text", "abc");
  CHECK_THROWS_AS(s->add("text", 1), UsageError);
}
