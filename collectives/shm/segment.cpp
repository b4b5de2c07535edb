#include "collectives/shm/segment.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/bootstrap/net.hpp"
#include "base/core/error.hpp"

namespace chorus::shm {
namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

std::byte* map_fd(int fd, std::size_t bytes, const std::string& name) {
  // MAP_POPULATE: this process's page-table entries are made now, at set-up,
  // not on the first collective that reaches a page.
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED)
    throw IoError(CHORUS_ERR_IO,
                  fmt::format("mmap of shared-memory segment {} ({} bytes) failed: {}", name, bytes,
                              errno_text(errno)));
  return static_cast<std::byte*>(p);
}

}  // namespace

std::string segment_name_prefix(std::string_view job_token) {
  std::string clean;
  for (char c : job_token)
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')
      clean += c;
  if (clean.size() > 64) clean.resize(64);
  if (clean.empty()) clean = "notoken";
  return fmt::format("chorus-{}-", clean);
}

std::vector<std::string> remove_segments(const std::string& prefix) {
  std::vector<std::string> removed;
  DIR* dir = opendir("/dev/shm");
  if (!dir) return removed;
  while (dirent* entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name.compare(0, prefix.size(), prefix) == 0 && shm_unlink(("/" + name).c_str()) == 0)
      removed.push_back(name);
  }
  closedir(dir);
  return removed;
}

Segment Segment::create(const std::string& name, std::size_t bytes) {
  bootstrap::UniqueFd fd(shm_open(("/" + name).c_str(), O_CREAT | O_EXCL | O_RDWR, 0600));
  if (!fd)
    throw IoError(CHORUS_ERR_IO, fmt::format("shm_open(/{}) to create a segment failed: {}", name,
                                             errno_text(errno)));
  Segment segment(name, nullptr, 0, true);  // unlinks on any failure below
  // posix_fallocate reserves the pages now: a short /dev/shm fails here with
  // an error rather than later with SIGBUS inside a collective.
  if (int err = posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes)); err != 0)
    throw IoError(err == ENOSPC ? CHORUS_ERR_NO_MEMORY : CHORUS_ERR_IO,
                  fmt::format("reserving {} bytes of shared memory for {} failed: {} (is /dev/shm "
                              "large enough?)",
                              bytes, name, errno_text(err)));
  segment.data_ = map_fd(fd.get(), bytes, name);
  segment.size_ = bytes;
  return segment;
}

Segment Segment::open(const std::string& name, std::size_t bytes) {
  bootstrap::UniqueFd fd(shm_open(("/" + name).c_str(), O_RDWR, 0600));
  if (!fd)
    throw IoError(CHORUS_ERR_IO, fmt::format("shm_open(/{}) to join a segment failed: {}", name,
                                             errno_text(errno)));
  struct stat st {};
  if (fstat(fd.get(), &st) != 0 || static_cast<std::size_t>(st.st_size) != bytes)
    throw IoError(CHORUS_ERR_IO, fmt::format("shared-memory segment {} has {} bytes, expected {}",
                                             name, static_cast<long long>(st.st_size), bytes));
  return Segment(name, map_fd(fd.get(), bytes, name), bytes, false);
}

Segment::Segment(Segment&& other) noexcept
    : name_(std::move(other.name_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      owner_(std::exchange(other.owner_, false)) {}

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    owner_ = std::exchange(other.owner_, false);
  }
  return *this;
}

Segment::~Segment() {
  release();
}

void Segment::unlink() {
  if (!owner_) return;
  owner_ = false;
  shm_unlink(("/" + name_).c_str());
}

void Segment::release() {
  unlink();
  if (data_) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace chorus::shm
