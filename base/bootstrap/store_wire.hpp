// Wire format of the TCP store. Every frame is a fixed 32-byte little-endian
// header followed by key_len bytes of key and value_len bytes of value:
//
//   u32 magic 'CHST' | u16 version | u16 op | u32 request id | u32 key_len |
//   u32 value_len | i64 arg | u32 reserved (0)
//
// Requests: AUTH (value = job token; must be the first frame), SET, GET
// (arg = server-side wait in ms), WAIT (value = key list, arg = wait in ms),
// ADD (arg = delta). Replies echo the request id: OK (GET: value, ADD: arg =
// new value), TIMEOUT (value = key list of the keys still missing) or ERROR
// (value = message). Requests are answered in any order, so one connection can
// carry requests of several threads at once.
//
// Input from the network is untrusted: decode_header validates magic, version,
// op and lengths (keys up to 64 KiB, values up to 64 MiB) before anything is
// allocated for the body.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::bootstrap::wire {

constexpr uint32_t kMagic = 0x54534843;  // "CHST" when read as bytes
constexpr uint16_t kVersion = 1;
constexpr size_t kHeaderSize = 32;
constexpr uint32_t kMaxKeyBytes = 64u << 10;
constexpr uint32_t kMaxValueBytes = 64u << 20;

enum class Op : uint16_t {
  kAuth = 1,
  kSet = 2,
  kGet = 3,
  kWait = 4,
  kAdd = 5,
  kReplyOk = 100,
  kReplyTimeout = 101,
  kReplyError = 102,
};

bool is_request(Op op);
bool is_reply(Op op);

struct Header {
  Op op = Op::kAuth;
  uint32_t id = 0;
  uint32_t key_len = 0;
  uint32_t value_len = 0;
  int64_t arg = 0;
  size_t frame_size() const { return kHeaderSize + key_len + value_len; }
};

// Decodes and validates a header from kHeaderSize bytes. Returns the reason it
// is invalid, or nullopt when it is fine.
std::optional<std::string> decode_header(const char* bytes, Header* out);

// A whole frame; key_len and value_len are taken from key and value.
std::string encode_frame(Op op, uint32_t id, std::string_view key, std::string_view value,
                         int64_t arg = 0);

// Key lists (WAIT requests, TIMEOUT replies): u32 count, then u32 length + bytes each.
std::string encode_key_list(const std::vector<std::string>& keys);
// Returns false when the bytes are not a well-formed key list.
bool decode_key_list(std::string_view bytes, std::vector<std::string>* keys);

// "'a', 'b'" for error messages; long lists are shortened.
std::string describe_keys(const std::vector<std::string>& keys);

}  // namespace chorus::bootstrap::wire
