// What the ranks' environment is made of: the variables, -x exports, the
// program's path and the job's token.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace chorus::launcher {

// An environment as execve takes it ("NAME=VALUE" strings), editable.
class Env {
 public:
  void set(const std::string& name, const std::string& value);
  void unset(const std::string& name);
  std::optional<std::string> get(const std::string& name) const;
  std::vector<std::string> vars_;
};

// The program's path, searched in the ranks' PATH before forking so that the
// child only calls execve (fork in a threaded process allows nothing more).
std::optional<std::string> resolve_program(const std::string& name, const Env& env);

// -x: "VAR=VALUE" as given, "VAR" with its value here (remote ranks get the
// launching side's value, as with mpirun); names of unset variables go to
// `unset` and are left out.
std::vector<std::string> resolved_exports(const std::vector<std::string>& exports,
                                          std::vector<std::string>& unset);

// 128 random bits in hex: the job's store token.
std::string random_token();

}  // namespace chorus::launcher
