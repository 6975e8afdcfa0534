// `hpcrl tokenize`: shows how a tokenizer cuts a text — ids and raw pieces —
// the first thing to check when a run's prompts or rewards look wrong.
//   hpcrl tokenize --tokenizer DIR|FILE|byte --text "..." [--special] [--json]
// --json prints exactly {"ids": [..], "pieces": [..]} (docs/tokenizers.md).
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>

#include "cli/command.h"
#include "hpcrl/io/tokenizer.h"

namespace {

struct Options {
  std::string tokenizer, text;
  bool json = false, special = false;
};

int run(const Options& o) {
  auto tok = hpcrl::io::load_tokenizer(o.tokenizer);
  std::vector<int32_t> ids = tok->encode(o.text, o.special);
  std::vector<std::string> pieces = tok->pieces(ids);
  if (o.json) {
    nlohmann::ordered_json doc;
    doc["ids"] = ids;
    doc["pieces"] = pieces;
    std::printf("%s\n", doc.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return 0;
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    // Pieces are quoted as JSON strings so control characters stay visible.
    std::string quoted = nlohmann::json(pieces[i]).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    std::printf("%6zu %8d %s%s\n", i, ids[i], quoted.c_str(), tok->is_special(ids[i]) ? "  (special)" : "");
  }
  std::printf("%zu tokens, %zu bytes\n", ids.size(), o.text.size());
  return 0;
}

hpcrl::cli::Registration reg{"tokenize", 50, [](CLI::App& app) {
  static Options o;
  auto* sub = app.add_subcommand("tokenize", "Show the token ids and pieces of a text");
  sub->add_option("--tokenizer", o.tokenizer,
                  "Directory with tokenizer.json, a tokenizer.json file, or 'byte' (the built-in byte tokenizer)")
      ->required();
  sub->add_option("--text", o.text, "Text to tokenize (special tokens such as <|im_start|> are matched)")
      ->required();
  sub->add_flag("--special", o.special, "Add the tokenizer's own special tokens around the text (e.g. BOS)");
  sub->add_flag("--json", o.json, "Print {\"ids\": [..], \"pieces\": [..]} on stdout");
  return [] { return run(o); };
}};

}  // namespace
