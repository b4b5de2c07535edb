// Small text helpers shared by the parsers of names and values (CHORUS_*
// variables, dtype and op names).
#pragma once

#include <string>
#include <string_view>

namespace chorus {

// `s` with ASCII letters lowered; other bytes unchanged (locale-free).
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace chorus
