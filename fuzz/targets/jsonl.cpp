// The JSONL files hpcrl reads row by row: a dataset (io/dataset_jsonl.h, with
// token limits counted in bytes and both long-response policies, read by keys
// and as conversations) and a
// `generate` prompt file (rollout/prompt_file.h) — the same bytes as both.
#include "fuzz_util.h"
#include "hpcrl/io/dataset_jsonl.h"
#include "hpcrl/io/tokenizer_byte.h"
#include "hpcrl/rollout/prompt_file.h"
#include "hpcrl/util/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = hpcrl::fuzz::write_scratch("rows.jsonl", hpcrl::fuzz::as_text(data, size));
  for (auto policy : {hpcrl::io::LongResponsePolicy::kFilter, hpcrl::io::LongResponsePolicy::kTruncate}) {
    hpcrl::io::JsonlOptions o;
    o.limits.max_prompt_tokens = 64;
    o.limits.max_response_tokens = 48;
    o.limits.long_response = policy;
    o.limits.length = [](const std::string& s) { return s.size(); };
    try {
      (void)hpcrl::io::load_jsonl(path, o);
    } catch (const hpcrl::InputError&) {
    }
    o.messages_key = "messages";  // the same rows as conversations with a tool role (io/dataset_conversation.h)
    o.conversation = {"<result>", "</result>"};
    try {
      (void)hpcrl::io::load_jsonl(path, o);
    } catch (const hpcrl::InputError&) {
    }
  }
  static const hpcrl::io::ByteTokenizer tok;
  for (auto tmpl : {hpcrl::config::ChatTemplate::model, hpcrl::config::ChatTemplate::none,
                    hpcrl::config::ChatTemplate::chatml}) {
    try {
      (void)hpcrl::rollout::read_prompt_file(path, tok, tok.vocab_size(), tmpl);
    } catch (const hpcrl::InputError&) {
    }
  }
  return 0;
}
