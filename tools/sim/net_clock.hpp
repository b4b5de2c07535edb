// The virtual clock of chorus-sim: when a message sent at a rank's virtual
// time arrives, given the link classes (same host, other host) and each
// host's network link. Pure arithmetic, no threads (the caller locks).
//
// Rules (times in microseconds, sizes in bytes):
//  - Same host: arrival = t_send + alpha_intra + b / beta_intra. Links inside
//    a host are not contended (a host's memory is modelled as wide enough).
//  - Other host: the message needs its source host's egress link and its
//    destination host's ingress link, each for d = b / beta_inter. It takes
//    the earliest start s >= t_send at which both links are free for d (each
//    link is a calendar of busy intervals; a message may fill a gap before an
//    interval booked earlier, so that the order in which the rank threads
//    happen to run matters less), books [s, s + d) on both, and arrives at
//    s + alpha_inter + d.
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
  // The earliest s >= earliest at which [s, s + duration) is free.
  double first_gap(double earliest, double duration) const;
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
