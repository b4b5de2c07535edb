// Line-tagged forwarding of the ranks' output (--tag-output). Each rank's
// stdout and stderr arrive on pipes; complete lines are written to
// chorusrun's own stdout/stderr with Open MPI's prefix "[1,<rank>]<stdout>:",
// so one line is never torn by another rank's output.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace chorus::launcher {

class OutputForwarder {
 public:
  explicit OutputForwarder(int ranks);
  // stream: 1 = stdout, 2 = stderr.
  void feed(int rank, int stream, std::string_view data);
  // The pipe closed: flush a last partial line (newline added).
  void finish(int rank, int stream);

 private:
  void emit(int rank, int stream, std::string_view line);
  std::vector<std::string> pending_;  // index rank * 2 + (stream - 1)
};

// Writes everything to fd, retrying short writes; gives up silently when the
// reader went away (EPIPE), since nothing useful can be done about it.
void write_fully(int fd, std::string_view data);

}  // namespace chorus::launcher
