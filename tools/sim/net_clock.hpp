// The virtual clock of chorus-sim: when a message sent at a rank's virtual
// time arrives, given the link classes (same host, other host) and each
// host's network link. Pure arithmetic, no threads (the caller locks).
//
// Rules (times in microseconds, sizes in bytes):
//  - Same host: arrival = t_send + alpha_intra + b / beta_intra. Links inside
//    a host are not contended (a host's memory is modelled as wide enough).
//  - Other host: the message needs its source host's egress link and its
//    destination host's ingress link, both at once, for d = b / beta_inter
//    in all. Each link is a calendar of busy intervals. From t_send on, the
//    message takes every stretch of time in which both links are free until
//    it has had d: a message is many packets, and a link interleaves the
//    packets of the messages that share it, so a message may fill gaps left
//    between messages booked earlier and go on after them. It arrives at
//    alpha_inter after its last stretch ends. (Booking whole messages into
//    gaps wide enough for them left the gaps too narrow for any message
//    idle: at 256 ranks on 32 hosts the lanes of hierarchical, 8 on each
//    host link, took up to a third longer than the links' traffic needs,
//    depending on the order in which the rank threads happened to book.)
//  - A rank's clock becomes max(its clock, arrival) when it completes the
//    receive, plus b * gamma (SimTransport: every receive of a reducing
//    collective is charged, see sim_transport.hpp).
#pragma once

#include <cstddef>
#include <map>
#include <vector>

namespace chorus::sim {

struct LinkClass {
  double alpha_us = 0;
  double us_per_byte = 0;  // 1 / beta
};

struct NetParams {
  LinkClass intra{0.5, 1e-4};        // 0.5 us, 10 GB/s
  LinkClass inter{10.0, 8e-4};       // 10 us, 1.25 GB/s (10 Gbit/s)
  double reduce_us_per_byte = 2e-4;  // gamma: 5 GB/s
};

// One direction of a host's network link: the intervals it is busy.
class LinkCalendar {
 public:
  // The earliest instant >= t that no busy interval covers.
  double free_from(double t) const;
  // The start of the first busy interval that begins after t (infinity:
  // none).
  double busy_after(double t) const;
  void book(double start, double duration);
  void clear() { busy_.clear(); }
  std::size_t intervals() const { return busy_.size(); }

 private:
  std::map<double, double> busy_;  // start -> end, disjoint
};

class NetClock {
 public:
  NetClock(NetParams params, std::vector<int> host_of_rank);
  // The virtual time at which `bytes` sent by `src` at `t_send` arrive at
  // `dst`; books the host links it crosses.
  double send(int src, int dst, double t_send, double bytes);
  // Forgets every booking (a new call starts with idle links).
  void reset();
  const NetParams& params() const { return params_; }
  int host_of(int rank) const { return host_of_[static_cast<std::size_t>(rank)]; }

 private:
  NetParams params_;
  std::vector<int> host_of_;
  std::vector<LinkCalendar> egress_, ingress_;
};

}  // namespace chorus::sim
