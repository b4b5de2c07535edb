#include "tools/sim/net_clock.hpp"

#include <algorithm>
#include <iterator>
#include <limits>

namespace chorus::sim {

namespace {
constexpr double kSliverUs = 1e-6;
}  // namespace

double LinkCalendar::free_from(double t) const {
  auto it = busy_.upper_bound(t);
  if (it != busy_.begin()) t = std::max(t, std::prev(it)->second);
  for (; it != busy_.end() && it->first <= t; ++it) t = std::max(t, it->second);
  return t;
}

double LinkCalendar::busy_after(double t) const {
  auto it = busy_.upper_bound(t);
  return it == busy_.end() ? std::numeric_limits<double>::infinity() : it->first;
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
  double s = t_send, left = d;
  while (left > 0) {
    // The next instant at which both links are free, and how long they stay so.
    double start = s;
    for (;;) {
      const double a = out.free_from(start);
      const double b = in.free_from(a);
      if (b == a) {
        start = a;
        break;
      }
      start = b;
    }
    const double gap_end = std::min(out.busy_after(start), in.busy_after(start));
    // A sliver left by rounding between two bookings: too short to advance
    // the clock by, so step over it.
    if (gap_end - start < kSliverUs) {
      s = gap_end;
      continue;
    }
    const double piece = std::min(gap_end - start, left);
    out.book(start, piece);
    in.book(start, piece);
    left = piece == left ? 0 : left - piece;
    s = start + piece;
  }
  return s + params_.inter.alpha_us;
}

void NetClock::reset() {
  for (auto& c : egress_) c.clear();
  for (auto& c : ingress_) c.clear();
}

}  // namespace chorus::sim
