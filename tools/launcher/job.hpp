// One chorusrun job: N ranks forked on this machine around an in-process TCP
// store, supervised until they all exit, one fails, chorusrun is signalled or
// the timeout expires.
#pragma once

#include <string>
#include <vector>

namespace chorus::launcher {

struct JobOptions {
  int np = 0;
  bool tag_output = false;
  double timeout_s = 0;  // 0: no timeout
  double grace_s = 2.0;  // SIGTERM to SIGKILL
  bool tf_config = false;
  // "core": rank r runs on the r-th CPU chorusrun may use (mod their number);
  // "none": no binding; "auto": core when every rank gets a CPU of its own.
  // Default none: pinning steadies small-message latency, but keeps a rank's
  // progress thread off the idle core and costs up to 40 % at 2-8 MiB here.
  std::string bind_to = "none";
  std::vector<std::string> exports;  // "VAR" (pass chorusrun's value) or "VAR=VALUE"
  std::vector<std::string> command;  // program and arguments
};

// Runs the job and returns chorusrun's exit status: 0 when every rank exited
// 0; else the status of the first rank that failed (128+S for signal S), 124
// after --timeout, 128+S when chorusrun itself got signal S, 127 when the
// program cannot be found.
int run_job(const JobOptions& options);

}  // namespace chorus::launcher
