#include "base/bootstrap/store_wire.hpp"

#include <endian.h>
#include <fmt/format.h>

#include <cstring>

namespace chorus::bootstrap::wire {
namespace {

template <typename T>
void put(std::string& out, T v) {
  if constexpr (sizeof(T) == 2) v = static_cast<T>(htole16(static_cast<uint16_t>(v)));
  if constexpr (sizeof(T) == 4) v = static_cast<T>(htole32(static_cast<uint32_t>(v)));
  if constexpr (sizeof(T) == 8) v = static_cast<T>(htole64(static_cast<uint64_t>(v)));
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <typename T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  if constexpr (sizeof(T) == 2) v = static_cast<T>(le16toh(static_cast<uint16_t>(v)));
  if constexpr (sizeof(T) == 4) v = static_cast<T>(le32toh(static_cast<uint32_t>(v)));
  if constexpr (sizeof(T) == 8) v = static_cast<T>(le64toh(static_cast<uint64_t>(v)));
  return v;
}

}  // namespace

bool is_request(Op op) {
  return op >= Op::kAuth && op <= Op::kAdd;
}
bool is_reply(Op op) {
  return op >= Op::kReplyOk && op <= Op::kReplyError;
}

std::optional<std::string> decode_header(const char* p, Header* out) {
  uint32_t magic = get<uint32_t>(p);
  if (magic != kMagic) return fmt::format("bad magic 0x{:08x}", magic);
  uint16_t version = get<uint16_t>(p + 4);
  if (version != kVersion) return fmt::format("unsupported version {}", version);
  auto op = static_cast<Op>(get<uint16_t>(p + 6));
  if (!is_request(op) && !is_reply(op))
    return fmt::format("unknown op {}", static_cast<unsigned>(op));
  Header h;
  h.op = op;
  h.id = get<uint32_t>(p + 8);
  h.key_len = get<uint32_t>(p + 12);
  h.value_len = get<uint32_t>(p + 16);
  h.arg = get<int64_t>(p + 20);
  if (get<uint32_t>(p + 28) != 0) return "reserved field is not zero";
  if (h.key_len > kMaxKeyBytes)
    return fmt::format("key length {} exceeds {}", h.key_len, kMaxKeyBytes);
  if (h.value_len > kMaxValueBytes)
    return fmt::format("value length {} exceeds {}", h.value_len, kMaxValueBytes);
  *out = h;
  return std::nullopt;
}

std::string encode_frame(Op op, uint32_t id, std::string_view key, std::string_view value,
                         int64_t arg) {
  std::string out;
  out.reserve(kHeaderSize + key.size() + value.size());
  put(out, kMagic);
  put(out, kVersion);
  put(out, static_cast<uint16_t>(op));
  put(out, id);
  put(out, static_cast<uint32_t>(key.size()));
  put(out, static_cast<uint32_t>(value.size()));
  put(out, arg);
  put(out, uint32_t{0});
  out.append(key);
  out.append(value);
  return out;
}

std::string encode_key_list(const std::vector<std::string>& keys) {
  std::string out;
  put(out, static_cast<uint32_t>(keys.size()));
  for (const auto& k : keys) {
    put(out, static_cast<uint32_t>(k.size()));
    out.append(k);
  }
  return out;
}

bool decode_key_list(std::string_view bytes, std::vector<std::string>* keys) {
  keys->clear();
  if (bytes.size() < 4) return false;
  uint32_t count = get<uint32_t>(bytes.data());
  size_t pos = 4;
  // Each key needs at least its 4-byte length, which bounds count by the size.
  if (count > (bytes.size() - pos) / 4) return false;
  keys->reserve(count);
  for (uint32_t i = 0; i < count; ++i) {
    if (bytes.size() - pos < 4) return false;
    uint32_t len = get<uint32_t>(bytes.data() + pos);
    pos += 4;
    if (len > kMaxKeyBytes || len > bytes.size() - pos) return false;
    keys->emplace_back(bytes.substr(pos, len));
    pos += len;
  }
  return pos == bytes.size();
}

std::string describe_keys(const std::vector<std::string>& keys) {
  std::string out;
  size_t shown = 0;
  for (const auto& k : keys) {
    if (shown == 8) {
      out += fmt::format(" and {} more", keys.size() - shown);
      break;
    }
    if (shown > 0) out += ", ";
    out += fmt::format("'{}'", k.size() > 200 ? k.substr(0, 200) + "..." : k);
    ++shown;
  }
  return out;
}

}  // namespace chorus::bootstrap::wire
