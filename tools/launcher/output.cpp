#include "tools/launcher/output.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>

namespace chorus::launcher {
namespace {

// A line longer than this is forwarded in pieces rather than buffered without bound.
constexpr size_t kMaxLine = 64 * 1024;

}  // namespace

void write_fully(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    data.remove_prefix(static_cast<size_t>(n));
  }
}

OutputForwarder::OutputForwarder(int ranks, bool tag)
    : OutputForwarder(ranks, [tag](int rank, int stream, std::string_view line) {
        // One write per line: lines from different ranks never interleave.
        write_fully(stream, tag ? fmt::format("[1,{}]<{}>:{}\n", rank,
                                              stream == 1 ? "stdout" : "stderr", line)
                                : fmt::format("{}\n", line));
      }) {}

OutputForwarder::OutputForwarder(int ranks, Sink sink)
    : emit_(std::move(sink)), pending_(static_cast<size_t>(ranks) * 2) {}

void OutputForwarder::feed(int rank, int stream, std::string_view data) {
  std::string& buf = pending_[static_cast<size_t>(rank) * 2 + (stream - 1)];
  buf.append(data);
  size_t start = 0;
  for (;;) {
    size_t nl = buf.find('\n', start);
    if (nl == std::string::npos) break;
    emit_(rank, stream, std::string_view(buf).substr(start, nl - start));
    start = nl + 1;
  }
  buf.erase(0, start);
  while (buf.size() >= kMaxLine) {
    emit_(rank, stream, std::string_view(buf).substr(0, kMaxLine));
    buf.erase(0, kMaxLine);
  }
}

void OutputForwarder::finish(int rank, int stream) {
  std::string& buf = pending_[static_cast<size_t>(rank) * 2 + (stream - 1)];
  if (!buf.empty()) emit_(rank, stream, buf);
  buf.clear();
}

}  // namespace chorus::launcher
