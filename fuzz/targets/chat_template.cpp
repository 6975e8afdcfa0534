// Chat templates: a tokenizer_config.json Jinja template recognised (or not)
// as one of the fixed renderers, and conversations rendered by each renderer
// (io/chat_template.h). Input: the Jinja text, a NUL byte, then one message
// per line as ROLE<TAB>CONTENT.
#include "fuzz_util.h"
#include "hpcrl/io/chat_template.h"
#include "hpcrl/util/error.h"

namespace {
std::vector<hpcrl::io::ChatMessage> messages_of(std::string_view text) {
  std::vector<hpcrl::io::ChatMessage> out;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    size_t tab = line.find('\t');
    if (tab == std::string_view::npos) out.push_back({"user", std::string(line)});
    else out.push_back({std::string(line.substr(0, tab)), std::string(line.substr(tab + 1))});
    if (eol == std::string_view::npos) break;
    text.remove_prefix(eol + 1);
  }
  return out;
}

void render_all(const hpcrl::io::ChatTemplate& t, const std::vector<hpcrl::io::ChatMessage>& msgs) {
  for (bool gen : {false, true})
    for (bool think : {false, true}) {
      try {
        (void)t.render(msgs, gen, think);
      } catch (const hpcrl::InputError&) {  // an unknown role
      }
    }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto [jinja, conversation] = hpcrl::fuzz::split_at_nul(hpcrl::fuzz::as_text(data, size));
  const auto msgs = messages_of(conversation);
  if (auto t = hpcrl::io::ChatTemplate::detect(std::string(jinja))) render_all(*t, msgs);
  for (const auto& name : hpcrl::io::chat_template_names())
    render_all(hpcrl::io::ChatTemplate::named(*hpcrl::config::parse_enum<hpcrl::config::ChatTemplate>(name)), msgs);
  render_all(hpcrl::io::ChatTemplate::chatml(std::string(jinja.substr(0, 64))), msgs);
  return 0;
}
