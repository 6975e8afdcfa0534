// Dataset materialisation for a run (see data_loader.h).
#include "hpcrl/runner/data_loader.h"

#include <spdlog/spdlog.h>

#include "hpcrl/io/dataset_jsonl.h"
#include "hpcrl/io/synthetic.h"
#include "hpcrl/util/check.h"

namespace hpcrl::runner {

algo::DataSplits load_data_splits(const config::DatasetConfig& data, const config::RunConfig& run,
                                  const io::Tokenizer& tokenizer) {
  algo::DataSplits out;
  if (data.kind == config::DataKind::synthetic) {
    const auto& s = data.synthetic;
    io::SyntheticConfig sc;
    sc.digits = static_cast<int>(s.digits);
    sc.terms = static_cast<int>(s.terms);
    sc.ops = s.ops;
    sc.train = static_cast<size_t>(s.train);
    sc.eval = static_cast<size_t>(s.eval);
    sc.seed = static_cast<uint64_t>(s.seed != 0 ? s.seed : run.seed);
    sc.long_tail.every = static_cast<size_t>(s.long_tail.every);
    sc.long_tail.digits = static_cast<int>(s.long_tail.digits);
    sc.long_tail.terms = static_cast<int>(s.long_tail.terms);
    sc.calls = {s.calls.open, s.calls.close, s.calls.reply_open, s.calls.reply_close};
    auto splits = io::make_synthetic(sc);
    out.train = std::move(splits.train);
    out.eval = std::move(splits.eval);
  } else {
    const auto& j = data.jsonl;
    io::JsonlOptions o;
    o.prompt_key = j.prompt;
    o.answer_key = j.answer;
    o.response_key = j.response;
    o.answer_marker = j.answer_marker;
    o.messages_key = j.messages;
    o.conversation = {j.tool_reply_open, j.tool_reply_close};
    o.limits.max_prompt_tokens = static_cast<size_t>(j.max_prompt_len);
    o.limits.max_response_tokens = static_cast<size_t>(j.max_response_len);
    o.limits.long_response = j.long_response == config::LongResponse::truncate ? io::LongResponsePolicy::kTruncate
                                                                               : io::LongResponsePolicy::kFilter;
    o.limits.length = [&tokenizer](const std::string& text) { return tokenizer.encode(text).size(); };
    out.train = io::load_jsonl(j.path, o);
    if (!j.eval_path.empty()) {
      out.eval = io::load_jsonl(j.eval_path, o);
    } else if (j.eval_holdout > 0) {
      HPCRL_CHECK_INPUT(static_cast<size_t>(j.eval_holdout) < out.train.size(),
                        "data." << data.name << ".jsonl.eval_holdout = " << j.eval_holdout << " leaves no training rows ("
                        << out.train.size() << " rows in " << j.path << "); hold out fewer");
      out.eval.name = out.train.name + " (held out)";
      auto cut = out.train.examples.end() - j.eval_holdout;
      out.eval.examples.assign(cut, out.train.examples.end());
      out.train.examples.erase(cut, out.train.examples.end());
    }
  }
  spdlog::info("data '{}': {} train, {} eval examples ({})", data.name, out.train.size(), out.eval.size(),
               out.train.report.summary());
  return out;
}

}  // namespace hpcrl::runner
