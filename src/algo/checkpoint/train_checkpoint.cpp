// Stage checkpoints: save, load, prune (see train_checkpoint.h).
#include "hpcrl/algo/checkpoint/train_checkpoint.h"

#include "hpcrl/io/checkpoint_manifest.h"

#include <ATen/CPUGeneratorImpl.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>

#include "hpcrl/algo/checkpoint/checkpoint_integrity.h"
#include "hpcrl/config/model_arch.h"
#include "hpcrl/config/model_tokenizer.h"
#include "hpcrl/io/checkpoint_state.h"
#include "hpcrl/io/tensor_store.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/fs.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::algo {
namespace stdfs = std::filesystem;

namespace {
std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step-%06lld", static_cast<long long>(step));
  return buf;
}

std::string optimizer_file(const std::string& role_dir, int rank) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "/optimizer-rank-%05d.safetensors", rank);
  return role_dir + buf;
}

nlohmann::json layout_of(const TrainedRole& tr, int world) {
  const Role& r = *tr.role;
  // From the mesh, which every rank knows (a rank outside the role writes or checks it too).
  nlohmann::json l = {{"world", world}, {"tp", r.mesh.tp()}, {"sp", r.mesh.sp()}, {"ep", r.mesh.ep()},
                      {"pp", r.mesh.pp()}, {"dp", r.mesh.dp()}};
  // Recorded only when on, so checkpoints from before ZeRO-1 still match plain runs
  // (and as "zero1": true for stage 1, as ZeRO-1 checkpoints have always said).
  const int64_t zero = r.config ? r.config->optim.zero : 0;  // saved roles are trained ones
  if (zero == 1) l["zero1"] = true;
  if (zero >= 2) l["zero"] = zero;
  return l;
}

// Whether layouts `saved` and `now` differ only in the data-parallel size (and
// so the world size): the optimizer state can then be recut (optim/reshard.h).
bool only_dp_differs(nlohmann::json saved, nlohmann::json now) {
  for (auto* l : {&saved, &now}) l->erase("world"), l->erase("dp");
  return saved == now;
}

// Every saved rank's optimizer file of the role (ranks outside it wrote none),
// read on demand, and this rank's state recut from them.
void load_resharded_optimizer(const std::string& role_dir, int saved_world, optim::Optimizer& optimizer) {
  std::vector<std::unique_ptr<io::TensorStore>> stores;
  std::vector<optim::SavedState> saved;
  for (int q = 0; q < saved_world; ++q) {
    const std::string file = optimizer_file(role_dir, q);
    if (!stdfs::exists(file)) continue;
    const io::TensorStore* store = stores.emplace_back(std::make_unique<io::TensorStore>(file)).get();
    saved.push_back({file, [store] { return store->names(); },
                     [store](const std::string& name) { return store->load_tensor(name); }});
  }
  HPCRL_CHECK_INPUT(!saved.empty(), role_dir << ": no optimizer-rank-*.safetensors; the checkpoint is incomplete");
  optimizer.load_resharded(saved);
}

void prune(const std::string& stage_dir, int64_t keep_last) {
  if (keep_last <= 0) return;
  std::vector<std::string> steps;
  for (auto& e : stdfs::directory_iterator(stage_dir)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0 && n.find('.') == std::string::npos) steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());
  for (size_t i = 0; i + keep_last < steps.size(); ++i) stdfs::remove_all(stdfs::path(stage_dir) / steps[i]);
}
}  // namespace

nlohmann::json rng_state() {
  at::Tensor s = at::detail::getDefaultCPUGenerator().get_state().contiguous();
  const uint8_t* p = s.data_ptr<uint8_t>();
  return nlohmann::json(std::vector<uint8_t>(p, p + s.numel()));
}

void set_rng_state(const nlohmann::json& state, const std::string& where) {
  // The default generator is handed out const; setting its state is what torch.set_rng_state does too.
  at::Generator gen = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(gen.mutex());
  const int64_t expected = gen.get_state().numel();
  const char* damaged = "; the checkpoint is damaged: resume from an earlier step directory or start over";
  bool bytes_ok = state.is_array() && static_cast<int64_t>(state.size()) == expected;
  for (size_t i = 0; bytes_ok && i < state.size(); ++i)
    bytes_ok = state[i].is_number_unsigned() && state[i].get<uint64_t>() <= 255;
  HPCRL_CHECK_INPUT(bytes_ok, where << ": \"rng\" must be the " << expected
                                    << " bytes of torch's CPU generator state (integers 0..255), got "
                                    << (state.is_array() ? std::to_string(state.size()) + " values" : state.type_name())
                                    << damaged);
  at::Tensor s = at::empty({expected}, at::kByte);
  uint8_t* p = s.data_ptr<uint8_t>();
  for (int64_t i = 0; i < expected; ++i) p[i] = static_cast<uint8_t>(state[static_cast<size_t>(i)].get<uint64_t>());
  try {
    gen.set_state(s);
  } catch (const c10::Error& e) {
    throw InputError(where + ": \"rng\" is not a generator state torch accepts (" + e.what_without_backtrace() + ")" +
                     damaged);
  }
}

void check_saved_architecture(const std::string& config_json, const ModelArch& arch) {
  const auto saved = nlohmann::json::parse(to_hf_config_json(load_hf_config(config_json)));
  const auto want = nlohmann::json::parse(to_hf_config_json(arch));
  std::vector<std::string> differ;
  for (auto it = want.begin(); it != want.end(); ++it)
    if (!saved.contains(it.key()) || saved[it.key()] != it.value())
      differ.push_back(it.key() + " " + (saved.contains(it.key()) ? saved[it.key()].dump() : "missing") + " (this run: " +
                       it.value().dump() + ")");
  HPCRL_CHECK_INPUT(differ.empty(), config_json << ": the saved model differs from the role it is to restore in "
                                                << str::join(differ, ", ")
                                                << "; the file was edited or the checkpoint belongs to another model: "
                                                   "restore it, or resume with the pipeline the run was started with");
}

void load_saved_model(const std::string& step_dir, Role& role) {
  const std::string dir = step_dir + "/" + role.name;
  check_saved_architecture(dir + "/config.json", role.model->arch());
  model::load_weights(*role.model, io::TensorStore(dir));  // with LoRA: the frozen base
  const bool saved_adapter = stdfs::exists(dir + "/adapter_config.json");
  auto lora = role.lora();
  HPCRL_CHECK_INPUT(saved_adapter == lora.has_value(),
                    dir << (saved_adapter ? ": the checkpoint holds a LoRA adapter but role '" + role.name +
                                                "' has no lora in this run"
                                          : ": the checkpoint has no LoRA adapter but role '" + role.name +
                                                "' has lora in this run")
                        << "; resume with the pipeline the run was started with");
  if (lora) model::load_lora_adapter(*role.model, *lora, dir);
}

namespace {
// The role's model files in `role_dir`, each model directory with the role's
// tokenizer (config/model_tokenizer.h), so it serves generate/score/eval and
// `init: {path: ...}` alone. With LoRA: the frozen base as an HF model and the
// adapter beside it (PEFT files), so a resume restores both bit-exactly, and on
// request the merged model under merged/.
void save_role_model(Role& r, const std::string& role_dir) {
  const std::string tokenizer = r.config ? r.config->tokenizer : "";
  auto lora = r.lora();
  // Collective over the role's tp/ep groups. Without LoRA the merged view is the model itself.
  model::save_pretrained(*r.model, role_dir, r.writer, lora ? model::AdapterView::base : model::AdapterView::merged);
  if (r.writer) config::record_model_tokenizer(role_dir, tokenizer);
  if (!lora) return;
  model::save_lora_adapter(*r.model, *lora, role_dir, r.writer, r.config->init.kind == config::InitKind::path
                                                                    ? r.config->init.path
                                                                    : r.name);
  if (r.config->lora.save_merged) {
    if (r.writer) stdfs::create_directories(role_dir + "/merged");
    model::save_pretrained(*r.model, role_dir + "/merged", r.writer, model::AdapterView::merged);
    if (r.writer) config::record_model_tokenizer(role_dir + "/merged", tokenizer);
  }
}
}  // namespace

namespace {
std::string write_checkpoint(const std::string& stage_dir, int64_t step, const std::vector<TrainedRole>& roles,
                             const nlohmann::json& state, const dist::CommPtr& world, int64_t keep_last,
                             const std::vector<CheckpointFile>& files);
}  // namespace

std::string save_train_checkpoint(const std::string& stage_dir, int64_t step, const std::vector<TrainedRole>& roles,
                                  const nlohmann::json& state, const dist::CommPtr& world, int64_t keep_last,
                                  const std::vector<CheckpointFile>& files) {
  trace::ScopedSpan span("checkpoint/save", {{"step", double(step)}});
  const std::string previous = latest_checkpoint(stage_dir);
  try {
    return write_checkpoint(stage_dir, step, roles, state, world, keep_last, files);
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {  // a failed write, or the file system's own error (std::filesystem)
    // The new step is written beside the old ones and renamed into place only when complete.
    throw RuntimeError("checkpoint of step " + std::to_string(step) + " not written: " + e.what() + ". " +
                       (previous.empty() ? "No earlier checkpoint of this stage exists"
                                         : "The previous one, " + previous + ", is intact: --resume continues from it"));
  }
}

namespace {
std::string write_checkpoint(const std::string& stage_dir, int64_t step, const std::vector<TrainedRole>& roles,
                             const nlohmann::json& state, const dist::CommPtr& world, int64_t keep_last,
                             const std::vector<CheckpointFile>& files) {
  const int rank = world->rank();
  const std::string final_dir = stage_dir + "/" + step_name(step);
  const std::string partial = final_dir + ".partial";
  if (rank == 0) {
    stdfs::remove_all(partial);  // left over from a crash mid-save
    stdfs::create_directories(partial);
  }
  world->barrier();
  nlohmann::json full_state = state;
  full_state["step"] = step;
  for (const auto& tr : roles) {
    Role& r = *tr.role;
    const std::string role_dir = partial + "/" + r.name;
    if (r.member()) {
      if (r.writer) stdfs::create_directories(role_dir);
      save_role_model(r, role_dir);
      if (tr.optimizer) {
        stdfs::create_directories(role_dir);
        io::NamedTensors t;
        for (auto& [k, v] : tr.optimizer->state()) t.emplace_back(k, v);
        io::save_tensors(optimizer_file(role_dir, rank), t);
      }
    }
    full_state["layout"][r.name] = layout_of(tr, world->size());
  }
  for (const auto& f : files) {
    const stdfs::path path = stdfs::path(partial) / f.path;
    stdfs::create_directories(path.parent_path());
    fs::write_file_atomic(path.string(), std::string(f.bytes.begin(), f.bytes.end()));
  }
  full_state["rng"] = rng_state();
  // This step has a manifest: without one on resume, its files cannot be checked (it was deleted).
  full_state["manifest"] = io::kManifestFile;
  world->barrier();  // every rank's files are complete
  if (rank == 0) fs::write_file_atomic(partial + "/state.json", full_state.dump(1));
  write_checkpoint_manifest(partial, world);
  if (rank == 0) {
    if (stdfs::exists(final_dir)) stdfs::remove_all(final_dir);
    stdfs::rename(partial, final_dir);
    prune(stage_dir, keep_last);
    spdlog::info("checkpoint written: {}", final_dir);
  }
  world->barrier();
  return final_dir;
}
}  // namespace

nlohmann::json load_train_checkpoint(const std::string& step_dir, const std::vector<TrainedRole>& roles,
                                     const dist::CommPtr& world) {
  const std::string state_path = step_dir + "/state.json";
  nlohmann::json state = read_checkpoint_state(step_dir);
  for (const auto& tr : roles) {
    Role& r = *tr.role;
    auto want = layout_of(tr, world->size());
    HPCRL_CHECK_INPUT(state.contains("layout") && state["layout"].contains(r.name),
                      state_path << ": no layout recorded for role '" << r.name << "'; the checkpoint belongs to "
                                    "another pipeline");
    auto have = state["layout"][r.name];
    const bool reshard = have != want && only_dp_differs(have, want);
    HPCRL_CHECK_INPUT(have == want || reshard, state_path << ": role '" << r.name << "' was saved with layout "
                      << have.dump() << " but this run has " << want.dump()
                      << "; resume with the same tp, sp, ep, pp and optim.zero setting, only dp may change (the HF "
                         "model in " << step_dir << "/" << r.name << " loads with any layout as a fresh start)");
    if (reshard && tr.optimizer && world->rank() == r.mesh.first_rank())
      spdlog::info("role {}: optimizer state saved at dp {} recut for dp {}", r.name, have.value("dp", 0),
                   want.value("dp", 0));
    if (!r.member()) continue;
    load_saved_model(step_dir, r);
    if (tr.optimizer && reshard) {
      load_resharded_optimizer(step_dir + "/" + r.name, have.value("world", 0), *tr.optimizer);
    } else if (tr.optimizer) {
      io::TensorStore opt(optimizer_file(step_dir + "/" + r.name, world->rank()));
      std::map<std::string, at::Tensor> s;
      for (const auto& n : opt.names()) s[n] = opt.load_tensor(n);
      tr.optimizer->load_state(s);
    }
  }
  if (state.contains("rng")) set_rng_state(state["rng"], state_path);
  return state;
}

nlohmann::json read_checkpoint_state(const std::string& step_dir) {
  const std::string path = step_dir + "/state.json";
  return io::parse_checkpoint_state(fs::read_file(path, "checkpoint state"), path);
}

int64_t checkpoint_step(const std::string& step_dir) { return read_checkpoint_state(step_dir)["step"].get<int64_t>(); }

std::string latest_checkpoint(const std::string& stage_dir) {
  std::error_code ec;
  if (!stdfs::is_directory(stage_dir, ec)) return "";
  std::string best;
  for (auto& e : stdfs::directory_iterator(stage_dir)) {
    std::string n = e.path().filename().string();
    if (e.is_directory() && n.rfind("step-", 0) == 0 && n.find('.') == std::string::npos &&
        stdfs::exists(e.path() / "state.json") && n > best)
      best = n;
  }
  return best.empty() ? "" : stage_dir + "/" + best;
}

}  // namespace hpcrl::algo
