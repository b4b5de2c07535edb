#include "base/bootstrap/tf_cluster.hpp"

#include <fmt/format.h>

#include "base/core/error.hpp"

namespace chorus::bootstrap {

namespace {

[[noreturn]] void refuse(const std::string& what) {
  throw UsageError(CHORUS_ERR_BOOTSTRAP, what);
}

}  // namespace

int tf_rank_of(const TfClusterShape& shape, const TfTask& task) {
  int first = 0, count = 0;
  if (task.type == "chief") {
    count = shape.chiefs;
  } else if (task.type == "worker") {
    first = shape.chiefs;
    count = shape.workers;
  } else if (task.type == "ps") {
    first = shape.chiefs + shape.workers;
    count = shape.ps;
  } else {
    refuse(fmt::format("TF_CONFIG task type '{}' is not chief, worker or ps", task.type));
  }
  if (task.index < 0 || task.index >= count)
    refuse(fmt::format("TF_CONFIG task {} index {} is outside the cluster's {} {} task(s)",
                       task.type, task.index, count, task.type));
  return first + task.index;
}

TfTask tf_task_of(const TfClusterShape& shape, int rank) {
  if (rank < 0 || rank >= shape.size())
    refuse(fmt::format("rank {} is outside a TF cluster of {} tasks", rank, shape.size()));
  if (rank < shape.chiefs) return {"chief", rank};
  if (rank < shape.chiefs + shape.workers) return {"worker", rank - shape.chiefs};
  return {"ps", rank - shape.chiefs - shape.workers};
}

TfClusterShape tf_launch_shape(int np, int ps) {
  if (ps < 0) refuse(fmt::format("--ps {}: must not be negative", ps));
  if (ps == 0) return {0, np, 0};
  if (ps >= np)
    refuse(
        fmt::format("--ps {} with -np {}: a parameter-server job needs a chief beside its "
                    "{} server(s)",
                    ps, np, ps));
  return {1, np - ps - 1, ps};
}

}  // namespace chorus::bootstrap
