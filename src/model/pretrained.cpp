// Model construction from "preset:NAME" or an HF directory (pretrained.h).
#include "hpcrl/model/pretrained.h"

#include <torch/utils.h>

#include <filesystem>

#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::model {

namespace {
constexpr const char* kPresetPrefix = "preset:";
}

ModelArch resolve_model_arch(const std::string& spec) {
  if (str::starts_with(spec, kPresetPrefix)) return model_arch_preset(spec.substr(std::string(kPresetPrefix).size()));
  namespace fsys = std::filesystem;
  HPCRL_CHECK_INPUT(fsys::is_directory(spec), "model '" << spec << "' is neither a directory nor 'preset:NAME' (presets: "
                                                        << str::join(model_arch_preset_names(), ", ") << ")");
  const std::string config = (fsys::path(spec) / "config.json").string();
  HPCRL_CHECK_INPUT(fsys::exists(config), "model directory '" << spec << "' has no config.json; point --model at an "
                                                              << "HF model directory or use preset:NAME");
  return load_hf_config(config);
}

std::shared_ptr<DecoderModel> load_model(const std::string& spec, const parallel::ParallelContext& ctx,
                                         ModelOptions options) {
  ModelArch arch = resolve_model_arch(spec);
  const bool preset = str::starts_with(spec, kPresetPrefix);
  if (!preset) options.init = false;  // every tensor comes from the checkpoint
  auto model = std::make_shared<DecoderModel>(arch, ctx, options);
  if (!preset) {
    io::TensorStore store(spec);  // InputError naming the directory when it holds no safetensors
    load_weights(*model, store);
  }
  return model;
}

}  // namespace hpcrl::model
