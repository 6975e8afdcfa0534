// `hpcrl version`: what was built — version, git commit, LibTorch, backends.
#include <torch/version.h>

#include <cstdio>

#include "cli/command.h"

namespace {
hpcrl::cli::Registration reg{"version", 90, [](CLI::App& app) {
  app.add_subcommand("version", "Print version, git commit, LibTorch version and built backends");
  return [] {
    std::printf("hpcrl %s (commit %s)\n", HPCRL_VERSION, HPCRL_GIT_COMMIT);
    std::printf("LibTorch %s\n", TORCH_VERSION);
    std::printf("backends: MPI yes, NCCL %s, CUDA LibTorch %s\n", HPCRL_NCCL_BUILT, HPCRL_TORCH_CUDA_BUILT);
    return 0;
  };
}};
}  // namespace
