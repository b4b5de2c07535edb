// The TF_CONFIG that chorusrun --tf-config (and --ps) gives each rank, so a
// TensorFlow program finds its cluster and its task as it would under a
// TensorFlow launcher, and a Chorus program finds its role.
#pragma once

#include <string>
#include <vector>

namespace chorus::launcher {

// One TF_CONFIG per rank, as JSON text: the cluster of
// bootstrap::tf_launch_shape(np, ps) with a distinct free 127.0.0.1 port per
// task (for TensorFlow's own servers; the ports are chosen by the kernel and
// released at once, so another process could take one first, as with any
// launcher that picks ports), and the rank's task. Throws UsageError for a
// bad ps, IoError when no port can be had.
std::vector<std::string> tf_configs(int np, int ps);

}  // namespace chorus::launcher
