// A Store on a shared directory (tests, or a shared file system when no
// network store is reachable). Each key is one file, written atomically (temp
// file + rename) so readers never see half a value; get/wait poll with
// backoff; add serialises on a per-key flock.
#pragma once

#include <memory>
#include <string>

#include "base/bootstrap/store.hpp"

namespace chorus {

// Creates dir (and its parents) when missing. Throws IoError(CHORUS_ERR_IO)
// when it cannot.
std::unique_ptr<Store> make_file_store(const std::string& dir);

}  // namespace chorus
