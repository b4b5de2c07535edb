// Line-tagged forwarding of the ranks' output (--tag-output). Each rank's
// stdout and stderr arrive on pipes; complete lines are written to
// chorusrun's own stdout/stderr with Open MPI's prefix "[1,<rank>]<stdout>:",
// so one line is never torn by another rank's output. A host agent forwards
// its ranks' lines untagged when chorusrun was not asked to tag them, and
// chorusrun splits an agent's output into lines with a sink of its own.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace chorus::launcher {

class OutputForwarder {
 public:
  // Receives each complete line (without its newline). The default writes it
  // to `stream` with the tag, or as it is when tag is false.
  using Sink = std::function<void(int rank, int stream, std::string_view line)>;
  explicit OutputForwarder(int ranks, bool tag = true);
  OutputForwarder(int ranks, Sink sink);
  // stream: 1 = stdout, 2 = stderr.
  void feed(int rank, int stream, std::string_view data);
  // The pipe closed: flush a last partial line (newline added).
  void finish(int rank, int stream);

 private:
  Sink emit_;
  std::vector<std::string> pending_;  // index rank * 2 + (stream - 1)
};

// Writes everything to fd, retrying short writes; gives up silently when the
// reader went away (EPIPE), since nothing useful can be done about it.
void write_fully(int fd, std::string_view data);

}  // namespace chorus::launcher
