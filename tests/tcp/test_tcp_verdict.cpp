// The verdict round (collectives/verdict/agree.hpp) over the TCP transport:
// rank 0 a real TcpTransport, rank 1 played by hand through real loopback
// sockets (its have, its death, its failure notice, its silence, a dropped
// connection, a late have, a corrupt stream).
#include <poll.h>
#include <sys/socket.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <future>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "base/bootstrap/tcp_store.hpp"
#include "base/core/error.hpp"
#include "collectives/verdict/agree.hpp"
#include "tests/common/transport_test.hpp"
#include "tests/tcp/tcp_world.hpp"
#include "transports/tcp/socket.hpp"
#include "transports/tcp/tcp_transport.hpp"
#include "transports/tcp/wire.hpp"

using namespace chorus;
using namespace chorus::tcp;
using namespace chorus::test;

namespace {

enum class Rank1 {
  has_then_dies,
  dies_without_have,
  fails_call,
  silent,
  sends_garbage,
  // Alive, but the network drops the connection (its stream ends) before its
  // have: it answers rank 0's probe with its part of #4 (the call) not done
  // (it finished #3), or done
  dropped_unfinished,
  dropped_finished,
  // Alive, its end of the connection lost: it probes rank 0, its part of #4 done
  probes_finished,
  // Alive, its have late: rank 0's deadline passes in the round and it asks
  // whether rank 1's part is done. Rank 1 says yes and its have follows, or
  // says no (sealed, it will send none).
  late_have,
  late_not_done,
};

// Checks made on the threads that play rank 1 (Catch's assertions belong to
// the test's thread): a failure is thrown, and rethrown by the future's get.
void expect(bool holds, const char* what) {
  if (!holds) throw std::runtime_error(std::string("rank 1's side: expected ") + what);
}

// Reads a notice frame (header and payload) off fd; returns the calls it spares.
Spared read_notice_frame(const Fd& fd) {
  FrameHeader h{};
  read_exact(fd.get(), writable_bytes_of(h), Deadline::after(std::chrono::seconds(10)));
  expect(!validate_frame(bytes_of(h)), "a valid frame header");
  expect(static_cast<FrameType>(h.type) == FrameType::abort,
         "static_cast<FrameType>(h.type) == FrameType::abort");
  std::string payload(h.length, '\0');
  read_exact(fd.get(), std::as_writable_bytes(std::span(payload)),
             Deadline::after(std::chrono::seconds(10)));
  std::string message;
  Spared spared;
  expect(decode_notice(payload, message, spared), "decode_notice(payload, message, spared)");
  return spared;
}

void write_notice_frame(const Fd& fd, const Spared& spared) {
  const std::string text = encode_notice("rank 1 is alive", spared, 4096);
  const auto h = make_frame(FrameType::abort, CHORUS_ERR_PEER_FAILURE, text.size(), {});
  write_all(fd.get(), bytes_of(h), Deadline::after(std::chrono::seconds(10)));
  write_all(fd.get(), std::as_bytes(std::span(text)), Deadline::after(std::chrono::seconds(10)));
}

// Rank 1's listener answering rank 0's probe as a live rank that finished
// `finished` (in tag's space); returns what rank 0 said it finished.
Spared answer_probe_as_rank1(const Fd& listener, uint32_t space, uint64_t finished) {
  pollfd pfd{listener.get(), POLLIN, 0};
  expect(::poll(&pfd, 1, 10000) == 1, "::poll(&pfd, 1, 10000) == 1");
  Fd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  expect(conn.valid(), "an accepted connection");
  Hello hello{};
  read_exact(conn.get(), writable_bytes_of(hello), Deadline::after(std::chrono::seconds(10)));
  expect(!validate_hello(bytes_of(hello), kToken, 1, 2), "a valid hello");
  expect(hello.purpose == static_cast<uint16_t>(HelloPurpose::probe),
         "hello.purpose == static_cast<uint16_t>(HelloPurpose::probe)");
  const HelloAck ack{kHelloMagic, 0};
  write_all(conn.get(), bytes_of(ack), Deadline::after(std::chrono::seconds(10)));
  Spared mine;
  mine.entries.push_back({space, finished});
  write_notice_frame(conn, mine);
  return read_notice_frame(conn);  // rank 0 vouches once it knows rank 1 is alive
}

// notice_back: whether rank 0 then sent rank 1 a failure notice.
chorus_result_t verdict_with(Rank1 what, std::string* message, bool* notice_back = nullptr) {
  uint16_t rank1_port = 0;
  Fd rank1_listener = listen_on("127.0.0.1", &rank1_port);
  const bool alive = what == Rank1::dropped_unfinished || what == Rank1::dropped_finished;
  WithFakeRank1 pair(
      "v/", {}, alive ? bootstrap::format_host_port("127.0.0.1", rank1_port) : closed_address());
  if (!alive) rank1_listener.reset();
  TcpTransport& rank0 = *pair.rank0;
  const uint32_t tag = (6u << Spared::kSpaceShift) | 1;
  const CallSignature sig = sig_of(4, 16);
  rank0.board().slot(tag).enter(sig);
  rank0.board().slot(tag).part_done(sig);  // as Communicator::execute marks it for the round
  Team team = Team::of(rank0, {0, 1}, tag, nullptr, "world");
  ScratchPool scratch;
  const bool late = what == Rank1::late_have || what == Rank1::late_not_done;
  const auto deadline =
      Deadline::after(std::chrono::milliseconds(what == Rank1::silent || late ? 300 : 10000));
  CollectiveContext ctx = CollectiveContext::over(team, scratch, sig, deadline, 0, Spin{});
  auto send_frame = [&](FrameType type, uint32_t frame_tag, const CallSignature& s,
                        std::span<const std::byte> payload) {
    const auto header = make_frame(type, frame_tag, payload.size(), s);
    write_all(pair.fd.get(), bytes_of(header), Deadline::after(std::chrono::seconds(10)));
    if (!payload.empty())
      write_all(pair.fd.get(), payload, Deadline::after(std::chrono::seconds(10)));
  };
  switch (what) {
    case Rank1::has_then_dies:
      send_frame(FrameType::data, tag, sig, {});
      pair.fd.reset();
      break;
    case Rank1::dies_without_have:
      pair.fd.reset();
      break;
    case Rank1::fails_call: {  // it finished #3 only
      Spared spared;
      spared.entries.push_back({tag >> Spared::kSpaceShift, 3});
      const std::string notice = encode_notice("rank 1: its part of #4 never came", spared, 4096);
      send_frame(FrameType::abort, static_cast<uint32_t>(CHORUS_ERR_PEER_FAILURE), CallSignature{},
                 std::as_bytes(std::span(notice)));
      break;
    }
    case Rank1::silent:
      break;
    case Rank1::sends_garbage: {  // alive, but its stream is broken
      auto h = make_frame(FrameType::data, tag, 0, sig);
      h.magic = 0x12345678;
      write_all(pair.fd.get(), bytes_of(h), Deadline::after(std::chrono::seconds(10)));
      break;
    }
    case Rank1::dropped_unfinished:
    case Rank1::dropped_finished:
      ::shutdown(pair.fd.get(), SHUT_RDWR);  // as a reset by the network
      break;
    case Rank1::probes_finished:
    case Rank1::late_have:
    case Rank1::late_not_done:
      break;
  }
  // Rank 1 reads what rank 0 sends (its have, its announcements) up to the
  // ask about #4's part, answers it, and then sends its have or nothing.
  std::future<bool> asked_part_done;
  if (late) {
    asked_part_done = std::async(std::launch::async, [&] {
      while (true) {
        FrameHeader h{};
        read_exact(pair.fd.get(), writable_bytes_of(h), Deadline::after(std::chrono::seconds(10)));
        std::vector<std::byte> payload(h.length);
        read_exact(pair.fd.get(), payload, Deadline::after(std::chrono::seconds(10)));
        if (static_cast<FrameType>(h.type) != FrameType::ask) continue;
        expect(h.sig == sig, "the ask is about #4");
        const bool part_done = (h.flags & kAskPartDone) != 0;
        auto answer = make_frame(FrameType::answer, h.tag, 0, h.sig);
        answer.flags = what == Rank1::late_have ? kAnswerPartDone : 0;
        write_all(pair.fd.get(), bytes_of(answer), Deadline::after(std::chrono::seconds(10)));
        if (what == Rank1::late_have) {
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
          send_frame(FrameType::data, tag, sig, {});
        }
        return part_done;
      }
    });
  }
  const uint32_t space = tag >> Spared::kSpaceShift;
  // Rank 1's side of a probe, while rank 0 waits in the round.
  std::future<Spared> rank0_finished;
  if (alive) {
    rank0_finished = std::async(std::launch::async, [&] {
      return answer_probe_as_rank1(rank1_listener, space, what == Rank1::dropped_finished ? 4 : 3);
    });
  } else if (what == Rank1::probes_finished) {
    rank0_finished = std::async(std::launch::async, [&] {
      Fd conn = bootstrap::connect_with_retry(
          bootstrap::format_host_port("127.0.0.1", rank0.listen_port()),
          Deadline::after(std::chrono::seconds(10)));
      const Hello hello = make_hello(kToken, 1, 0, 2, HelloPurpose::probe);
      write_all(conn.get(), bytes_of(hello), Deadline::after(std::chrono::seconds(10)));
      HelloAck ack{};
      read_exact(conn.get(), writable_bytes_of(ack), Deadline::after(std::chrono::seconds(10)));
      expect(ack.magic == kHelloMagic, "ack.magic == kHelloMagic");
      expect(ack.accepted_rank == 1, "ack.accepted_rank == 1");
      const Spared rank0_vouched = read_notice_frame(conn);
      Spared mine;
      mine.entries.push_back({space, 4});
      write_notice_frame(conn, mine);
      return rank0_vouched;
    });
  }
  chorus_result_t code = CHORUS_SUCCESS;
  try {
    agree_on_verdict(ctx);
  } catch (const Error& e) {
    code = e.code();
    if (message) *message = e.what();
  }
  if (asked_part_done.valid()) CHECK(asked_part_done.get());
  if (rank0_finished.valid()) {  // rank 0 told rank 1 its part of #4 was done
    const Spared told = rank0_finished.get();
    CHECK(told.covers(tag, sig));
    CHECK_FALSE(told.covers(tag, sig_of(5, 16)));
  }
  rank0.board().slot(tag).leave(sig, code == CHORUS_SUCCESS);
  if (notice_back) {  // the frames rank 0 sent rank 1, up to a notice
    *notice_back = false;
    FrameHeader back{};
    while (!*notice_back) {
      read_exact(pair.fd.get(), writable_bytes_of(back), Deadline::after(std::chrono::seconds(10)));
      std::vector<std::byte> payload(back.length);
      read_exact(pair.fd.get(), payload, Deadline::after(std::chrono::seconds(10)));
      *notice_back = static_cast<FrameType>(back.type) == FrameType::abort;
    }
  }
  pair.fd.reset();
  pair.rank0.reset();
  return code;
}

}  // namespace

TEST_CASE("verdict round: a peer that dies is not waited for, whether its have came or not") {
  // Its death spares the call rank 0 is in: whatever it sent is here, and
  // nothing more will come, so only the ranks still alive must have theirs.
  CHECK(verdict_with(Rank1::has_then_dies, nullptr) == CHORUS_SUCCESS);
  CHECK(verdict_with(Rank1::dies_without_have, nullptr) == CHORUS_SUCCESS);
}

TEST_CASE("verdict round: a peer that failed the call fails it here, with its message") {
  std::string message;
  CHECK(verdict_with(Rank1::fails_call, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("its part of #4 never came"));
}

TEST_CASE("verdict round: a peer alive but silent is waited for until the deadline") {
  std::string message;
  CHECK(verdict_with(Rank1::silent, &message) == CHORUS_ERR_TIMEOUT);
  CHECK_THAT(message, Catch::Contains("rank 1"));
}

TEST_CASE("verdict round: a deadline that passes while a done peer's have is on its way") {
  // Rank 0's own have is sent: rank 1, with every have, may finish the call.
  // Asked, it says its part is done, so rank 0 waits for the have and
  // finishes too (failing there, the two would disagree).
  CHECK(verdict_with(Rank1::late_have, nullptr) == CHORUS_SUCCESS);
  // Its part not done, rank 1 is sealed and will send no have: both fail.
  std::string message;
  CHECK(verdict_with(Rank1::late_not_done, &message) == CHORUS_ERR_TIMEOUT);
  CHECK_THAT(message, Catch::Contains("timed out"));
}

TEST_CASE("verdict round: a live peer whose connection drops is not taken for dead") {
  // Its stream ends, but it answers rank 0's probe: a failure of both, which
  // spares what each finished and what the other's part is done for. Its
  // part of the call not done, the call fails (taken for dead, rank 0 would
  // finish it); done (only its have was lost), rank 0 finishes it too.
  std::string message;
  CHECK(verdict_with(Rank1::dropped_unfinished, &message) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("with both alive"));
  CHECK(verdict_with(Rank1::dropped_finished, nullptr) == CHORUS_SUCCESS);
  // Rank 1 lost its end first and probes rank 0, having finished the call.
  CHECK(verdict_with(Rank1::probes_finished, nullptr) == CHORUS_SUCCESS);
}

TEST_CASE("verdict round: a peer whose stream is corrupt is failed, not taken for dead") {
  // Rank 0 drops the broken stream, but rank 1 is alive: were it taken for
  // gone, each side could finish a call the other fails. Rank 0 fails the
  // call, and tells rank 1 so on its own stream before the connection ends.
  std::string message;
  bool notice_back = false;
  CHECK(verdict_with(Rank1::sends_garbage, &message, &notice_back) == CHORUS_ERR_PEER_FAILURE);
  CHECK_THAT(message, Catch::Contains("malformed frame"));
  CHECK(notice_back);
}
