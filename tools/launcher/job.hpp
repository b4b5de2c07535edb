// One chorusrun job: N ranks forked on this machine around an in-process TCP
// store, supervised until they all exit, one fails, chorusrun is signalled or
// the timeout expires. Across hosts, the ranks of other hosts are started by
// a host agent on each (tools/launcher/remote.hpp), and the same supervision
// runs in the agent over that host's ranks.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace chorus::launcher {

struct JobOptions {
  int np = 0;
  bool tag_output = false;
  double timeout_s = 0;  // 0: no timeout
  double grace_s = 2.0;  // SIGTERM to SIGKILL
  bool tf_config = false;
  // Parameter servers: the last ps ranks are TF_CONFIG's ps tasks, rank 0 its
  // chief, the rest its workers (base/bootstrap/tf_cluster.hpp); TF_CONFIG is
  // set as with tf_config, and a worker that fails does not stop the job.
  int ps = 0;
  // "core": rank r runs on the r-th CPU chorusrun may use (mod their number);
  // "none": no binding; "auto" (default): core when the job has two ranks or
  // more and every rank gets a CPU of its own, as Open MPI binds small jobs.
  // Measured on 2 CPUs (docs/benchmarks.md): 2-rank latency steady at its
  // best (no job landing in a slow placement), bandwidth unchanged. A job of
  // one rank has no peer to gain from it and would pile onto the first CPU
  // with every other such job; oversubscribed jobs stay unbound.
  std::string bind_to = "auto";
  std::vector<std::string> exports;  // "VAR" (pass chorusrun's value) or "VAR=VALUE"
  std::vector<std::string> command;  // program and arguments

  // Across hosts. `np` stays the world size; `ranks` are the ranks started
  // on this host (none given: all np), `remote_hosts` those started through
  // `launch_agent` ({host} replaced by the host's name).
  std::optional<std::vector<int>> ranks;
  struct RemoteHost {
    std::string name;
    std::vector<int> ranks;
  };
  std::vector<RemoteHost> remote_hosts;
  std::string launch_agent = "ssh -o BatchMode=yes -o ConnectTimeout=10 {host}";
  // With remote hosts: the address the store listens on (the hosts must
  // reach it); empty: the local end of the route to the first remote host.
  // In a host agent: the store's "host:port".
  std::string store_addr;
  std::string host_name;  // this host's name in the host list ("" on one host), for messages
  // chorusrun --host-agent: this process runs one host's ranks for a
  // chorusrun elsewhere; the store is at store_addr with this token; each
  // rank's exit is reported on stdout and the ranks stop when stdin closes.
  bool host_agent = false;
  std::string token;
};

// Runs the job and returns chorusrun's exit status: 0 when every rank exited
// 0 (with ps, every rank but the workers that may fail); else the status of
// the first rank that failed (128+S for signal S), 124
// after --timeout, 128+S when chorusrun itself got signal S, 127 when the
// program cannot be found.
int run_job(const JobOptions& options);

}  // namespace chorus::launcher
