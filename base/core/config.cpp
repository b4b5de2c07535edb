#include "base/core/config.hpp"

#include <fmt/format.h>

#include <sched.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "base/core/error.hpp"
#include "base/core/text.hpp"

namespace chorus {
namespace {

double parse_double(std::string_view text) {
  double value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size())
    throw UsageError(fmt::format("'{}' is not a number", text));
  return value;
}

}  // namespace

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

EnvLookup map_env(std::map<std::string, std::string> values) {
  return [values = std::move(values)](std::string_view name) -> std::optional<std::string> {
    auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

Config load_config(const EnvLookup& env) {
  Config config;
  for (const auto& v : config_registry()) {
    auto value = env(v.name);
    if (!value || value->empty()) continue;
    try {
      v.parse(config, *value);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}='{}': {}", v.name, *value, e.what()));
    }
  }
  return config;
}

int online_cores() {
  cpu_set_t set;
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
}

int resolve_spin_us(int configured) {
  return configured >= 0 ? configured : 50;
}

Spin wait_spin(const Config& config, bool oversubscribed) {
  const bool yield_each = config.wait_yield == Config::WaitYield::always ||
                          (config.wait_yield == Config::WaitYield::automatic && oversubscribed);
  return Spin{resolve_spin_us(config.spin_us), yield_each, config.wait_slice_us};
}

const Config& global_config() {
  static const Config config = load_config(process_env());
  return config;
}

int64_t parse_int(std::string_view text) {
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
    throw UsageError(fmt::format("'{}' is not an integer", text));
  return value;
}

bool parse_bool(std::string_view text) {
  std::string l = ascii_lower(text);
  if (l == "1" || l == "true" || l == "yes" || l == "on") return true;
  if (l == "0" || l == "false" || l == "no" || l == "off") return false;
  throw UsageError(fmt::format("'{}' is not a boolean (1/0, true/false, yes/no, on/off)", text));
}

std::size_t parse_bytes(std::string_view text) {
  if (text.empty()) throw UsageError("empty size");
  std::size_t multiplier = 1;
  std::string_view digits = text;
  switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K':
      multiplier = 1ull << 10;
      break;
    case 'M':
      multiplier = 1ull << 20;
      break;
    case 'G':
      multiplier = 1ull << 30;
      break;
    case 'T':
      multiplier = 1ull << 40;
      break;
    default:
      break;
  }
  if (multiplier != 1) digits.remove_suffix(1);
  if (!digits.empty() && (digits.back() == 'i' || digits.back() == 'I'))
    throw UsageError(fmt::format("'{}': write sizes as 64K, 1M (powers of two)", text));
  int64_t n = parse_int(digits);
  if (n < 0) throw UsageError(fmt::format("'{}' is negative", text));
  if (static_cast<uint64_t>(n) > UINT64_MAX / multiplier)
    throw UsageError(fmt::format("'{}' is too large", text));
  return static_cast<std::size_t>(n) * multiplier;
}

double parse_seconds(std::string_view text) {
  std::string l = ascii_lower(text);
  std::string_view t = l;
  double scale = 1;
  if (t.ends_with("ms")) {
    scale = 1e-3;
    t.remove_suffix(2);
  } else if (t.ends_with("us")) {
    scale = 1e-6;
    t.remove_suffix(2);
  } else if (t.ends_with("s")) {
    t.remove_suffix(1);
  } else if (t.ends_with("m")) {
    scale = 60;
    t.remove_suffix(1);
  } else if (t.ends_with("h")) {
    scale = 3600;
    t.remove_suffix(1);
  }
  double v = parse_double(t);
  if (v < 0) throw UsageError(fmt::format("'{}' is negative", text));
  // from_chars accepts "nan" and "inf"; neither is a duration (no wait is unbounded).
  if (!std::isfinite(v * scale))
    throw UsageError(fmt::format("'{}' is not a finite duration", text));
  return v * scale;
}

std::string format_bytes(std::size_t bytes) {
  static const char* suffix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (i < 4 && bytes != 0 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++i;
  }
  return fmt::format("{}{}", bytes, suffix[i]);
}

}  // namespace chorus
