// Real HF chat templates (data/chat_templates/*.jinja) rendered by hpcrl's
// Jinja interpreter against the same templates rendered by Python's jinja2 in
// transformers' environment (render_reference.py, run once per template with
// Debian's /usr/bin/python3 and python3-jinja2): byte for byte, or both
// failing. Seven conversations per template: system + user, multi-turn, an
// assistant turn with <think> reasoning, tool calls with a tools list and
// tool replies (arguments as a JSON string and as an object), non-ASCII
// text, and a bare user turn without the generation prompt and with
// enable_thinking=false. Where jinja2 refuses a case (DeepSeek's template
// concatenates the arguments as a string), the C++ render must refuse it too.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <unistd.h>

#include "hpcrl/io/jinja.h"
#include "hpcrl/util/error.h"

namespace hpcrl::io::jinja {
namespace {

using json = nlohmann::ordered_json;

const char* const kTemplates[] = {"qwen2.5-instruct", "qwen3", "llama3", "llama-3.2-instruct",
                                  "mistral-nemo-instruct-2407", "deepseek-r1-distill-qwen"};

// The special tokens each model's tokenizer_config.json passes as bos_token/eos_token.
json special_tokens(const std::string& tmpl) {
  if (tmpl.rfind("llama", 0) == 0) return {{"bos_token", "<|begin_of_text|>"}, {"eos_token", "<|eot_id|>"}};
  if (tmpl.rfind("mistral", 0) == 0) return {{"bos_token", "<s>"}, {"eos_token", "</s>"}};
  if (tmpl.rfind("deepseek", 0) == 0)
    return {{"bos_token", "<｜begin▁of▁sentence｜>"}, {"eos_token", "<｜end▁of▁sentence｜>"}};
  return {{"bos_token", nullptr}, {"eos_token", "<|im_end|>"}};
}

const std::map<std::string, std::string>& conversations() {
  static const std::map<std::string, std::string> c = {
      {"system_user", R"({"add_generation_prompt": true, "messages": [
          {"role": "system", "content": "You are a careful math tutor."},
          {"role": "user", "content": "What is 12 * 7?"}]})"},
      {"multi_turn", R"({"add_generation_prompt": false, "messages": [
          {"role": "user", "content": "  Hi there.  "},
          {"role": "assistant", "content": "Hello! How can I help?"},
          {"role": "user", "content": "Add 2 and 3."},
          {"role": "assistant", "content": "2 + 3 = 5."}]})"},
      {"thinking", R"({"add_generation_prompt": true, "messages": [
          {"role": "system", "content": "Reason step by step."},
          {"role": "user", "content": "Is 91 prime?"},
          {"role": "assistant", "content": "<think>\n91 = 7 * 13.\n</think>\n\nNo, 91 = 7 * 13."},
          {"role": "user", "content": "And 97?"}]})"},
      {"tools", R"({"add_generation_prompt": true,
          "tools": [{"type": "function", "function": {"name": "get_weather",
              "description": "Current weather of a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
          "messages": [
          {"role": "user", "content": "Weather in Paris?"},
          {"role": "assistant", "content": "", "tool_calls": [{"id": "call00001", "type": "function",
              "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
          {"role": "tool", "tool_call_id": "call00001", "content": "{\"temp_c\": 21}"}]})"},
      {"tools_object_arguments", R"({"add_generation_prompt": false,
          "tools": [{"type": "function", "function": {"name": "add", "description": "a + b",
              "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "number"}}}}}],
          "messages": [
          {"role": "system", "content": "Use tools."},
          {"role": "user", "content": "2 + 0.5?"},
          {"role": "assistant", "content": "", "tool_calls": [{"id": "call00002", "type": "function",
              "function": {"name": "add", "arguments": {"b": 0.5, "a": 2}}}]},
          {"role": "tool", "tool_call_id": "call00002", "content": "2.5"},
          {"role": "assistant", "content": "2.5"}]})"},
      {"non_ascii", R"({"add_generation_prompt": true, "messages": [
          {"role": "system", "content": "Réponds en français. 回答要简短。"},
          {"role": "user", "content": "Grüße! ½ + ¼ = ? 😀 \"quoted\" \\ back\tslash"},
          {"role": "assistant", "content": "¾ — voilà."},
          {"role": "user", "content": "Merci\u00a0!"}]})"},
      {"user_only_no_generation", R"({"add_generation_prompt": false, "enable_thinking": false, "messages": [
          {"role": "user", "content": "Say OK."}]})"},
  };
  return c;
}

std::string template_path(const std::string& name) {
  return std::string(HPCRL_DATA_DIR) + "/chat_templates/" + name + ".jinja";
}

json context_for(const std::string& tmpl, const std::string& conv) {
  json ctx = json::parse(conversations().at(conv));
  json tokens = special_tokens(tmpl);
  for (auto it = tokens.begin(); it != tokens.end(); ++it) ctx[it.key()] = it.value();
  return ctx;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The reference renders of one template's conversations, by one Python process
// (ctest runs each test in its own process, so a test asks only for its template).
std::map<std::string, json> reference(const std::string& tmpl) {
  json cases = json::array();
  std::vector<std::string> keys;
  for (const auto& [conv, text] : conversations()) {
    cases.push_back({{"template", template_path(tmpl)}, {"context", context_for(tmpl, conv)}});
    keys.push_back(conv);
  }
  auto dir = std::filesystem::temp_directory_path() / ("hpcrl-jinja-ref-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream((dir / "cases.json").string()) << cases.dump();
  std::string cmd = "/usr/bin/python3 " + std::string(HPCRL_SOURCE_DIR) + "/tests/chat_template/render_reference.py " +
                    (dir / "cases.json").string() + " > " + (dir / "out.json").string();
  int rc = std::system(cmd.c_str());
  std::string out = read_file((dir / "out.json").string());
  std::filesystem::remove_all(dir);
  std::map<std::string, json> results;
  if (rc != 0 || out.empty()) return results;
  json parsed = json::parse(out);
  for (size_t i = 0; i < keys.size() && i < parsed.size(); ++i) results[keys[i]] = parsed[i];
  return results;
}

RenderOptions fixed_date() {
  RenderOptions o;
  std::tm t{};
  t.tm_year = 2024 - 1900;  // 26 Jul 2024, as render_reference.py's FIXED_NOW
  t.tm_mon = 6;
  t.tm_mday = 26;
  t.tm_hour = 12;
  t.tm_wday = 5;
  t.tm_yday = 207;
  o.now = t;
  return o;
}

class ReferenceRender : public ::testing::TestWithParam<const char*> {};

// Each of the template's conversations renders what jinja2 renders, or fails where jinja2 fails.
TEST_P(ReferenceRender, EveryConversationMatchesPythonJinja2ByteForByte) {
  const std::string tmpl = GetParam();
  auto ref = reference(tmpl);
  ASSERT_EQ(ref.size(), conversations().size())
      << "render_reference.py produced no result: /usr/bin/python3 needs python3-jinja2 "
         "(bash scripts/install-deps.sh)";
  Template t = Template::compile(read_file(template_path(tmpl)), tmpl);
  for (const auto& [conv, text] : conversations()) {
    SCOPED_TRACE(tmpl + " / " + conv);
    const json& expected = ref.at(conv);
    if (expected.contains("error")) {
      EXPECT_THROW(t.render(context_for(tmpl, conv), fixed_date()), InputError)
          << "jinja2 refused this case: " << expected["error"].get<std::string>();
      continue;
    }
    EXPECT_EQ(t.render(context_for(tmpl, conv), fixed_date()), expected["output"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ReferenceRender, ::testing::ValuesIn(kTemplates), [](const auto& info) {
  std::string n = info.param;
  for (char& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

}  // namespace
}  // namespace hpcrl::io::jinja
