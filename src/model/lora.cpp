// LoRA on a DecoderModel (lora.h): attaching adapters, freezing the base, and
// the PEFT adapter files.
#include "hpcrl/model/lora.h"

#include <nlohmann/json.hpp>
#include <torch/utils.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::model {

namespace tensor = parallel::tensor;

namespace {

constexpr const char* kPeftPrefix = "base_model.model.";
constexpr const char* kConfigFile = "adapter_config.json";
constexpr const char* kWeightsFile = "adapter_model.safetensors";

// Adds an adapter to the layer's projection called `target` (HF name); false
// when the layer has no dense projection of that name (an MoE layer's MLP).
bool add_to(DecoderLayer& layer, const std::string& target, const tensor::LoraShape& shape) {
  Attention& attn = *layer.self_attn;
  if (target == "q_proj") attn.q_proj->add_lora(shape);
  else if (target == "k_proj") attn.k_proj->add_lora(shape);
  else if (target == "v_proj") attn.v_proj->add_lora(shape);
  else if (target == "o_proj") attn.o_proj->add_lora(shape);
  else if (!layer.mlp) return false;
  else if (target == "gate_proj") layer.mlp->gate_proj->add_lora(shape);
  else if (target == "up_proj") layer.mlp->up_proj->add_lora(shape);
  else if (target == "down_proj") layer.mlp->down_proj->add_lora(shape);
  else return false;
  return true;
}

std::string adapter_config_json(const LoraSpec& spec, const std::string& base_model, bool value_head) {
  nlohmann::json c;
  c["peft_type"] = "LORA";
  c["task_type"] = value_head ? "TOKEN_CLS" : "CAUSAL_LM";
  c["base_model_name_or_path"] = base_model;
  c["r"] = spec.shape.rank;
  c["lora_alpha"] = spec.shape.alpha;
  c["lora_dropout"] = spec.shape.dropout;
  c["target_modules"] = spec.targets;
  c["bias"] = "none";
  c["fan_in_fan_out"] = false;
  c["inference_mode"] = true;
  c["init_lora_weights"] = true;
  c["use_rslora"] = false;
  c["use_dora"] = false;
  c["modules_to_save"] = value_head ? nlohmann::json::array({"score"}) : nlohmann::json(nullptr);
  c["rank_pattern"] = nlohmann::json::object();
  c["alpha_pattern"] = nlohmann::json::object();
  return c.dump(2) + "\n";
}

}  // namespace

void attach_lora(DecoderModel& m, const LoraSpec& spec, uint64_t seed) {
  HPCRL_CHECK_INPUT(spec.shape.rank > 0, "LoRA rank must be at least 1 (got " << spec.shape.rank << ")");
  HPCRL_CHECK_INPUT(!spec.targets.empty(), "LoRA needs at least one target projection");
  std::set<std::string> added;
  for (size_t i = 0; i < m.model->layers->size(); ++i) {
    auto layer = m.model->layers->ptr<DecoderLayer>(i);
    if (!layer) continue;  // another pp stage's layer
    for (const auto& target : spec.targets) {
      HPCRL_CHECK_INPUT(add_to(*layer, target, spec.shape),
                        "LoRA target '" << target << "': layer " << i << " has no dense projection of that name "
                                        << "(adapters wrap q_proj, k_proj, v_proj, o_proj and, in dense layers, "
                                           "gate_proj, up_proj, down_proj)");
    }
  }
  for (const auto& p : m.named_parameters(/*recurse=*/true))
    if (tensor::is_lora_tensor(p.key())) added.insert(p.key());
  init_weights(m, seed, &added);
  for (auto& p : m.named_parameters(/*recurse=*/true))
    p.value().set_requires_grad(added.count(p.key()) > 0 || str::starts_with(p.key(), "score."));
}

bool has_lora(DecoderModel& m) {
  for (const auto& p : m.named_parameters(/*recurse=*/true))
    if (tensor::is_lora_tensor(p.key())) return true;
  return false;
}

void save_lora_adapter(DecoderModel& m, const LoraSpec& spec, const std::string& dir, bool writer,
                       const std::string& base_model) {
  io::NamedTensors trained = gather_full_weights(m, AdapterView::adapter);  // collective over tp
  if (!writer) return;
  io::NamedTensors peft;
  for (auto& [name, t] : trained) peft.emplace_back(kPeftPrefix + name, t);
  io::save_tensors(dir + "/" + kWeightsFile, peft, {{"format", "pt"}});
  fs::write_file_atomic(dir + "/" + kConfigFile, adapter_config_json(spec, base_model, m.options().value_head));
}

LoraSpec read_lora_spec(const std::string& dir) {
  const std::string path = dir + "/" + kConfigFile;
  HPCRL_CHECK_INPUT(std::filesystem::exists(path), dir << ": no " << kConfigFile
                                                       << " here; give the directory of a PEFT LoRA adapter");
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(fs::read_file(path, "adapter config"));
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not valid JSON (" + e.what() + "); restore the file or re-save the adapter");
  }
  HPCRL_CHECK_INPUT(c.is_object() && c.value("peft_type", "") == "LORA",
                    path << ": \"peft_type\" is not \"LORA\"; hpcrl reads LoRA adapters only");
  auto number = [&](const char* key, bool required) -> double {
    if (!c.contains(key) && !required) return 0.0;
    HPCRL_CHECK_INPUT(c.contains(key) && c[key].is_number(), path << ": \"" << key << "\" is missing or not a number");
    return c[key].get<double>();
  };
  LoraSpec spec;
  const double r = number("r", true);
  HPCRL_CHECK_INPUT(r >= 1 && r == std::floor(r), path << ": \"r\" must be a positive integer, got " << r);
  spec.shape.rank = int64_t(r);
  spec.shape.alpha = number("lora_alpha", true);
  spec.shape.dropout = number("lora_dropout", false);
  HPCRL_CHECK_INPUT(c.contains("target_modules") && c["target_modules"].is_array(),
                    path << ": \"target_modules\" must be a list of projection names (a regex string is not read)");
  for (const auto& t : c["target_modules"]) {
    HPCRL_CHECK_INPUT(t.is_string(), path << ": target_modules holds " << t.dump() << ", not a name");
    spec.targets.push_back(t.get<std::string>());
  }
  for (const char* unsupported : {"use_dora", "use_rslora"})
    HPCRL_CHECK_INPUT(!c.value(unsupported, false), path << ": \"" << unsupported << "\" adapters are not built");
  return spec;
}

void load_lora_adapter(DecoderModel& m, const LoraSpec& spec, const std::string& dir) {
  const LoraSpec saved = read_lora_spec(dir);
  std::vector<std::string> want = spec.targets, have = saved.targets;
  std::sort(want.begin(), want.end());
  std::sort(have.begin(), have.end());
  HPCRL_CHECK_INPUT(saved.shape.rank == spec.shape.rank && saved.shape.alpha == spec.shape.alpha && have == want,
                    dir << "/" << kConfigFile << ": the adapter has r " << saved.shape.rank << ", lora_alpha "
                        << saved.shape.alpha << ", target_modules [" << str::join(saved.targets, ", ")
                        << "] but this run's lora has rank " << spec.shape.rank << ", alpha " << spec.shape.alpha
                        << ", targets [" << str::join(spec.targets, ", ")
                        << "]; set the role's lora to the adapter's values, or start without this adapter");
  const std::string file = dir + "/" + kWeightsFile;
  io::TensorStore store(file);
  std::map<std::string, at::Tensor> full;
  for (const auto& name : store.names()) {
    HPCRL_CHECK_INPUT(str::starts_with(name, kPeftPrefix),
                      file << ": tensor '" << name << "' lacks PEFT's \"" << kPeftPrefix
                           << "\" prefix; is this a PEFT LoRA adapter?");
    full[name.substr(std::string(kPeftPrefix).size())] = store.load_tensor(name);
  }
  load_weights(m, full, file, AdapterView::adapter);
}

}  // namespace hpcrl::model
