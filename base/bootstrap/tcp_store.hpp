// TCP rendezvous store. One process (chorusrun, or rank 0 under a foreign
// launcher) runs a TcpStoreServer; every rank connects a TcpStoreClient.
//
// The server answers from its own thread with poll(). GET and WAIT are
// answered by the server when the keys appear (or with TIMEOUT when the wait
// the client asked for ends), so nobody polls. A client authenticates with the
// job token in its first frame; a wrong token, a malformed header or an
// oversized length gets the connection closed and a warning logged.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/bootstrap/store.hpp"
#include "base/core/deadline.hpp"

namespace chorus {

class TcpStoreServer {
 public:
  // Listens on host:port (port 0: the kernel picks a free one) and starts
  // serving. An empty token accepts every client (no check). Throws
  // IoError(CHORUS_ERR_BOOTSTRAP) naming the address when it cannot listen.
  explicit TcpStoreServer(std::string token, const std::string& host = "127.0.0.1",
                          uint16_t port = 0);
  // Stops the server thread and closes every connection; clients then fail
  // with "lost connection".
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;

  uint16_t port() const;
  // "host:port" with the host as given to the constructor.
  std::string address() const;

  // Counters for tests and diagnostics (read from any thread).
  int64_t connections_refused() const;  // wrong token, malformed, not authenticated
  int64_t clients_connected() const;    // currently open connections

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// A connection to a TcpStoreServer; safe to use from several threads at once
// (requests are multiplexed over one socket and matched by id).
class TcpStoreClient : public Store {
 public:
  // Connects (retrying until the deadline; the server may start later) and
  // authenticates. Throws IoError(CHORUS_ERR_BOOTSTRAP) naming addr.
  TcpStoreClient(const std::string& addr, const std::string& token, const Deadline& deadline);
  ~TcpStoreClient() override;

  // SET and ADD are acknowledged; they wait at most CHORUS_TIMEOUT.
  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, const Deadline& deadline) override;
  void wait(const std::vector<std::string>& keys, const Deadline& deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;

  const std::string& address() const;
  // The numeric IP this end of the connection uses (getsockname): the
  // address on which other ranks can reach this host.
  std::string local_address() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<Store> connect_tcp_store(const std::string& addr, const std::string& token,
                                         const Deadline& deadline);

// The numeric local IP the kernel would use to reach store_addr ("host:port"),
// found with a connected UDP socket (no packet is sent). Throws
// IoError(CHORUS_ERR_BOOTSTRAP) when the host cannot be resolved or reached.
std::string local_address_towards(const std::string& store_addr);

}  // namespace chorus
