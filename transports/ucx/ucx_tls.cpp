#include "transports/ucx/ucx_tls.hpp"

#include <array>
#include <bitset>
#include <vector>

namespace chorus::ucx {
namespace {

constexpr std::array<std::string_view, 5> kShm = {"posix", "sysv", "xpmem", "knem", "cma"};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view list) {
  std::vector<std::string_view> out;
  while (!list.empty()) {
    auto comma = list.find(',');
    auto item = trim(list.substr(0, comma));
    if (!item.empty()) out.push_back(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

// The shared-memory transports a list entry names (bit i: kShm[i]).
std::bitset<5> shm_named(std::string_view item) {
  bool explicit_name = !item.empty() && item.front() == '\\';
  if (explicit_name) item.remove_prefix(1);
  std::bitset<5> bits;
  if (!explicit_name && (item == "sm" || item == "shm")) return bits.set();
  if (!explicit_name && item == "mm") return bits.set(0).set(1).set(2);
  for (std::size_t i = 0; i < kShm.size(); ++i)
    if (item == kShm[i]) bits.set(i);
  return bits;
}

bool is_all(const std::vector<std::string_view>& items) {
  for (auto item : items)
    if (item == "all") return true;
  return false;
}

}  // namespace

bool tls_may_use_shm(std::string_view tls) {
  tls = trim(tls);
  bool negate = !tls.empty() && tls.front() == '^';
  auto items = split(negate ? tls.substr(1) : tls);
  if (items.empty() || is_all(items)) return !negate || items.empty();
  std::bitset<5> named;
  for (auto item : items) named |= shm_named(item);
  return negate ? !named.all() : named.any();
}

std::optional<std::string> tls_without_shm(std::string_view tls) {
  tls = trim(tls);
  if (!tls_may_use_shm(tls)) return std::string(tls);
  bool negate = !tls.empty() && tls.front() == '^';
  auto items = split(negate ? tls.substr(1) : tls);
  if (negate) return items.empty() ? std::string("^sm") : std::string(tls) + ",sm";
  if (items.empty() || is_all(items)) return std::string("^sm");
  std::string out;
  for (auto item : items) {
    if (shm_named(item).any()) continue;
    if (!out.empty()) out += ',';
    out += item;
  }
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace chorus::ucx
