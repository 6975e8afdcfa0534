// Shared model loading of the debugging commands (see model_loading.h).
#include "cli/model_loading.h"

#include <spdlog/spdlog.h>

#include <filesystem>

#include "hpcrl/config/model_tokenizer.h"
#include "hpcrl/distributed/bootstrap.h"
#include "hpcrl/model/lora.h"
#include "hpcrl/model/pretrained.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::cli {

void add_layout_options(CLI::App* sub, LayoutFlags& layout, const std::string& sp_help) {
  sub->add_option("--tp", layout.tp, "Tensor-parallel size")->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--sp", layout.sp, sp_help)->check(CLI::PositiveNumber)->capture_default_str();
  sub->add_option("--ep", layout.ep, "Expert-parallel size (MoE models)")->check(CLI::PositiveNumber)
      ->capture_default_str();
  sub->add_option("--pp", layout.pp, "Pipeline-parallel size")->check(CLI::PositiveNumber)->capture_default_str();
}

LoadedModel load_command_model(const ModelSource& src, const ModelArch& arch, const LayoutFlags& layout,
                               const std::string& command, int64_t seq_len) {
  const std::string& spec = src.spec;
  const std::string& dtype = src.dtype;
  const std::string& adapter = src.adapter;
  const uint64_t seed = src.seed;
  HPCRL_CHECK_INPUT(dtype == "float32" || dtype == "bfloat16", "--dtype must be float32 or bfloat16, got '" << dtype
                                                                                                            << "'");
  dist::ParallelSizes sizes;
  sizes.tp = layout.tp;
  sizes.sp = layout.sp;
  sizes.ep = layout.ep;
  sizes.pp = layout.pp;
  const dist::WorldInfo& world = dist::world();
  dist::Mesh mesh(sizes, 0, world.size, command);
  mesh.check_model(arch.dims(seq_len));
  dist::MeshComms comms = dist::create_mesh_comms(mesh);
  parallel::ParallelContext ctx = parallel::ParallelContext::of(comms);
  model::ModelOptions mo;
  mo.seed = seed;
  mo.pp_virtual_stages = layout.pp_virtual;
  auto m = model::load_model(spec, ctx, mo);
  // A LoRA checkpoint's model.safetensors is the frozen base: without its adapter it is not the trained model.
  if (adapter.empty() && std::filesystem::exists(std::filesystem::path(spec) / "adapter_config.json") &&
      world.rank == 0)
    spdlog::warn("{} holds a LoRA adapter (adapter_config.json) beside its frozen base; this {} runs the base "
                 "alone: pass --adapter {} for the trained model, or use its merged/ export",
                 spec, command, spec);
  if (!adapter.empty()) {
    HPCRL_CHECK_INPUT(layout.pp == 1, "--adapter with --pp " << layout.pp << " is not built; use --pp 1 (tp/sp work)");
    const model::LoraSpec lora = model::read_lora_spec(adapter);
    model::attach_lora(*m, lora, seed);
    model::load_lora_adapter(*m, lora, adapter);
  }
  if (dtype == "bfloat16") m->to(at::kBFloat16);
  m->eval();
  return LoadedModel{std::move(mesh), std::move(comms), std::move(ctx), std::move(m)};
}

std::unique_ptr<io::Tokenizer> command_tokenizer(const std::string& model, const std::string& tokenizer,
                                                 const std::string& missing) {
  // configured_tokenizer_spec: "byte" (the pipeline's name) and "builtin" are both the byte tokenizer.
  if (!tokenizer.empty()) return io::load_tokenizer(io::configured_tokenizer_spec(tokenizer));
  if (str::starts_with(model, "preset:")) return io::load_tokenizer(io::configured_tokenizer_spec(""));
  // A directory hpcrl saved records its tokenizer: the files beside the weights, or "byte" in config.json.
  const std::string recorded = config::recorded_model_tokenizer(model);
  if (!recorded.empty()) return io::load_tokenizer(io::configured_tokenizer_spec(recorded));
  throw InputError(missing);
}

}  // namespace hpcrl::cli
