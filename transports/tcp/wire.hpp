// Wire format of the TCP transport. Everything read from a socket is untrusted
// and validated here before use.
//
// Connection set-up: the connecting rank sends a Hello (magic, version, job
// token, its rank, the rank it wants, world size); the accepting rank checks
// every field and answers with a HelloAck, or logs and closes.
// A probe (purpose probe, after set-up) asks a peer whose stream ended without
// a goodbye whether it is alive: a live peer answers with a HelloAck and an
// ABORT frame carrying what it vouches for (encode_notice), and the prober
// sends its own the same way (tcp_probe.cpp).
// An ask (purpose ask, after set-up) reaches a live peer whose stream was
// lost: the asker sends an ASK frame after the Hello, and the peer answers
// with a HelloAck and an ANSWER frame (tcp_recover.cpp).
// After that, a connection carries frames: a fixed 56-byte FrameHeader, then
// `length` payload bytes (user data for DATA, a reason for ABORT, nothing for
// GOODBYE or ASK, a kept result for ANSWER).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "base/core/contract.hpp"

namespace chorus::tcp {

inline constexpr uint32_t kFrameMagic = 0x53524843;  // "CHRS"
inline constexpr uint32_t kHelloMagic = 0x48524843;  // "CHRH"
inline constexpr uint16_t kWireVersion = 1;
inline constexpr std::size_t kTokenBytes = 64;
inline constexpr uint64_t kMaxAbortReason = 4096;
// A single message may not exceed this (a corrupt length must not make a rank
// allocate or wait for terabytes).
inline constexpr uint64_t kMaxFrameLength = uint64_t(1) << 40;

// announce: the call a rank waits in (tag and signature, no payload), sent to
// the peers it waits on when a wait is long (Transport::announce).
// status: the answer to an announce: in the announce's tag space, the call the
// answering rank is in (the header's signature; seq 0: none) and, as the
// payload (StatusPayload), the last call it finished and the peer it waits on
// (CallBoard).
// ask: after this rank failed a call (on a peer failure, or its deadline),
// whether the peer finished it (tag and signature of the call, no payload,
// the asker's result code in `reserved`; collectives/verdict/recover.hpp);
// with flag kAskPartDone, after this rank's deadline passed in the call
// while it waited on the peer, whether the peer's part of it is done
// (collectives/context.hpp). answer: the reply, with the asked call's
// tag and signature; flag kAnswerFinished set when the peer finished it, and
// then its kept result as the payload (kMaxAnswerLength at most); flag
// kAnswerPartDone set when its part is done (no payload).
enum class FrameType : uint8_t {
  data = 1,
  goodbye = 2,
  abort = 3,
  announce = 4,
  status = 5,
  ask = 6,
  answer = 7
};
inline constexpr uint8_t kAnswerFinished = 1;
inline constexpr uint8_t kAnswerPartDone = 2;
inline constexpr uint8_t kAskPartDone = 1;
inline constexpr uint64_t kMaxAnswerLength = uint64_t(1) << 20;

struct StatusPayload {
  CallSignature finished;
  int32_t waiting_on;  // -1: not known
  uint32_t reserved;
};
static_assert(sizeof(StatusPayload) == 40);

struct FrameHeader {
  uint32_t magic;
  uint16_t version;
  uint8_t type;  // FrameType
  uint8_t flags;
  uint32_t tag;
  uint32_t reserved;
  uint64_t length;
  CallSignature sig;
};
static_assert(sizeof(FrameHeader) == 56);

enum class HelloPurpose : uint16_t { connect = 0, probe = 1, ask = 2 };

struct Hello {
  uint32_t magic;
  uint16_t version;
  uint16_t purpose;  // HelloPurpose; not validated here (set-up refuses all but connect)
  int32_t from_rank;
  int32_t to_rank;
  int32_t world_size;
  uint32_t reserved2;
  char token[kTokenBytes];  // NUL-padded
};
static_assert(sizeof(Hello) == 88);

struct HelloAck {
  uint32_t magic;
  int32_t accepted_rank;
};

FrameHeader make_frame(FrameType type, uint32_t tag, uint64_t length, const CallSignature& sig);
Hello make_hello(std::string_view token, int from, int to, int world_size,
                 HelloPurpose purpose = HelloPurpose::connect);

// Returns an error description, or nullopt when the header is acceptable.
// `bytes` is what was read; fewer than sizeof(FrameHeader) is "truncated".
std::optional<std::string> validate_frame(std::span<const std::byte> bytes);
// Checks a Hello addressed to `my_rank` in a job of `world_size` with `token`.
std::optional<std::string> validate_hello(std::span<const std::byte> bytes, std::string_view token,
                                          int my_rank, int world_size);

}  // namespace chorus::tcp
