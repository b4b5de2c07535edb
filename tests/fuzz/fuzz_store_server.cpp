// Fuzz target: the TCP store server's connection parsing
// (base/bootstrap/tcp_store_server.cpp, driven without sockets).
// Feeds: the input as the byte stream one client sends to the server. The
// server's own code is compiled into this target (#include of the .cpp), so
// its real TcpStoreServer::Impl::process / handle / expire run on a
// connection whose input buffer is filled here; replies pile up in the
// connection's output buffer (nothing is sent). The job token is kToken.
// The stream is served twice: all at once, and in chunks of 1 to 64 bytes
// (the last input byte picks the size), as recv() may cut it.
// Checks: both deliveries give the same replies, store contents and verdict
// (the parsing does not depend on how the stream is cut); the verdict
// (dropped, closing after a wrong token, or open) is the one an independent
// walk over the frames expects (decode_header, request ops only, AUTH first,
// no second AUTH, WAIT bodies that are key lists); every reply is a
// well-formed reply frame (decode_header, reply op, no key); on an open
// connection, once every wait has expired, each complete request got exactly
// one reply (as a multiset of request ids), on a dropped one no reply answers
// a request that was not processed; TIMEOUT replies carry a key list of keys
// that are indeed missing from the store.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/bootstrap/tcp_store_server.cpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace chorus {
namespace {

constexpr std::string_view kToken = "chorus-fuzz-token";

struct Outcome {
  std::string out;
  bool dead = false;
  bool closing = false;
  std::unordered_map<std::string, std::string> data;
};

Outcome serve(std::string_view stream, std::size_t chunk) {
  TcpStoreServer::Impl m;
  m.token = std::string(kToken);
  auto owned = std::make_unique<Conn>();
  Conn& c = *owned;
  c.id = 1;
  c.peer = "fuzz";
  m.conns.emplace(c.id, std::move(owned));
  // As on_readable: append what recv() returned, then process.
  for (std::size_t off = 0; off < stream.size() && !c.dead && !c.closing; off += chunk) {
    c.in.append(stream.substr(off, chunk));
    m.process(c);
    FUZZ_CHECK(c.in_off <= c.in.size());
  }
  m.expire(Clock::time_point::max());  // every wait ends: each waiter gets its TIMEOUT
  FUZZ_CHECK(m.waiters.empty());
  return {c.out, c.dead, c.closing, m.data};
}

struct Expected {
  std::vector<uint32_t> ids;  // requests processed (each owed exactly one reply)
  bool dead = false;
  bool closing = false;
};

Expected walk(std::string_view s) {
  Expected e;
  bool authed = false;
  std::size_t pos = 0;
  while (s.size() - pos >= kHeaderSize) {
    Header h;
    if (decode_header(s.data() + pos, &h) || !is_request(h.op) ||
        (!authed && (h.op != Op::kAuth || h.key_len != 0 || h.value_len > kMaxTokenBytes))) {
      e.dead = true;
      break;
    }
    if (s.size() - pos < h.frame_size()) break;  // waits for the rest
    const std::string_view value = s.substr(pos + kHeaderSize + h.key_len, h.value_len);
    std::vector<std::string> keys;
    if ((h.op == Op::kAuth && authed) || (h.op == Op::kWait && !decode_key_list(value, &keys))) {
      e.dead = true;
      break;
    }
    e.ids.push_back(h.id);
    if (h.op == Op::kAuth && value != kToken) {
      e.closing = true;  // ERROR reply, then the server reads no more
      break;
    }
    authed = true;
    pos += h.frame_size();
  }
  return e;
}

}  // namespace
}  // namespace chorus

using namespace chorus;

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  logger("bootstrap").set_level(spdlog::level::off);  // drops are expected here
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view stream(reinterpret_cast<const char*>(data), size);
  const Outcome whole = serve(stream, std::max<std::size_t>(size, 1));
  const std::size_t chunk = size ? 1 + data[size - 1] % 64 : 1;
  const Outcome cut = serve(stream, chunk);
  FUZZ_CHECK(whole.out == cut.out && whole.dead == cut.dead && whole.closing == cut.closing &&
             whole.data == cut.data);

  const Expected expected = walk(stream);
  FUZZ_CHECK(whole.dead == expected.dead && whole.closing == expected.closing);

  std::vector<uint32_t> replied;
  std::size_t pos = 0;
  while (pos < whole.out.size()) {
    FUZZ_CHECK(whole.out.size() - pos >= kHeaderSize);
    Header h;
    FUZZ_CHECK(!decode_header(whole.out.data() + pos, &h));
    FUZZ_CHECK(is_reply(h.op) && h.key_len == 0);
    FUZZ_CHECK(whole.out.size() - pos >= h.frame_size());
    const std::string_view value(whole.out.data() + pos + kHeaderSize, h.value_len);
    if (h.op == Op::kReplyTimeout) {
      std::vector<std::string> missing;
      FUZZ_CHECK(decode_key_list(value, &missing) && !missing.empty());
      for (const auto& k : missing) FUZZ_CHECK(whole.data.count(k) == 0);
    }
    if (h.op == Op::kReplyError) FUZZ_CHECK(!value.empty());
    replied.push_back(h.id);
    pos += h.frame_size();
  }

  std::vector<uint32_t> owed = expected.ids;
  std::sort(owed.begin(), owed.end());
  std::sort(replied.begin(), replied.end());
  if (whole.dead)
    FUZZ_CHECK(std::includes(owed.begin(), owed.end(), replied.begin(), replied.end()));
  else
    FUZZ_CHECK(replied == owed);
  return 0;
}
