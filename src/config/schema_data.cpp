// Schema of the `data` section: each dataset is either the built-in synthetic
// arithmetic task (worked, step-by-step solutions with the answer in \boxed{})
// or a JSONL file with prompt/answer keys (GSM8K's `question`/`answer` by
// default) and the prompt-building settings a real tokenizer needs.
#include <cmath>

#include "config/schema_sections.h"

namespace hpcrl::config::schema {

namespace {

// "+", "-", "+-" or "*" ("-+" is read as "+-").
Codec<std::string> ops_codec() {
  Codec<std::string> c = text();
  c.type = "\"+\", \"-\", \"+-\" or \"*\"";
  c.read = [type = c.type](const YNode& n, const std::string& path, Reading& reading, std::string& out) {
    if (n.is_scalar() &&
        (n.scalar == "+" || n.scalar == "-" || n.scalar == "+-" || n.scalar == "-+" || n.scalar == "*")) {
      out = n.scalar == "-+" ? "+-" : n.scalar;
      return true;
    }
    reading.error(n.pos, path, "expected " + type + ", got " + n.describe(),
              "write ops: \"+\" (addition), \"-\" (subtraction), \"+-\" (both) or \"*\" (products)");
    return false;
  };
  return c;
}

Codec<SyntheticData::LongTail> long_tail_codec() {
  using S = SyntheticData::LongTail;
  return structure<S>({"a long tail of longer problems", {
      field<S>("every", [](auto& s) -> auto& { return s.every; }, integer(0, 1000000)),
      field<S>("digits", [](auto& s) -> auto& { return s.digits; }, integer(1, 15)),
      field<S>("terms", [](auto& s) -> auto& { return s.terms; }, integer(2, 6)),
  }});
}

Codec<SyntheticData::Calls> calls_codec() {
  using S = SyntheticData::Calls;
  return structure<S>({"the calculator calls of product solutions", {
      field<S>("open", [](auto& s) -> auto& { return s.open; }, text(), kRequired),
      field<S>("close", [](auto& s) -> auto& { return s.close; }, text(), kRequired),
      field<S>("reply_open", [](auto& s) -> auto& { return s.reply_open; }, text(true)),
      field<S>("reply_close", [](auto& s) -> auto& { return s.reply_close; }, text(true)),
  }});
}

Codec<SyntheticData> synthetic_codec() {
  using S = SyntheticData;
  StructSpec<S> spec{"a synthetic dataset", {
      field<S>("task", [](auto& s) -> auto& { return s.task; }, enumeration<SyntheticTask>()),
      field<S>("digits", [](auto& s) -> auto& { return s.digits; }, integer(1, 9)),
      field<S>("terms", [](auto& s) -> auto& { return s.terms; }, integer(2, 6)),
      field<S>("ops", [](auto& s) -> auto& { return s.ops; }, ops_codec()),
      field<S>("train", [](auto& s) -> auto& { return s.train; }, integer(1, 100000000)),
      field<S>("eval", [](auto& s) -> auto& { return s.eval; }, integer(0, 100000000)),
      field<S>("seed", [](auto& s) -> auto& { return s.seed; }, integer(0)),
      field<S>("long_tail", [](auto& s) -> auto& { return s.long_tail; }, long_tail_codec()),
      only_if<S>(field<S>("calls", [](auto& s) -> auto& { return s.calls; }, calls_codec()),
                 [](const S& s) { return s.calls.enabled(); }),
  }};
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    // Eval problems are distinct and train must keep at least one: bound by the operand tuples.
    double per_operand = 9 * std::pow(10.0, static_cast<double>(s.digits - 1));
    double space = std::pow(per_operand, static_cast<double>(s.terms));
    if (s.ops == "*" && s.terms != 2)
      error_at_key(reading, n, path, "terms", "products (ops: \"*\") have 2 terms",
                   "set terms: 2 or use another op");
    if (s.ops == "*" && s.digits > 4)
      error_at_key(reading, n, path, "digits", "products of up to 4-digit operands only (the answer fits the line)",
                   "use digits: 1..4");
    if (s.ops == "*" && s.long_tail.every > 0)
      error_at_key(reading, n, path, "long_tail", "applies to sums and differences, not products", "remove it");
    if (s.ops != "*" && s.calls.enabled())
      error_at_key(reading, n, path, "calls", "calculator calls are written for products (ops: \"*\") only",
                   "set ops: \"*\" or remove calls");
    if (s.long_tail.every == 1)
      error_at_key(reading, n, path, "long_tail",
                   "every: 1 would make every problem a long one, leaving no tail",
                   "use long_tail: {every: 10} for one long problem in ten (0 turns it off)");
    if (static_cast<double>(s.eval) >= space)
      error_at_key(reading, n, path, "eval",
                   "asks for " + std::to_string(s.eval) + " distinct held-out problems, but " + std::to_string(s.terms) +
                       " terms of " + std::to_string(s.digits) + " digit(s) give at most " + format_number(space) +
                       " problems and train needs some",
                   "lower eval or raise digits/terms");
  };
  return structure<S>(std::move(spec));
}

Codec<JsonlData> jsonl_codec() {
  using S = JsonlData;
  StructSpec<S> spec{"a JSONL dataset", {
      field<S>("path", [](auto& s) -> auto& { return s.path; }, text(), kRequired),
      field<S>("eval_path", [](auto& s) -> auto& { return s.eval_path; }, text(true)),
      field<S>("eval_holdout", [](auto& s) -> auto& { return s.eval_holdout; }, integer(0)),
      field<S>("prompt", [](auto& s) -> auto& { return s.prompt; }, text()),
      field<S>("answer", [](auto& s) -> auto& { return s.answer; }, text()),
      field<S>("response", [](auto& s) -> auto& { return s.response; }, text(true)),
      field<S>("answer_marker", [](auto& s) -> auto& { return s.answer_marker; }, text(true)),
      field<S>("messages", [](auto& s) -> auto& { return s.messages; }, text(true)),
      only_if<S>(field<S>("tool_reply_open", [](auto& s) -> auto& { return s.tool_reply_open; }, text(true)),
                 [](const S& s) { return !s.messages.empty(); }),
      only_if<S>(field<S>("tool_reply_close", [](auto& s) -> auto& { return s.tool_reply_close; }, text(true)),
                 [](const S& s) { return !s.messages.empty(); }),
      field<S>("chat_template", [](auto& s) -> auto& { return s.chat_template; }, enumeration<ChatTemplate>()),
      field<S>("system_prompt", [](auto& s) -> auto& { return s.system_prompt; }, text(true)),
      only_if<S>(field<S>("thinking", [](auto& s) -> auto& { return s.thinking; }, boolean()),
                 [](const S& s) { return s.chat_template == ChatTemplate::qwen3 || s.chat_template == ChatTemplate::model; }),
      field<S>("max_prompt_len", [](auto& s) -> auto& { return s.max_prompt_len; }, integer(0)),
      field<S>("max_response_len", [](auto& s) -> auto& { return s.max_response_len; }, integer(0)),
      field<S>("long_response", [](auto& s) -> auto& { return s.long_response; }, enumeration<LongResponse>()),
  }};
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    if (n.find("thinking") && s.chat_template != ChatTemplate::qwen3 && s.chat_template != ChatTemplate::model)
      error_at_key(reading, n, path, "thinking", "applies only to chat_template: qwen3 or model (as enable_thinking)",
                   "remove it or use the qwen3 or model template");
    for (const char* key : {"tool_reply_open", "tool_reply_close"})
      if (n.find(key) && s.messages.empty())
        error_at_key(reading, n, path, key, "wraps the tool messages of a conversation dataset, and this one has none",
                     "set messages: to the key of each row's conversation, or remove it");
    for (const char* key : {"prompt", "response"})
      if (n.find(key) && !s.messages.empty())
        error_at_key(reading, n, path, key,
                     "a conversation dataset reads its prompt and response from `messages` (its user message, then "
                     "the assistant and tool messages)",
                     "remove it, or remove messages");
  };
  auto inner = structure<S>(std::move(spec));
  // Shorthand: `jsonl: path/to/file.jsonl`.
  Codec<S> c = inner;
  c.read = [inner](const YNode& n, const std::string& path, Reading& reading, S& out) {
    if (n.is_scalar() && !n.scalar.empty()) {
      out.path = n.scalar;
      reading.positions[join_path(path, "path")] = n.pos;
      return true;
    }
    return inner.read(n, path, reading, out);
  };
  return c;
}

Codec<DatasetConfig> dataset_codec() {
  using S = DatasetConfig;
  StructSpec<S> spec{"a dataset", {
      only_if<S>(field<S>("synthetic", [](auto& s) -> auto& { return s.synthetic; }, synthetic_codec()),
                 [](const S& s) { return s.kind == DataKind::synthetic; }),
      only_if<S>(field<S>("jsonl", [](auto& s) -> auto& { return s.jsonl; }, jsonl_codec()),
                 [](const S& s) { return s.kind == DataKind::jsonl; }),
      field<S>("shuffle", [](auto& s) -> auto& { return s.shuffle; }, boolean()),
  }};
  spec.check = [](S& s, const YNode& n, const std::string& path, Reading& reading) {
    bool syn = n.find("synthetic") != nullptr, jsonl = n.find("jsonl") != nullptr;
    if (syn && jsonl) {
      error_at_key(reading, n, path, "jsonl", "a dataset is either synthetic or jsonl, not both",
                   "split it into two datasets with their own names");
    } else if (!syn && !jsonl && n.entries.size() == (n.find("shuffle") ? 1u : 0u)) {
      reading.error(n.pos, path, "names no source",
                "add `synthetic: {task: arithmetic, digits: 2}` or `jsonl: {path: FILE, prompt: KEY, answer: KEY}`");
    }
    s.kind = jsonl && !syn ? DataKind::jsonl : DataKind::synthetic;
  };
  return structure<S>(std::move(spec));
}

}  // namespace

Codec<std::vector<DatasetConfig>> data_codec() { return named_map(dataset_codec(), "dataset", "<dataset>"); }

}  // namespace hpcrl::config::schema
