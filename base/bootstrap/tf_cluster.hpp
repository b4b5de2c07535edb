// TensorFlow names each task of a job by (type, index) in TF_CONFIG's
// cluster of chief, worker and ps tasks; Chorus numbers the same tasks as
// ranks of one world:
//
//   rank 0 .. C-1            chief 0 .. C-1      (C is 0 or 1)
//   rank C .. C+W-1          worker 0 .. W-1
//   rank C+W .. C+W+P-1      ps 0 .. P-1
//
// so a cluster without parameter servers keeps the ranks it had, and the
// parameter servers are the last ranks. chorusrun --tf-config and --ps write
// clusters of this shape; detect_bootstrap reads any TF_CONFIG with it.
#pragma once

#include <string>

namespace chorus::bootstrap {

struct TfClusterShape {
  int chiefs = 0;
  int workers = 0;
  int ps = 0;
  int size() const { return chiefs + workers + ps; }
};

struct TfTask {
  std::string type;  // "chief", "worker" or "ps"
  int index = 0;
};

// Throws UsageError (CHORUS_ERR_BOOTSTRAP) for an unknown type or an index
// outside the cluster.
int tf_rank_of(const TfClusterShape& shape, const TfTask& task);
// rank must be in [0, shape.size()) (else UsageError).
TfTask tf_task_of(const TfClusterShape& shape, int rank);
// The cluster chorusrun starts for np ranks of which ps are parameter
// servers: without them every rank is a worker (worker 0 acts as chief, as
// MultiWorkerMirroredStrategy does); with them rank 0 is the chief, which
// also trains and coordinates, as in TensorFlow 1's parameter-server jobs.
// Throws UsageError unless 0 <= ps < np.
TfClusterShape tf_launch_shape(int np, int ps);

}  // namespace chorus::bootstrap
