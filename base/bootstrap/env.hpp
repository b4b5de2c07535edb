// Who am I and where is the store? detect_bootstrap reads the variables of
// whichever launcher started this process; open_store then connects to (and,
// on the rank that hosts it, first starts) the rendezvous store.
//
// Launchers, in order of precedence:
//  1. chorusrun: CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_LOCAL_RANK,
//     CHORUS_LOCAL_SIZE, CHORUS_STORE_ADDR, CHORUS_JOB_TOKEN (already parsed
//     into Config). chorusrun hosts the store itself.
//  2. torchrun, when TORCHELASTIC_RUN_ID is set: torchrun is then the
//     innermost launcher (e.g. `srun torchrun ...`), so its RANK beats
//     SLURM_PROCID, which numbers the torchrun agents, not the ranks.
//  3. Open MPI: OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE.
//  4. Slurm: SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID (local size from
//     SLURM_TASKS_PER_NODE and SLURM_NODEID).
//  5. torchrun-style variables without TORCHELASTIC_RUN_ID (Kubernetes
//     PyTorchJob): RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE.
//  6. TF_CONFIG: rank = position among cluster.chief + cluster.worker.
//
// Store address for the foreign launchers: CHORUS_STORE_ADDR when set, else
// Open MPI/Slurm: MASTER_ADDR:MASTER_PORT; torchrun: MASTER_ADDR:(MASTER_PORT+1)
// because torchrun's own c10d store already listens on MASTER_PORT; TF_CONFIG:
// the first chief/worker address. Rank 0 hosts the store there. A job of one
// rank with no address gets a private store on a kernel-chosen port.
//
// Job token: CHORUS_JOB_TOKEN when set, else one derived from the launcher's
// job id (SLURM_JOB_ID, TORCHELASTIC_RUN_ID, Open MPI's job id, TF_CONFIG's
// cluster). A derived token is not secret: it only keeps two jobs that meet
// on one port apart. Set CHORUS_JOB_TOKEN for a real secret.
#pragma once

#include <memory>
#include <string>

#include "base/bootstrap/store.hpp"
#include "base/bootstrap/tcp_store.hpp"
#include "base/core/config.hpp"
#include "base/core/deadline.hpp"

namespace chorus {

struct BootstrapInfo {
  int rank = -1;
  int world_size = 0;
  int local_rank = -1;  // -1 and 0 when the launcher does not say
  int local_size = 0;
  std::string store_addr;  // "host:port"
  std::string job_token;   // "" disables the check
  bool this_rank_hosts_store = false;
  std::string source;  // "chorusrun", "openmpi", "slurm", "torchrun", "tf_config"
  // From TF_CONFIG: the task's type ("chief", "worker", "ps") and index;
  // base/bootstrap/tf_cluster.hpp maps them to ranks.
  std::string role;
  int role_index = -1;
};

// Throws UsageError(CHORUS_ERR_BOOTSTRAP) naming the variables it looked for
// when no launcher is recognised or one is missing a piece or has a bad value.
BootstrapInfo detect_bootstrap(const EnvLookup& env, const Config& config);

// The job's store: a client, plus the server when this rank hosts it. The
// server lives as long as the handle, so keep the handle for the whole job.
class StoreHandle : public Store {
 public:
  StoreHandle(std::unique_ptr<TcpStoreServer> server, std::unique_ptr<TcpStoreClient> client);
  ~StoreHandle() override;

  void set(const std::string& key, const std::string& value) override;
  std::string get(const std::string& key, const Deadline& deadline) override;
  void wait(const std::vector<std::string>& keys, const Deadline& deadline) override;
  int64_t add(const std::string& key, int64_t delta) override;

  TcpStoreClient& client() { return *client_; }
  TcpStoreServer* server() { return server_.get(); }  // null unless this rank hosts
  // The address other ranks can reach this process at (see TcpStoreClient).
  std::string local_address() const { return client_->local_address(); }
  // Where the store really is (a requested port 0 resolved to the bound one).
  const std::string& address() const { return client_->address(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;  // declared first: destroyed after the client
  std::unique_ptr<TcpStoreClient> client_;
};

// Starts the server when info.this_rank_hosts_store (binding the address's
// port on that host, or on all interfaces when the host is not a loopback
// address), then connects, retrying until the deadline. Throws
// IoError(CHORUS_ERR_BOOTSTRAP) naming the address.
std::unique_ptr<StoreHandle> open_store(const BootstrapInfo& info, const Deadline& deadline);

}  // namespace chorus
