// The hosts of a multi-host job and where its ranks go, with mpirun's
// conventions: `-H a:2,b:2`, an Open MPI hostfile (`a slots=2`), and
// `--map-by slot` (fill each host in turn) or `--map-by node` (one rank per
// host in turn). Pure functions, unit-tested in tests/launcher/test_hosts.cpp.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace chorus::launcher {

struct HostSlots {
  std::string name;
  int slots = 1;
};

// "a:2,b,c:4" (a host without ":N" has one slot, as in Open MPI). A host
// named twice gets the sum of its slots. Throws UsageError on a bad entry.
std::vector<HostSlots> parse_host_list(std::string_view text);

// An Open MPI hostfile: one host per line, optionally "slots=N" (default 1)
// and "max_slots=N" (accepted, not enforced), '#' starts a comment, blank
// lines are skipped. `origin` names the file in errors ("hosts.txt:3: ...").
std::vector<HostSlots> parse_hostfile(std::string_view text, const std::string& origin);

enum class MapBy { kSlot, kNode };
MapBy parse_map_by(const std::string& text);  // "slot" or "node"

struct RankPlacement {
  int host = 0;        // index into the host list
  int local_rank = 0;  // among the ranks of its host, in rank order
  int local_size = 0;  // ranks on its host
};

// Where each of np ranks runs; np 0 means one rank per slot. More ranks than
// slots is an error (as Open MPI without --oversubscribe).
std::vector<RankPlacement> map_ranks(const std::vector<HostSlots>& hosts, int np, MapBy by);

}  // namespace chorus::launcher
