#include "tools/sim/net_clock.hpp"

#include <algorithm>
#include <iterator>

namespace chorus::sim {

double LinkCalendar::first_gap(double earliest, double duration) const {
  double s = earliest;
  // The interval that starts at or before s may still cover it.
  auto it = busy_.upper_bound(s);
  if (it != busy_.begin()) {
    auto prev = std::prev(it);
    s = std::max(s, prev->second);
  }
  for (; it != busy_.end(); ++it) {
    if (s + duration <= it->first) break;
    s = std::max(s, it->second);
  }
  return s;
}

void LinkCalendar::book(double start, double duration) {
  if (duration <= 0) return;
  const double end = start + duration;
  // Merge with a neighbour that touches, so that back-to-back traffic stays
  // one interval.
  auto next = busy_.find(end);
  double new_end = end;
  if (next != busy_.end()) {
    new_end = next->second;
    busy_.erase(next);
  }
  auto it = busy_.lower_bound(start);
  if (it != busy_.begin()) {
    auto prev = std::prev(it);
    if (prev->second == start) {
      prev->second = new_end;
      return;
    }
  }
  busy_[start] = new_end;
}

NetClock::NetClock(NetParams params, std::vector<int> host_of_rank)
    : params_(params), host_of_(std::move(host_of_rank)) {
  int hosts = 0;
  for (int h : host_of_) hosts = std::max(hosts, h + 1);
  egress_.resize(static_cast<std::size_t>(hosts));
  ingress_.resize(static_cast<std::size_t>(hosts));
}

double NetClock::send(int src, int dst, double t_send, double bytes) {
  const int hs = host_of(src), hd = host_of(dst);
  if (hs == hd) return t_send + params_.intra.alpha_us + bytes * params_.intra.us_per_byte;
  const double d = bytes * params_.inter.us_per_byte;
  LinkCalendar& out = egress_[static_cast<std::size_t>(hs)];
  LinkCalendar& in = ingress_[static_cast<std::size_t>(hd)];
  double s = t_send;
  for (;;) {
    const double a = out.first_gap(s, d);
    const double b = in.first_gap(a, d);
    if (b == a) {
      s = a;
      break;
    }
    s = b;
  }
  out.book(s, d);
  in.book(s, d);
  return s + params_.inter.alpha_us + d;
}

void NetClock::reset() {
  for (auto& c : egress_) c.clear();
  for (auto& c : ingress_) c.clear();
}

}  // namespace chorus::sim
