// One `--set KEY=VALUE` string applied to a valid pipeline (config/loader.h):
// key paths with list indices, YAML values, appends one past the end.
#include "fuzz_util.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/config/render.h"

namespace {
const char* const kPipeline = R"(run: {name: fuzz, seed: 1}
models:
  policy:    {init: {preset: tiny-2l}}
  reference: {init: {from: policy}, frozen: true}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, train: 100, eval: 10}}
stages:
  - sft:  {model: policy, data: arith, steps: 4, batch: 8}
  - grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 2, prompts: 4, group: 2,
           kl: {coef: 0.01}}
)";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  hpcrl::config::ValidateOptions opt;
  opt.world = 2;
  auto res = hpcrl::config::check_pipeline_text(kPipeline, "fuzz.yaml", {std::string(hpcrl::fuzz::as_text(data, size))},
                                                opt);
  for (const auto& e : res.diagnostics.errors) (void)e.str();
  if (res.ok()) (void)hpcrl::config::to_yaml(res.config);
  return 0;
}
