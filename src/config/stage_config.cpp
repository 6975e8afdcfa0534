// What each stage kind trains, reads, counts and evaluates (pipeline_config.h):
// the per-kind overloads, and StageConfig's members, each one visit over the
// stage's body.
#include <type_traits>
#include <utility>

#include "hpcrl/config/pipeline_config.h"

namespace hpcrl::config {

namespace {
std::vector<std::string> nonempty(const std::string& role) {
  if (role.empty()) return {};
  return {role};
}

// StageBody's alternatives are in StageKind's order.
template <class T, StageKind K>
constexpr bool at_index_of = std::is_same_v<std::variant_alternative_t<static_cast<size_t>(K), StageBody>, T>;
static_assert(at_index_of<SftStage, StageKind::sft> && at_index_of<GrpoStage, StageKind::grpo> &&
              at_index_of<PpoStage, StageKind::ppo> && at_index_of<DistillStage, StageKind::distill> &&
              std::variant_size_v<StageBody> == 4);

// The body of alternative `index`, default-constructed.
template <size_t... I>
StageBody body_at(size_t index, std::index_sequence<I...>) {
  StageBody body;
  ((index == I ? (void)body.emplace<I>() : (void)0), ...);
  return body;
}
}  // namespace

std::vector<std::string> trained_roles(const SftStage& s) { return {s.model}; }
std::vector<std::string> trained_roles(const GrpoStage& s) { return {s.policy}; }
std::vector<std::string> trained_roles(const PpoStage& s) { return {s.policy, s.critic}; }
std::vector<std::string> trained_roles(const DistillStage& s) { return {s.student}; }

std::vector<std::string> read_roles(const SftStage&) { return {}; }
std::vector<std::string> read_roles(const GrpoStage& s) { return nonempty(s.reference); }
std::vector<std::string> read_roles(const PpoStage& s) { return nonempty(s.reference); }
std::vector<std::string> read_roles(const DistillStage& s) { return nonempty(s.teacher); }

const std::string& evaluated_role(const SftStage& s) { return s.model; }
const std::string& evaluated_role(const GrpoStage& s) { return s.policy; }
const std::string& evaluated_role(const PpoStage& s) { return s.policy; }
const std::string& evaluated_role(const DistillStage& s) { return s.student; }

int64_t configured_steps(const SftStage& s) { return s.steps; }
int64_t configured_steps(const GrpoStage& s) { return s.iterations; }
int64_t configured_steps(const PpoStage& s) { return s.iterations; }
int64_t configured_steps(const DistillStage& s) { return s.steps; }

const char* step_unit(const SftStage&) { return "steps"; }
const char* step_unit(const GrpoStage&) { return "iterations"; }
const char* step_unit(const PpoStage&) { return "iterations"; }
const char* step_unit(const DistillStage&) { return "steps"; }

int64_t sequences_per_step(const SftStage& s) { return s.batch; }
int64_t sequences_per_step(const GrpoStage& s) { return s.responses(); }
int64_t sequences_per_step(const PpoStage& s) { return s.responses(); }
int64_t sequences_per_step(const DistillStage& s) { return s.batch; }

StageKind StageConfig::kind() const { return static_cast<StageKind>(body.index()); }

const RlStage* StageConfig::rl() const {
  if (const auto* g = as<GrpoStage>()) return g;
  if (const auto* p = as<PpoStage>()) return p;
  return nullptr;
}

RlStage* StageConfig::rl() { return const_cast<RlStage*>(static_cast<const StageConfig&>(*this).rl()); }

std::vector<std::string> StageConfig::trained_roles() const {
  return std::visit([](const auto& s) { return config::trained_roles(s); }, body);
}

std::vector<std::string> StageConfig::used_roles() const {
  std::vector<std::string> roles = trained_roles();
  for (auto& r : std::visit([](const auto& s) { return read_roles(s); }, body)) roles.push_back(std::move(r));
  return roles;
}

const std::string& StageConfig::data() const {
  return std::visit([](const auto& s) -> const std::string& { return s.data; }, body);
}

const std::string& StageConfig::evaluated_role() const {
  return std::visit([](const auto& s) -> const std::string& { return config::evaluated_role(s); }, body);
}

int64_t StageConfig::eval_every() const {
  return std::visit([](const auto& s) { return s.eval_every; }, body);
}

int64_t StageConfig::configured_steps() const {
  return std::visit([](const auto& s) { return config::configured_steps(s); }, body);
}

const char* StageConfig::step_unit() const {
  return std::visit([](const auto& s) { return config::step_unit(s); }, body);
}

int64_t StageConfig::sequences_per_step() const {
  return std::visit([](const auto& s) { return config::sequences_per_step(s); }, body);
}

StageBody default_body(StageKind kind) {
  return body_at(static_cast<size_t>(kind), std::make_index_sequence<std::variant_size_v<StageBody>>{});
}

}  // namespace hpcrl::config
