// The checks behind RunDirectory::check (run_root_checks.cpp).
#pragma once

#include <string>
#include <vector>

namespace hpcrl::runner {

// InputError when `root` is the working directory or an ancestor of it.
void check_not_working_directory(const std::string& root);
// InputError unless `root` is an hpcrl run holding only what hpcrl writes and none of `inputs`.
void check_replaceable(const std::string& root, const std::vector<std::string>& inputs);

}  // namespace hpcrl::runner
