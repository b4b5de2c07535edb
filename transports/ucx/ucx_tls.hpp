// UCX_TLS lists: whether one lets UCX move data through shared memory, and the
// same list without it (ranks on different hosts, simulated or not, must never
// share memory).
//
// UCX 1.13's shared-memory transports are posix, sysv and xpmem (the "mm"
// alias), knem and cma; "sm" and "shm" name all five. A list is "all", a list
// of names, or "^" and names to leave out; a leading '\' on a name turns its
// aliasing off. GPU IPC transports (cuda_ipc, rocm_ipc) are same-host only
// too, but they only ever carry GPU memory, and this transport sends host
// memory only.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace chorus::ucx {

// Whether UCX may pick a shared-memory transport under this UCX_TLS value.
bool tls_may_use_shm(std::string_view tls);

// The list with every shared-memory transport left out ("all" -> "^sm",
// "^ib" -> "^ib,sm", "sm,tcp" -> "tcp"); nullopt when nothing would remain.
std::optional<std::string> tls_without_shm(std::string_view tls);

}  // namespace chorus::ucx
