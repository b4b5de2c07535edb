#include "tools/launcher/environment.hpp"

#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "base/core/config.hpp"
#include "base/core/error.hpp"

namespace chorus::launcher {

void Env::set(const std::string& name, const std::string& value) {
  for (auto& e : vars_)
    if (e.compare(0, name.size() + 1, name + "=") == 0) {
      e = name + "=" + value;
      return;
    }
  vars_.push_back(name + "=" + value);
}

void Env::unset(const std::string& name) {
  std::erase_if(
      vars_, [&](const std::string& e) { return e.compare(0, name.size() + 1, name + "=") == 0; });
}

std::optional<std::string> Env::get(const std::string& name) const {
  for (auto& e : vars_)
    if (e.compare(0, name.size() + 1, name + "=") == 0) return e.substr(name.size() + 1);
  return std::nullopt;
}

std::optional<std::string> resolve_program(const std::string& name, const Env& env) {
  if (name.find('/') != std::string::npos) return name;
  std::string path = env.get("PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t end = path.find(':', pos);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(pos, end - pos);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    struct stat st;
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0)
      return candidate;
    pos = end + 1;
  }
  return std::nullopt;
}

std::vector<std::string> resolved_exports(const std::vector<std::string>& exports,
                                          std::vector<std::string>& unset) {
  std::vector<std::string> resolved;
  auto env_lookup = process_env();
  for (const auto& x : exports) {
    if (x.find('=') != std::string::npos) {
      resolved.push_back(x);
    } else if (auto v = env_lookup(x)) {
      resolved.push_back(x + "=" + *v);
    } else {
      unset.push_back(x);
    }
  }
  return resolved;
}

std::string random_token() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    ssize_t n = getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw IoError(CHORUS_ERR_IO, errno_message("getrandom", errno));
    got += static_cast<size_t>(n);
  }
  std::string hex;
  for (unsigned char b : bytes) hex += fmt::format("{:02x}", b);
  return hex;
}

}  // namespace chorus::launcher
