// Keys of other trainers (src/config/foreign_keys.h): every row names a real
// hpcrl key, every foreign key written in a file gets an error at its line that
// names the hpcrl key, docs/config.md carries the table as the code has it, a
// scalar where a mapping with an obvious key belongs is told the mapping form,
// and a stage whose KL setting was refused gets no "reference is unused" warning.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "config/foreign_keys.h"
#include "hpcrl/config/loader.h"
#include "hpcrl/util/strings.h"

using namespace hpcrl;
using namespace hpcrl::config;

namespace {

// Block-style pipeline: each mapping a foreign key may sit in starts its own line, so a key can be inserted below it.
const char* kBase = R"(run:
  name: t
models:
  policy:
    init: {preset: tiny-2l}
    optim:
      zero: 0
    rollout:
      max_batch: 8
    lora:
      rank: 4
  reference: {init: {from: policy}, frozen: true}
  critic: {init: {from: policy}, head: value}
  student: {init: {preset: tiny-2l}}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, train: 100, eval: 10}}
  gsm:
    jsonl:
      path: tests/config/foreign_keys_test.cpp
stages:
  - sft:
      model: policy
      data: arith
      steps: 2
      batch: 2
  - grpo:
      policy: policy
      reference: reference
      reward: math
      data: arith
      iterations: 1
      prompts: 2
      kl: {coef: 0.01}
  - ppo:
      policy: policy
      critic: critic
      reward: math
      data: arith
      iterations: 1
      prompts: 2
  - distill:
      teacher: policy
      student: student
      data: arith
      steps: 2
      batch: 2
)";

// Where each scope's mapping starts in kBase (the line before the insertion), its indentation, and its path as
// written there.
struct Place {
  std::string line, indent, written;
};
const std::map<std::string, Place>& places() {
  static const std::map<std::string, Place> p{
      {"", {"rewards:", "", ""}},
      {"run", {"run:", "  ", "run"}},
      {"models.<role>", {"  policy:", "    ", "models.policy"}},
      {"models.<role>.optim", {"    optim:", "      ", "models.policy.optim"}},
      {"models.<role>.rollout", {"    rollout:", "      ", "models.policy.rollout"}},
      {"models.<role>.lora", {"    lora:", "      ", "models.policy.lora"}},
      {"data.<dataset>.jsonl", {"    jsonl:", "      ", "data.gsm.jsonl"}},
      {"stages[].sft", {"  - sft:", "      ", "stages[0].sft"}},
      {"stages[].grpo", {"  - grpo:", "      ", "stages[1].grpo"}},
      {"stages[].ppo", {"  - ppo:", "      ", "stages[2].ppo"}},
      {"stages[].distill", {"  - distill:", "      ", "stages[3].distill"}},
  };
  return p;
}

// kBase with `key: 1` inserted as the first entry of the mapping `scope` ("" = top level: before rewards);
// `line` gets its 1-based line number.
std::string with_key(const std::string& scope, const std::string& key, int& line) {
  const Place& at = places().at(scope);
  std::istringstream in(kBase);
  std::string out, l;
  int n = 0;
  bool done = false;
  while (std::getline(in, l)) {
    ++n;
    if (!done && scope.empty() && l == at.line) {  // top level: a line of its own before `rewards:`
      out += key + ": 1\n";
      line = n, done = true;
    }
    out += l + "\n";
    if (!done && !scope.empty() && l == at.line) {
      out += at.indent + key + ": 1\n";
      line = n + 1, done = true;
      ++n;
    }
  }
  EXPECT_TRUE(done) << scope;
  return out;
}

std::vector<std::string> all_texts(const LoadResult& r) {
  std::vector<std::string> out;
  for (const auto& e : r.diagnostics.errors) out.push_back(e.str());
  return out;
}

}  // namespace

TEST(ForeignKeys, EveryRowNamesARealKeyInAPlaceWhereItsOwnKeyIsUnknown) {
  const std::vector<std::string> keys = schema_key_paths();
  auto real = [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); };
  ASSERT_GT(foreign_keys().size(), 50u);
  for (const auto& e : foreign_keys()) {
    ASSERT_FALSE(e.scopes.empty()) << e.key;
    for (const auto& scope : e.scopes) {
      EXPECT_TRUE(real(target_in(e, scope))) << e.key << " in " << scope << " -> " << target_in(e, scope);
      EXPECT_TRUE(places().count(scope)) << e.key << ": scope " << scope << " is not one of the tested places";
      // The table is consulted only for unknown keys: a row for a real key would never be used.
      EXPECT_FALSE(real(scope.empty() ? e.key : scope + "." + e.key)) << e.key << " is an hpcrl key in " << scope;
    }
  }
}

TEST(ForeignKeys, EveryForeignKeyInAFileNamesItsHpcrlKeyAtItsLine) {
  int checked = 0;
  for (const auto& e : foreign_keys()) {
    for (const auto& scope : e.scopes) {
      // "rollout.n" in models.<role>: key n inside the role's rollout mapping.
      const size_t dot = e.key.rfind('.');
      const std::string inner = dot == std::string::npos ? scope : scope + "." + e.key.substr(0, dot);
      const std::string last = e.key.substr(dot == std::string::npos ? 0 : dot + 1);
      int line = 0;
      const std::string text = with_key(inner, last, line);
      LoadResult r = check_pipeline_text(text, "p.yaml", {}, {});
      const Place& at = places().at(inner);
      const std::string path = at.written.empty() ? last : at.written + "." + last;
      // The hpcrl key as the message shows it: beside the foreign key in the written mapping, else the schema path
      // with the role or dataset the file names.
      std::string want = target_in(e, scope);
      if (str::starts_with(e.target, "{here}.")) {
        want = places().at(scope).written + want.substr(scope.size());
      } else if (str::starts_with(want, "models.<role>") && str::starts_with(scope, "models.")) {
        want = "models.policy" + want.substr(13);
      }
      const auto texts = all_texts(r);
      auto hit = std::find_if(texts.begin(), texts.end(), [&](const std::string& t) {
        return str::starts_with(t, "p.yaml:" + std::to_string(line) + ":") &&
               t.find(": " + path + ": unknown key '" + last + "'; ") != std::string::npos;
      });
      ASSERT_NE(hit, texts.end()) << e.key << " in " << scope << ": no error for " << path << " at line " << line
                                  << ":\n" << str::join(texts, "\n");
      EXPECT_NE(hit->find(" key " + e.key + " is hpcrl's " + want), std::string::npos) << *hit;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(ForeignKeys, DocsCarryTheTableAsTheCodeHasIt) {
  std::ifstream in("docs/config.md");
  ASSERT_TRUE(in) << "docs/config.md missing";
  std::string docs((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(docs.find(foreign_keys_markdown()), std::string::npos)
      << "docs/config.md's table of other tools' keys differs from src/config/foreign_keys.cpp; paste:\n"
      << foreign_keys_markdown();
}

TEST(ForeignKeys, AKeyBesideItsHpcrlNameSuggestsItAndTheRequiredKeyIsNotReportedMissing) {
  std::string text = kBase;
  text.replace(text.find("      prompts: 2\n      kl"), 17, "      train_batch_size: 2\n");
  LoadResult r = check_pipeline_text(text, "p.yaml", {}, {});
  // The file's line 34 (`train_batch_size: 2` in place of `prompts: 2`): one error, not a second for `prompts`.
  EXPECT_EQ(all_texts(r), std::vector<std::string>{
      "p.yaml:34:7: stages[1].grpo.train_batch_size: unknown key 'train_batch_size'; did you mean 'prompts'? (the "
      "veRL / OpenRLHF key train_batch_size is hpcrl's stages[1].grpo.prompts; veRL's counts prompts per iteration, "
      "as prompts does; OpenRLHF's counts responses per optimizer step, which is hpcrl's mini_batch)"});
}

TEST(ForeignKeys, ScalarKlIsToldTheMappingForm) {
  std::string text = kBase;
  text.replace(text.find("kl: {coef: 0.01}"), 16, "kl: 0.001");
  LoadResult r = check_pipeline_text(text, "p.yaml", {}, {});
  ASSERT_EQ(r.diagnostics.errors.size(), 1u) << str::join(all_texts(r), "\n");
  EXPECT_EQ(r.diagnostics.errors[0].str(),
            "p.yaml:35:11: stages[1].grpo.kl: expected a mapping (KL settings), got '0.001'; write the mapping form "
            "`kl: {coef: 0.001}` (valid keys: coef, estimator, in_reward)");
}

TEST(ForeignKeys, AnyMappingWithAnObviousKeyTellsTheMappingForm) {
  std::string text = kBase;
  text.replace(text.find("    lora:\n      rank: 4\n"), 24, "    lora: 8\n");
  text += "placement: disaggregated\n";
  LoadResult r = check_pipeline_text(text, "p.yaml", {}, {});
  const auto texts = str::join(all_texts(r), "\n");
  EXPECT_NE(texts.find("models.policy.lora: expected a mapping (LoRA adapters), got '8'; write the mapping form "
                       "`lora: {rank: 8}`"),
            std::string::npos)
      << texts;
  EXPECT_NE(texts.find("placement: expected a mapping (the placement section), got 'disaggregated'; write the "
                       "mapping form `placement: {mode: disaggregated}`"),
            std::string::npos)
      << texts;
}

TEST(ForeignKeys, AMappingWithoutAnObviousKeyListsItsKeys) {
  std::string text = kBase;
  text.replace(text.find("    optim:\n      zero: 0\n"), 24, "    optim: 1\n");
  LoadResult r = check_pipeline_text(text, "p.yaml", {}, {});
  const auto texts = str::join(all_texts(r), "\n");
  EXPECT_NE(texts.find("models.policy.optim: expected a mapping (optimizer settings), got '1'; write `key: value` "
                       "entries; valid keys: betas, eps, zero, bucket_mb"),
            std::string::npos)
      << texts;
}

namespace {
bool warns_unused_reference(const LoadResult& r) {
  return std::any_of(r.diagnostics.warnings.begin(), r.diagnostics.warnings.end(),
                     [](const Diagnostic& w) { return w.message.find("loaded but unused") != std::string::npos; });
}
}  // namespace

TEST(ForeignKeys, ARefusedKlSettingDoesNotAlsoWarnThatTheReferenceIsUnused) {
  std::string scalar = kBase, foreign = kBase, absent = kBase;
  scalar.replace(scalar.find("kl: {coef: 0.01}"), 16, "kl: 0.001");
  foreign.replace(foreign.find("kl: {coef: 0.01}"), 16, "kl_coef: 0.001");
  absent.replace(absent.find("      kl: {coef: 0.01}\n"), 23, "");
  EXPECT_FALSE(warns_unused_reference(check_pipeline_text(scalar, "p.yaml", {}, {})));
  EXPECT_FALSE(warns_unused_reference(check_pipeline_text(foreign, "p.yaml", {}, {})));
  // The warning itself still comes where it is true: a reference with no kl at all.
  EXPECT_TRUE(warns_unused_reference(check_pipeline_text(absent, "p.yaml", {}, {})));
}
