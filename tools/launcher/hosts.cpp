#include "tools/launcher/hosts.hpp"

#include <fmt/format.h>

#include <cctype>
#include <charconv>

#include "base/core/error.hpp"

namespace chorus::launcher {
namespace {

std::string_view trim(std::string_view s) {
  const char* space = " \t\r";
  size_t first = s.find_first_not_of(space);
  if (first == std::string_view::npos) return {};
  return s.substr(first, s.find_last_not_of(space) - first + 1);
}

// Every field between separators (any of them), empty ones included.
std::vector<std::string_view> split(std::string_view text, std::string_view separators) {
  std::vector<std::string_view> fields;
  for (size_t pos = 0;;) {
    size_t end = text.find_first_of(separators, pos);
    fields.push_back(text.substr(pos, end == std::string_view::npos ? end : end - pos));
    if (end == std::string_view::npos) return fields;
    pos = end + 1;
  }
}

// Host names go into a launch agent's shell command ({host}), so only the
// characters of host names and addresses are accepted.
void check_host_name(std::string_view name, const std::string& where) {
  if (name.empty()) throw UsageError(fmt::format("{}: empty host name", where));
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.' && c != '_')
      throw UsageError(fmt::format("{}: host name '{}' has the character '{}'", where, name, c));
}

int parse_slots(std::string_view text, const std::string& where) {
  int value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1)
    throw UsageError(fmt::format("{}: slots '{}' is not a positive number", where, text));
  return value;
}

void add_host(std::vector<HostSlots>& hosts, std::string_view name, int slots) {
  for (auto& h : hosts)
    if (h.name == name) {
      h.slots += slots;
      return;
    }
  hosts.push_back({std::string(name), slots});
}

}  // namespace

std::vector<HostSlots> parse_host_list(std::string_view text) {
  std::vector<HostSlots> hosts;
  for (std::string_view entry : split(text, ",")) {
    entry = trim(entry);
    const std::string where = fmt::format("-H '{}'", entry);
    size_t colon = entry.find(':');
    std::string_view name = entry.substr(0, colon);
    check_host_name(name, where);
    add_host(hosts, name,
             colon == std::string_view::npos ? 1 : parse_slots(entry.substr(colon + 1), where));
  }
  return hosts;
}

std::vector<HostSlots> parse_hostfile(std::string_view text, const std::string& origin) {
  std::vector<HostSlots> hosts;
  int line_number = 0;
  for (std::string_view line : split(text, "\n")) {
    ++line_number;
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::string where = fmt::format("{}:{}", origin, line_number);
    std::string_view name;
    int slots = 1;
    for (std::string_view word : split(line, " \t")) {
      if (word.empty()) continue;
      if (name.empty()) {
        name = word;
      } else if (word.starts_with("slots=")) {
        slots = parse_slots(word.substr(6), where);
      } else if (word.starts_with("max_slots=")) {
        parse_slots(word.substr(10), where);
      } else {
        throw UsageError(fmt::format("{}: unknown '{}' (expected slots=N)", where, word));
      }
    }
    check_host_name(name, where);
    add_host(hosts, name, slots);
  }
  if (hosts.empty()) throw UsageError(fmt::format("{}: no hosts", origin));
  return hosts;
}

MapBy parse_map_by(const std::string& text) {
  if (text == "slot") return MapBy::kSlot;
  if (text == "node") return MapBy::kNode;
  throw UsageError(fmt::format("--map-by '{}': expected slot or node", text));
}

std::vector<RankPlacement> map_ranks(const std::vector<HostSlots>& hosts, int np, MapBy by) {
  int total = 0;
  for (const auto& h : hosts) total += h.slots;
  if (np == 0) np = total;
  if (np > total)
    throw UsageError(
        fmt::format("{} ranks do not fit the {} slots of the {} host(s)", np, total, hosts.size()));
  std::vector<RankPlacement> placement;
  std::vector<int> used(hosts.size(), 0);
  size_t host = 0;
  for (int r = 0; r < np; ++r) {
    // By slot: stay on a host until it is full. By node: move on after each
    // rank. Either way skip full hosts; np <= total guarantees a free one.
    if (by == MapBy::kNode && r > 0) host = (host + 1) % hosts.size();
    while (used[host] == hosts[host].slots) host = (host + 1) % hosts.size();
    placement.push_back({static_cast<int>(host), used[host]++, 0});
  }
  for (auto& p : placement) p.local_size = used[static_cast<size_t>(p.host)];
  return placement;
}

}  // namespace chorus::launcher
