// The closed sets of words a pipeline file may use (device: cpu|cuda, loss_agg:
// token_mean|..., ...), as enums whose YAML spelling is the enumerator's own
// name, so the schema, the renderer, error messages and consumers share one
// list and can never drift apart. An enumerator that cannot be a C++ identifier
// (a leading digit, as in "1f1b") is written with a leading underscore, which
// the YAML spelling drops.
//
//   std::string s = config::to_string(LossAgg::token_mean);      // "token_mean"
//   std::optional<KlEstimator> k = config::parse_enum<KlEstimator>("k3");
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace hpcrl::config {

namespace detail {
// "cpu, cuda" -> {"cpu", "cuda"}; drops one leading '_' per name.
std::vector<std::string> split_enum_names(const char* stringified);
}  // namespace detail

#define HPCRL_CONFIG_ENUM(Name, ...)                                                 \
  enum class Name { __VA_ARGS__ };                                                   \
  inline const std::vector<std::string>& enum_names(Name) {                          \
    static const std::vector<std::string> names = detail::split_enum_names(#__VA_ARGS__); \
    return names;                                                                    \
  }                                                                                  \
  inline const char* enum_type_name(Name) { return #Name; }

HPCRL_CONFIG_ENUM(Device, cpu, cuda)
HPCRL_CONFIG_ENUM(DType, float32, bfloat16)
HPCRL_CONFIG_ENUM(InitKind, preset, path, from)
HPCRL_CONFIG_ENUM(Head, lm, value)
HPCRL_CONFIG_ENUM(PpSchedule, _1f1b, gpipe, interleaved)
// rollout::DecodeStep's names (rollout/engine.h): how a rollout engine runs its decode steps.
HPCRL_CONFIG_ENUM(DecodeStep, dynamic, fixed, graphs)
HPCRL_CONFIG_ENUM(RewardType, verifiable, model, command, environment)
HPCRL_CONFIG_ENUM(ToolType, calculator, command, environment)
// How a model writes a tool call (tools/tool_call.h): Qwen's <tool_call> JSON, or configured tags.
HPCRL_CONFIG_ENUM(ToolFormat, qwen, tags)
HPCRL_CONFIG_ENUM(ToolCallBody, json, text)
HPCRL_CONFIG_ENUM(ToolErrorAction, observation, end)
// reward::Extractor's names (algo/objectives/reward_fn.cpp maps one to the other, case by case).
HPCRL_CONFIG_ENUM(Extractor, boxed, answer_tag, answer_is, hash, last_number)
HPCRL_CONFIG_ENUM(DataKind, synthetic, jsonl)
HPCRL_CONFIG_ENUM(SyntheticTask, arithmetic)
// model: the tokenizer's own Jinja chat_template (io/chat_template.h); the others are fixed renderers.
HPCRL_CONFIG_ENUM(ChatTemplate, none, chatml, qwen3, llama3, model)
HPCRL_CONFIG_ENUM(LongResponse, filter, truncate)
HPCRL_CONFIG_ENUM(PlacementMode, colocated, disaggregated)
HPCRL_CONFIG_ENUM(StageKind, sft, grpo, ppo, distill)
HPCRL_CONFIG_ENUM(LrSchedule, constant, linear, cosine)
HPCRL_CONFIG_ENUM(KlEstimator, k1, k2, k3)
HPCRL_CONFIG_ENUM(LossAgg, token_mean, seq_mean_token_sum, seq_mean_token_mean)
HPCRL_CONFIG_ENUM(AdvantageEstimator, grpo, rloo, reinforce_pp, reinforce_pp_baseline)
HPCRL_CONFIG_ENUM(StdNorm, group, batch, none)
HPCRL_CONFIG_ENUM(PolicyLossKind, ppo_clip, gspo, gspo_token, cispo)
HPCRL_CONFIG_ENUM(DistillLoss, forward_kl, reverse_kl, jsd)
HPCRL_CONFIG_ENUM(OnNonFinite, stop, skip_step)

#undef HPCRL_CONFIG_ENUM

template <class E>
const std::string& to_string(E e) {
  return enum_names(e)[static_cast<size_t>(e)];
}

// All spellings of E, in declaration order.
template <class E>
const std::vector<std::string>& names_of() {
  return enum_names(E{});
}

template <class E>
std::optional<E> parse_enum(const std::string& word) {
  const auto& names = names_of<E>();
  for (size_t i = 0; i < names.size(); ++i)
    if (names[i] == word) return static_cast<E>(i);
  return std::nullopt;
}

}  // namespace hpcrl::config
