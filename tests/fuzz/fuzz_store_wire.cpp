// Fuzz target: the TCP store's frame header and key lists
// (base/bootstrap/store_wire.hpp).
// Feeds: the input's first 32 bytes to decode_header (a frame as read from a
// store connection: header, key_len bytes of key, value_len bytes of value),
// and the whole input to decode_key_list (a WAIT request's or TIMEOUT reply's
// value).
// Checks: decode_header accepts exactly what an independent little-endian
// reference accepts (magic, version, a request or reply op, reserved 0, keys
// up to kMaxKeyBytes, values up to kMaxValueBytes), returns those fields,
// leaves its output alone on refusal, and encode_frame rebuilds an accepted
// frame byte for byte; decode_key_list accepts exactly the well-formed lists
// (every key at most kMaxKeyBytes, no bytes left over), and encode_key_list of
// what it decoded gives back the same bytes; keys cut from the input survive
// encode_key_list -> decode_key_list unchanged.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "base/bootstrap/store_wire.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using namespace chorus::bootstrap::wire;

namespace {

template <typename T>
T le(const uint8_t* p) {  // little-endian, whatever the host
  uint64_t v = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i) v |= uint64_t{p[i]} << (8 * i);
  return static_cast<T>(v);
}

void check_header(const uint8_t* data, std::size_t size) {
  if (size < kHeaderSize) return;
  const Header sentinel{Op::kReplyError, 0xdeadbeef, 1, 2, -3};
  Header h = sentinel;
  const auto error = decode_header(reinterpret_cast<const char*>(data), &h);

  const uint16_t op = le<uint16_t>(data + 6);
  const bool known_op = (op >= 1 && op <= 5) || (op >= 100 && op <= 102);
  const uint32_t key_len = le<uint32_t>(data + 12);
  const uint32_t value_len = le<uint32_t>(data + 16);
  const bool expected = le<uint32_t>(data) == 0x54534843 && le<uint16_t>(data + 4) == 1 &&
                        known_op && le<uint32_t>(data + 28) == 0 && key_len <= (64u << 10) &&
                        value_len <= (64u << 20);
  FUZZ_CHECK(error.has_value() != expected);
  if (error) {
    FUZZ_CHECK(!error->empty());
    FUZZ_CHECK(h.op == sentinel.op && h.id == sentinel.id && h.key_len == sentinel.key_len &&
               h.value_len == sentinel.value_len && h.arg == sentinel.arg);
    return;
  }
  FUZZ_CHECK(is_request(h.op) != is_reply(h.op));
  FUZZ_CHECK(static_cast<uint16_t>(h.op) == op && h.id == le<uint32_t>(data + 8) &&
             h.key_len == key_len && h.value_len == value_len && h.arg == le<int64_t>(data + 20));
  FUZZ_CHECK(h.key_len <= kMaxKeyBytes && h.value_len <= kMaxValueBytes);
  FUZZ_CHECK(h.frame_size() == kHeaderSize + std::size_t{key_len} + value_len);
  FUZZ_CHECK(h.frame_size() <= kHeaderSize + kMaxKeyBytes + kMaxValueBytes);
  if (h.frame_size() <= size) {
    const char* body = reinterpret_cast<const char*>(data) + kHeaderSize;
    const std::string frame =
        encode_frame(h.op, h.id, {body, h.key_len}, {body + h.key_len, h.value_len}, h.arg);
    FUZZ_CHECK(frame.size() == h.frame_size());
    FUZZ_CHECK(std::memcmp(frame.data(), data, frame.size()) == 0);
  }
}

// Reference parser of a key list.
bool reference_key_list(std::string_view bytes, std::vector<std::string>* keys) {
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  keys->clear();
  if (bytes.size() < 4) return false;
  uint64_t count = le<uint32_t>(p);
  std::size_t pos = 4;
  for (uint64_t i = 0; i < count; ++i) {
    if (bytes.size() - pos < 4) return false;
    uint32_t len = le<uint32_t>(p + pos);
    pos += 4;
    if (len > kMaxKeyBytes || len > bytes.size() - pos) return false;
    keys->emplace_back(bytes.substr(pos, len));
    pos += len;
  }
  return pos == bytes.size();
}

void check_key_list(std::string_view bytes) {
  std::vector<std::string> keys{"stale"};
  const bool ok = decode_key_list(bytes, &keys);
  std::vector<std::string> expected;
  FUZZ_CHECK(ok == reference_key_list(bytes, &expected));
  if (ok) {
    FUZZ_CHECK(keys == expected);
    for (const auto& k : keys) FUZZ_CHECK(k.size() <= kMaxKeyBytes);
    FUZZ_CHECK(encode_key_list(keys) == bytes);
  }

  // The encoder's side: keys cut from the input at '\n' (each at most
  // kMaxKeyBytes, as the store's keys) come back unchanged.
  std::vector<std::string> mine;
  for (std::size_t start = 0; start <= bytes.size();) {
    std::size_t end = bytes.find('\n', start);
    if (end == std::string_view::npos) end = bytes.size();
    mine.emplace_back(bytes.substr(start, std::min<std::size_t>(end - start, kMaxKeyBytes)));
    start = end + 1;
  }
  std::vector<std::string> back;
  FUZZ_CHECK(decode_key_list(encode_key_list(mine), &back));
  FUZZ_CHECK(back == mine);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  check_header(data, size);
  check_key_list({reinterpret_cast<const char*>(data), size});
  return 0;
}
