// A stage's evaluations from its config (eval_work.h).
#include "hpcrl/cost/eval_work.h"

#include <algorithm>

namespace hpcrl::cost {
namespace {
// Rows of the dataset's eval split, or -1 when only reading it would tell.
int64_t eval_split_rows(const config::DatasetConfig& d) {
  if (d.kind == config::DataKind::synthetic) return d.synthetic.eval;
  if (d.jsonl.eval_path.empty()) return d.jsonl.eval_holdout;
  return -1;
}
}  // namespace

int64_t evaluations_in_stage(int64_t steps, int64_t eval_every, bool before_train) {
  int64_t n = before_train ? 1 : 0;
  if (eval_every > 0) n += steps / eval_every + (steps % eval_every != 0 ? 1 : 0);
  else n += 1;
  return n;
}

EvalWork eval_work(const config::PipelineConfig& cfg, const config::StageConfig& st) {
  const auto& es = cfg.run.eval_sampling;
  EvalWork w;
  w.role = st.evaluated_role();
  w.samples_per_prompt = es.n;
  w.max_new_tokens = es.max_new_tokens;
  const config::DatasetConfig* data = cfg.find_data(st.data());
  const int64_t rows = data ? eval_split_rows(*data) : 0;
  if (rows == 0) return w;  // no eval split: the stage does not evaluate
  if (es.prompts > 0) {
    w.prompts = rows > 0 ? std::min(es.prompts, rows) : es.prompts;
  } else {
    w.prompts = std::max<int64_t>(rows, 0);
    w.prompts_known = rows > 0;
  }
  w.evaluations = evaluations_in_stage(st.configured_steps(), st.eval_every(), cfg.run.eval_before_train);
  return w;
}

std::string eval_note(const config::StageConfig& stage, const EvalWork& w, int64_t threshold) {
  if (!w.prompts_known)
    return stage.path + ": each of its evaluations decodes the whole eval split (run.eval_sampling.prompts: 0), "
           "whose size is known only once it is read; set run.eval_sampling.prompts to bound it";
  if (w.max_tokens_each() <= threshold) return "";
  return stage.path + ": each of its " + std::to_string(w.evaluations) + " evaluation(s) decodes up to " +
         std::to_string(w.prompts) + " prompts x " + std::to_string(w.samples_per_prompt) + " sample(s) x " +
         std::to_string(w.max_new_tokens) + " tokens = " + std::to_string(w.max_tokens_each()) +
         " tokens (run.eval_sampling); `hpcrl plan --estimate` gives its seconds, and run.eval_sampling.prompts, "
         ".max_new_tokens or the stage's eval_every make it cheaper";
}

}  // namespace hpcrl::cost
