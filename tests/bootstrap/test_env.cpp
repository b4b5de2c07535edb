// detect_bootstrap for every launcher, and open_store.
#include <catch2/catch.hpp>
#include <map>

#include "base/bootstrap/env.hpp"
#include "base/bootstrap/tf_cluster.hpp"
#include "base/core/error.hpp"

using namespace chorus;

namespace {

using Vars = std::map<std::string, std::string>;

BootstrapInfo detect(const Vars& vars) {
  auto env = map_env(vars);
  return detect_bootstrap(env, load_config(env));
}

std::string error_of(const Vars& vars) {
  try {
    detect(vars);
  } catch (const UsageError& e) {
    CHECK(e.code() == CHORUS_ERR_BOOTSTRAP);
    return e.what();
  }
  FAIL("no error");
  return "";
}

}  // namespace

TEST_CASE("detect: chorusrun variables", "[env]") {
  auto info = detect({{"CHORUS_RANK", "2"},
                      {"CHORUS_WORLD_SIZE", "4"},
                      {"CHORUS_LOCAL_RANK", "0"},
                      {"CHORUS_LOCAL_SIZE", "2"},
                      {"CHORUS_STORE_ADDR", "127.0.0.1:5555"},
                      {"CHORUS_JOB_TOKEN", "secret"},
                      // Lower-precedence launchers present too: ignored.
                      {"OMPI_COMM_WORLD_RANK", "9"},
                      {"RANK", "7"},
                      {"WORLD_SIZE", "8"}});
  CHECK(info.source == "chorusrun");
  CHECK(info.rank == 2);
  CHECK(info.world_size == 4);
  CHECK(info.local_rank == 0);
  CHECK(info.local_size == 2);
  CHECK(info.store_addr == "127.0.0.1:5555");
  CHECK(info.job_token == "secret");
  CHECK_FALSE(info.this_rank_hosts_store);

  CHECK_THAT(error_of({{"CHORUS_RANK", "1"}, {"CHORUS_WORLD_SIZE", "2"}}),
             Catch::Contains("CHORUS_STORE_ADDR"));
  CHECK_THAT(
      error_of(
          {{"CHORUS_RANK", "4"}, {"CHORUS_WORLD_SIZE", "4"}, {"CHORUS_STORE_ADDR", "127.0.0.1:1"}}),
      Catch::Contains("rank 4"));
  CHECK_THAT(
      error_of(
          {{"CHORUS_RANK", "0"}, {"CHORUS_WORLD_SIZE", "2"}, {"CHORUS_STORE_ADDR", "nocolon"}}),
      Catch::Contains("nocolon"));
  // One rank needs no store address: it hosts a private one.
  auto single = detect({{"CHORUS_RANK", "0"}, {"CHORUS_WORLD_SIZE", "1"}});
  CHECK(single.this_rank_hosts_store);
  CHECK(single.store_addr == "127.0.0.1:0");
}

TEST_CASE("detect: Open MPI", "[env]") {
  Vars v = {{"OMPI_COMM_WORLD_RANK", "0"},
            {"OMPI_COMM_WORLD_SIZE", "4"},
            {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
            {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
            {"MASTER_ADDR", "node1"},
            {"MASTER_PORT", "29500"},
            {"OMPI_MCA_ess_base_jobid", "1234"}};
  auto info = detect(v);
  CHECK(info.source == "openmpi");
  CHECK(info.rank == 0);
  CHECK(info.world_size == 4);
  CHECK(info.local_size == 2);
  CHECK(info.store_addr == "node1:29500");
  CHECK(info.this_rank_hosts_store);
  CHECK(info.job_token == "ompi:1234");
  v["OMPI_COMM_WORLD_RANK"] = "3";
  v["OMPI_COMM_WORLD_LOCAL_RANK"] = "1";
  v["CHORUS_STORE_ADDR"] = "10.0.0.1:7000";  // overrides MASTER_*
  v["CHORUS_JOB_TOKEN"] = "mine";
  info = detect(v);
  CHECK(info.rank == 3);
  CHECK(info.store_addr == "10.0.0.1:7000");
  CHECK_FALSE(info.this_rank_hosts_store);
  CHECK(info.job_token == "mine");
  auto msg = error_of({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"}});
  CHECK_THAT(msg, Catch::Contains("CHORUS_STORE_ADDR") && Catch::Contains("MASTER_ADDR"));
  CHECK_THAT(error_of({{"OMPI_COMM_WORLD_RANK", "x"}}), Catch::Contains("OMPI_COMM_WORLD_RANK"));
}

TEST_CASE("detect: Slurm", "[env]") {
  auto info = detect({{"SLURM_PROCID", "5"},
                      {"SLURM_NTASKS", "7"},
                      {"SLURM_LOCALID", "0"},
                      {"SLURM_NODEID", "2"},
                      {"SLURM_TASKS_PER_NODE", "2(x2),3"},
                      {"SLURM_JOB_ID", "99"},
                      {"SLURM_STEP_ID", "0"},
                      {"MASTER_ADDR", "head"},
                      {"MASTER_PORT", "4000"}});
  CHECK(info.source == "slurm");
  CHECK(info.rank == 5);
  CHECK(info.world_size == 7);
  CHECK(info.local_rank == 0);
  CHECK(info.local_size == 3);
  CHECK(info.store_addr == "head:4000");
  CHECK_FALSE(info.this_rank_hosts_store);
  CHECK(info.job_token == "slurm:99.0");
  CHECK_THAT(error_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}),
             Catch::Contains("MASTER_ADDR"));
  // A single task needs no address.
  CHECK(detect({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).this_rank_hosts_store);
}

TEST_CASE("detect: torchrun uses MASTER_PORT+1", "[env]") {
  Vars v = {{"RANK", "0"},
            {"WORLD_SIZE", "2"},
            {"LOCAL_RANK", "0"},
            {"LOCAL_WORLD_SIZE", "2"},
            {"MASTER_ADDR", "127.0.0.1"},
            {"MASTER_PORT", "29500"},
            {"TORCHELASTIC_RUN_ID", "run7"}};
  auto info = detect(v);
  CHECK(info.source == "torchrun");
  CHECK(info.store_addr == "127.0.0.1:29501");
  CHECK(info.this_rank_hosts_store);
  CHECK(info.local_size == 2);
  CHECK(info.job_token == "torchrun:run7");
  // srun torchrun ...: the Slurm variables number the agents; torchrun wins.
  v["SLURM_PROCID"] = "1";
  v["SLURM_NTASKS"] = "2";
  v["RANK"] = "1";
  info = detect(v);
  CHECK(info.source == "torchrun");
  CHECK(info.rank == 1);
  CHECK_FALSE(info.this_rank_hosts_store);
  // Without TORCHELASTIC_RUN_ID (e.g. a Kubernetes PyTorchJob) after Slurm/MPI.
  auto plain =
      detect({{"RANK", "1"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "m"}, {"MASTER_PORT", "1"}});
  CHECK(plain.source == "torchrun");
  CHECK(plain.store_addr == "m:2");
  CHECK(plain.job_token.empty());
  CHECK_THAT(error_of({{"RANK", "1"}, {"WORLD_SIZE", "3"}}),
             Catch::Contains("MASTER_ADDR") && Catch::Contains("MASTER_PORT"));
  CHECK_THAT(
      error_of(
          {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "m"}, {"MASTER_PORT", "65535"}}),
      Catch::Contains("MASTER_PORT"));
}

TEST_CASE("detect: TF_CONFIG", "[env]") {
  std::string cluster =
      R"("cluster": {"chief": ["hostA:2222"], "worker": ["hostA:2223", "hostB:2222", "hostB:2223"],
                     "ps": ["hostC:1"]})";
  auto info =
      detect({{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "worker", "index": 2}})"}});
  CHECK(info.source == "tf_config");
  CHECK(info.rank == 3);  // chief first
  CHECK(info.world_size == 5);
  CHECK(info.local_rank == 1);
  CHECK(info.local_size == 2);
  CHECK(info.store_addr == "hostA:2222");
  CHECK_FALSE(info.this_rank_hosts_store);
  CHECK(info.job_token.starts_with("tf:"));
  auto chief =
      detect({{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "chief", "index": 0}})"}});
  CHECK(chief.rank == 0);
  CHECK(chief.this_rank_hosts_store);
  CHECK(chief.job_token == info.job_token);
  // Parameter servers are the last ranks.
  auto ps = detect({{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "ps", "index": 0}})"}});
  CHECK(ps.rank == 4);
  CHECK(ps.world_size == 5);
  CHECK(ps.role == "ps");
  CHECK(ps.role_index == 0);
  CHECK(ps.local_rank == 0);
  CHECK(ps.local_size == 1);
  CHECK(info.role == "worker");
  CHECK(info.role_index == 2);
  CHECK_THAT(error_of({{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "ps", "index": 1}})"}}),
             Catch::Contains("ps index 1") && Catch::Contains("1 ps task"));
  CHECK_THAT(
      error_of({{"TF_CONFIG", "{" + cluster + R"(, "task": {"type": "evaluator", "index": 0}})"}}),
      Catch::Contains("'evaluator'"));
  CHECK_THAT(error_of({{"TF_CONFIG", "{not json"}}), Catch::Contains("TF_CONFIG"));
  CHECK_THAT(
      error_of({{"TF_CONFIG",
                 R"({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}})"}}),
      Catch::Contains("index 3"));
  auto workers_only = detect(
      {{"TF_CONFIG",
        R"({"cluster": {"worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 1}})"}});
  CHECK(workers_only.rank == 1);
  CHECK(workers_only.store_addr == "a:1");
}

TEST_CASE("detect: nothing set names what was looked for", "[env]") {
  auto msg = error_of({{"HOME", "/root"}});
  for (const char* name : {"CHORUS_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "RANK",
                           "MASTER_ADDR", "TF_CONFIG", "chorusrun"})
    CHECK_THAT(msg, Catch::Contains(name));
}

TEST_CASE("open_store: the hosting rank serves, the others connect", "[env]") {
  BootstrapInfo host;
  host.rank = 0;
  host.world_size = 2;
  host.store_addr = "127.0.0.1:0";
  host.job_token = "t";
  host.this_rank_hosts_store = true;
  auto h0 = open_store(host, Deadline::after_ms(10000));
  REQUIRE(h0->server() != nullptr);
  CHECK(h0->address() == h0->server()->address());
  CHECK(h0->local_address() == "127.0.0.1");

  BootstrapInfo other = host;
  other.rank = 1;
  other.store_addr = h0->address();
  other.this_rank_hosts_store = false;
  auto h1 = open_store(other, Deadline::after_ms(10000));
  CHECK(h1->server() == nullptr);
  h1->set("from1", "hello");
  CHECK(h0->get("from1", Deadline::after_ms(5000)) == "hello");
  CHECK(h0->add("n", 2) == 2);
  CHECK(h1->add("n", 3) == 5);
  h1->wait({"from1", "n"}, Deadline::after_ms(5000));

  other.job_token = "wrong";
  CHECK_THROWS_AS(open_store(other, Deadline::after_ms(2000)), IoError);
}

TEST_CASE("TF cluster: ranks and tasks map both ways", "[env]") {
  using chorus::bootstrap::tf_launch_shape;
  using chorus::bootstrap::tf_rank_of;
  using chorus::bootstrap::tf_task_of;
  using chorus::bootstrap::TfClusterShape;
  for (TfClusterShape shape : {TfClusterShape{0, 3, 0}, TfClusterShape{1, 2, 2},
                               TfClusterShape{1, 0, 1}, TfClusterShape{0, 1, 3}}) {
    std::vector<std::string> types;
    for (int r = 0; r < shape.size(); ++r) {
      auto task = tf_task_of(shape, r);
      CHECK(tf_rank_of(shape, task) == r);
      types.push_back(task.type);
    }
    // chief, then workers, then ps: each type's ranks are contiguous, in that order.
    std::vector<std::string> expected;
    expected.insert(expected.end(), static_cast<std::size_t>(shape.chiefs), "chief");
    expected.insert(expected.end(), static_cast<std::size_t>(shape.workers), "worker");
    expected.insert(expected.end(), static_cast<std::size_t>(shape.ps), "ps");
    CHECK(types == expected);
    CHECK_THROWS_AS(tf_task_of(shape, shape.size()), chorus::UsageError);
    CHECK_THROWS_AS(tf_task_of(shape, -1), chorus::UsageError);
  }
  auto plain = tf_launch_shape(4, 0);
  CHECK((plain.chiefs == 0 && plain.workers == 4 && plain.ps == 0));
  auto ps = tf_launch_shape(5, 2);
  CHECK((ps.chiefs == 1 && ps.workers == 2 && ps.ps == 2));
  CHECK(tf_task_of(ps, 0).type == "chief");
  CHECK(tf_task_of(ps, 3).type == "ps");
  CHECK_THROWS_WITH(tf_launch_shape(2, 2), Catch::Contains("needs a chief"));
  CHECK_THROWS_AS(tf_launch_shape(3, -1), chorus::UsageError);
}
