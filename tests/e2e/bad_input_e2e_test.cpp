// Bad input never costs a user their run: every input is read and checked
// before the run directory is touched (so a data error leaves nothing behind
// and --force replaces nothing), rows that cannot fit the model are refused at
// load with their file:line, `validate` reads the data and the weights too,
// and on --resume a changed config, an edited or damaged checkpoint, or absurd
// saved values are refused with the file and the reason — or, when an older
// intact checkpoint exists, the run continues from it with a warning.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>

#include "run_util.h"

using namespace hpcrl::test;
namespace fs = std::filesystem;

namespace {
const std::string kConfig = "tests/e2e/data/tiny.yaml";
// SFT alone, 4 steps with a checkpoint every 2: a finished run in a few seconds.
const std::string kSft = kConfig + " --set 'stages=[{sft: {model: policy, data: arith, steps: 4, batch: 8}}]'" +
                         " --set run.checkpoint_every=2 --set run.keep_last=3 --set run.eval_before_train=false";

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// The tiny pipeline's SFT reading DIR/rows.jsonl (written from `rows`) instead of the synthetic task.
std::string sft_on_rows(const std::string& dir, const std::string& rows) {
  write(dir + "/rows.jsonl", rows);
  return kConfig + " --set 'data.rows={jsonl: {path: " + dir + "/rows.jsonl}}'" +
         " --set 'stages=[{sft: {model: policy, data: rows, steps: 2, batch: 2}}]'";
}

// XORs 4 KiB in the middle of `path` with 0xFF (the "4 KB flipped inside model.safetensors").
void flip_4k(const std::string& path) {
  std::string bytes = slurp(path);
  ASSERT_GT(bytes.size(), 8192u) << path;
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 4096; ++i) bytes[i] = static_cast<char>(bytes[i] ^ 0xFF);
  write(path, bytes);
}

std::string step_dir(const std::string& run, int step) {
  char name[32];
  std::snprintf(name, sizeof name, "/step-%06d", step);
  return run + "/checkpoints/00-sft" + name;
}
}  // namespace

TEST(BadInputE2E, AMalformedDatasetRowLeavesNoRunDirectory) {
  const std::string dir = scratch_dir("bad-row");
  Proc p = run_hpcrl("run " + sft_on_rows(dir, "{\"question\": \"q\", \"answer\": \"1\"}\n{\"question\": \"q\",\n") +
                     " --out " + dir + "/run");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, dir + "/rows.jsonl:2:")) << p.output;
  EXPECT_TRUE(has(p.output, "invalid JSON")) << p.output;
  EXPECT_FALSE(fs::exists(dir + "/run")) << "a half-made run directory was left behind";
  // Nothing beside it either (the directory is assembled under a temporary name).
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "rows.jsonl") << e.path();
}

TEST(BadInputE2E, ForceReplacesAFinishedRunOnlyOnceTheInputsAreGood) {
  const std::string dir = scratch_dir("force");
  Proc done = run_hpcrl("run " + kSft + " --out " + dir + "/run");
  ASSERT_EQ(done.exit_code, 0) << done.output;
  const std::string metrics = slurp(dir + "/run/metrics.jsonl");
  ASSERT_FALSE(metrics.empty());

  Proc bad = run_hpcrl("run " + sft_on_rows(dir, "{\"question\": \"q\"}\n") + " --out " + dir + "/run --force");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_TRUE(has(bad.output, dir + "/rows.jsonl:1: missing key 'answer'")) << bad.output;
  EXPECT_EQ(slurp(dir + "/run/metrics.jsonl"), metrics) << "the finished run was replaced";
  EXPECT_TRUE(fs::exists(step_dir(dir + "/run", 4) + "/policy/model.safetensors"));
}

TEST(BadInputE2E, ARowLongerThanTheContextIsRefusedAtLoadWithItsLine) {
  const std::string dir = scratch_dir("long-row");
  // Row 2: prompt = BOS + "q" = 2 tokens; response = 3000 bytes + EOS = 3001 tokens; tiny-2l holds 2048.
  const std::string rows = "{\"question\": \"q\", \"answer\": \"1\"}\n{\"question\": \"q\", \"answer\": \"" +
                           std::string(3000, 'x') + "\"}\n{\"question\": \"q\", \"answer\": \"2\"}\n";
  Proc p = run_hpcrl("run " + sft_on_rows(dir, rows) + " --out " + dir + "/run");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, dir + "/rows.jsonl:2: this row is 3003 tokens (prompt 2 + response 3001 with its end "
                                  "token), more than the 2048 tokens model 'policy' holds (max_position_embeddings), "
                                  "and stages[0].sft reads whole rows; shorten or remove the row, or set "
                                  "data.rows.jsonl.max_prompt_len / data.rows.jsonl.max_response_len"))
      << p.output;
  EXPECT_FALSE(fs::exists(dir + "/run"));
}

TEST(BadInputE2E, AHugeRowIsRefusedWithoutTokenizingIt) {
  const std::string dir = scratch_dir("huge-row");
  // 10 MB in one row; the byte tokenizer's longest token ("<|im_start|>") is 12 bytes, so more than 2048 × 12 bytes cannot fit.
  const std::string rows = "{\"question\": \"q\", \"answer\": \"" + std::string(10 << 20, 'x') + "\"}\n";
  Proc p = run_hpcrl("run " + sft_on_rows(dir, rows) + " --out " + dir + "/run");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, dir + "/rows.jsonl:1: this row is 10485761 bytes, more than the 2048 tokens model "
                                  "'policy' holds (max_position_embeddings) can take at 12 bytes per token at most"))
      << p.output;
}

TEST(BadInputE2E, APromptThatLeavesNoRoomToGenerateIsRefused) {
  const std::string dir = scratch_dir("long-prompt");
  write(dir + "/rows.jsonl", "{\"question\": \"" + std::string(1900, 'q') + "\", \"answer\": \"1\"}\n");
  // 1900 bytes + BOS = 1901 prompt tokens; with max_new_tokens 256 a sequence may reach 2157 > 2048.
  Proc p = run_hpcrl("run " + kConfig + " --set 'data.rows={jsonl: {path: " + dir + "/rows.jsonl}}'" +
                     " --set 'stages=[{grpo: {policy: policy, reward: math, data: rows, iterations: 1, prompts: 1, "
                     "group: 2, max_new_tokens: 256}}]' --out " + dir + "/run");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, dir + "/rows.jsonl:1: this prompt is 1901 tokens; with stages[0].grpo.max_new_tokens = "
                                  "256 (stages[0].grpo) a sequence may reach 2157 tokens, more than the 2048 tokens "
                                  "model 'policy' holds"))
      << p.output;
}

TEST(BadInputE2E, ValidateReadsTheData) {
  const std::string dir = scratch_dir("validate-data");
  Proc p = run_hpcrl("validate " + sft_on_rows(dir, "{\"question\": \"q\", \"answer\": 1e999}\n"));
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "error: " + dir + "/rows.jsonl:1:29: invalid JSON (number 1e999 is beyond the range of a "
                            "double"))
      << p.output;
}

TEST(BadInputE2E, ValidateFindsTruncatedInitWeights) {
  const std::string dir = scratch_dir("validate-weights");
  fs::create_directories(dir + "/model");
  fs::copy_file("data/stories260k/config.json", dir + "/model/config.json");
  const std::string weights = slurp("data/stories260k/model.safetensors");
  write(dir + "/model/model.safetensors", weights.substr(0, weights.size() / 2));
  Proc p = run_hpcrl("validate " + kConfig + " --set 'models.policy.init={path: " + dir + "/model}'" +
                     " --set models.policy.tokenizer=byte --set 'models.student.init={from: policy}'");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, dir + "/model/model.safetensors")) << p.output;
  EXPECT_TRUE(has(p.output, "truncated")) << p.output;
}

TEST(BadInputE2E, ResumeWithAnotherConfigIsRefusedNamingTheKeysAndTheCommand) {
  const std::string dir = scratch_dir("resume-diff");
  Proc done = run_hpcrl("run " + kSft + " --out " + dir + "/run");
  ASSERT_EQ(done.exit_code, 0) << done.output;
  // The same pipeline without the start's --set flags: another config.
  Proc p = run_hpcrl("run " + kConfig + " --out " + dir + "/run --resume");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "--resume: this config differs from the one " + dir + "/run was started with")) << p.output;
  EXPECT_TRUE(has(p.output, "run.eval_before_train (saved false, now true)")) << p.output;
  EXPECT_TRUE(has(p.output, "Resume with the command that started it: hpcrl run tests/e2e/data/tiny.yaml --out " + dir +
                                "/run --set 'stages=[{sft: {model: policy, data: arith, steps: 4, batch: 8}}]' --set "
                                "run.checkpoint_every=2 --set run.keep_last=3 --set run.eval_before_train=false --resume"))
      << p.output;
  // Keys documented as safe may change.
  Proc ok = run_hpcrl("run " + kSft + " --set run.keep_last=5 --set trace.chrome=false --out " + dir + "/run --resume");
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
}

TEST(BadInputE2E, FlippedWeightsFallBackToTheOlderIntactStepAndEndTheSame) {
  const std::string dir = scratch_dir("flipped");
  Proc straight = run_hpcrl("run " + kSft + " --out " + dir + "/run");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const std::string final_weights = slurp(step_dir(dir + "/run", 4) + "/policy/model.safetensors");
  flip_4k(step_dir(dir + "/run", 4) + "/policy/model.safetensors");

  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run --resume");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(has(p.output, step_dir(dir + "/run", 4) + "/policy/model.safetensors does not match its checksum")) << p.output;
  EXPECT_TRUE(has(p.output, "resuming from " + step_dir(dir + "/run", 2) + " instead")) << p.output;
  EXPECT_TRUE(fs::exists(step_dir(dir + "/run", 4) + ".damaged")) << "the damaged step is kept for inspection";
  // Steps 3 and 4 ran again from step 2: the same weights as the uninterrupted run wrote (deterministic on one CPU).
  EXPECT_EQ(slurp(step_dir(dir + "/run", 4) + "/policy/model.safetensors"), final_weights);
}

TEST(BadInputE2E, ADamagedOnlyCheckpointIsAnErrorNamingTheFile) {
  const std::string dir = scratch_dir("damaged");
  Proc done = run_hpcrl("run " + kSft + " --set run.checkpoint_every=0 --out " + dir + "/run");
  ASSERT_EQ(done.exit_code, 0) << done.output;
  const std::string step = step_dir(dir + "/run", 4);
  const std::string opt = step + "/policy/optimizer-rank-00000.safetensors";
  const std::string bytes = slurp(opt);
  write(opt, bytes.substr(0, 1000));
  Proc truncated = run_hpcrl("run " + kSft + " --set run.checkpoint_every=0 --out " + dir + "/run --resume");
  EXPECT_EQ(truncated.exit_code, 2) << truncated.output;
  EXPECT_TRUE(has(truncated.output, "no intact checkpoint in " + dir + "/run/checkpoints/00-sft: " + opt +
                                        " is truncated: 1000 of " + std::to_string(bytes.size()) + " bytes"))
      << truncated.output;
  fs::remove(opt);
  Proc missing = run_hpcrl("run " + kSft + " --set run.checkpoint_every=0 --out " + dir + "/run --resume");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_TRUE(has(missing.output, opt + " is missing")) << missing.output;
}

// A finished kSft run in DIR/run whose final checkpoint (returned) lost its
// manifest, as one from before checksums were recorded: what is edited there
// next is only caught by the checks of what is loaded.
std::string finished_run_without_manifest(const std::string& dir) {
  Proc done = run_hpcrl("run " + kSft + " --out " + dir + "/run");
  EXPECT_EQ(done.exit_code, 0) << done.output;
  const std::string step = step_dir(dir + "/run", 4);
  fs::remove(step + "/manifest.json");
  // As such a checkpoint's state.json, it does not say it was written with a manifest.
  auto state = nlohmann::json::parse(slurp(step + "/state.json"));
  state.erase("manifest");
  write(step + "/state.json", state.dump());
  return step;
}

// A step written with a manifest that has since been deleted is not taken for one from
// before checksums (which loads unverified): before, a run then trained on flipped weights.
TEST(BadInputE2E, ADeletedManifestIsNotTakenForAnOldCheckpoint) {
  const std::string dir = scratch_dir("deleted-manifest");
  Proc done = run_hpcrl("run " + kSft + " --out " + dir + "/run");
  ASSERT_EQ(done.exit_code, 0) << done.output;
  fs::remove(step_dir(dir + "/run", 4) + "/manifest.json");
  flip_4k(step_dir(dir + "/run", 4) + "/policy/model.safetensors");
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run --resume");
  EXPECT_EQ(p.exit_code, 0) << p.output;
  EXPECT_TRUE(has(p.output, step_dir(dir + "/run", 4) + "/manifest.json is missing, but this step was written with "
                            "one")) << p.output;
  EXPECT_TRUE(has(p.output, "resuming from " + step_dir(dir + "/run", 2) + " instead")) << p.output;
}

// `path` as JSON, with `edit` applied, written back.
void edit_json(const std::string& path, const std::function<void(nlohmann::json&)>& edit) {
  auto j = nlohmann::json::parse(slurp(path));
  edit(j);
  write(path, j.dump());
}

TEST(BadInputE2E, AnEditedConfigJsonIsRefusedEvenWithoutAManifest) {
  const std::string dir = scratch_dir("edited-config");
  const std::string step = finished_run_without_manifest(dir);
  edit_json(step + "/policy/config.json", [](nlohmann::json& j) { j["num_hidden_layers"] = 3; });
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run --resume");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, "no manifest.json (written before hpcrl recorded checksums)")) << p.output;
  EXPECT_TRUE(has(p.output, step + "/policy/config.json: the saved model differs from the role it is to restore in "
                                   "num_hidden_layers 3 (this run: 2)"))
      << p.output;
}

TEST(BadInputE2E, AnAbsurdStepInStateJsonIsRefused) {
  const std::string dir = scratch_dir("absurd-step");
  const std::string step = finished_run_without_manifest(dir);
  edit_json(step + "/state.json", [](nlohmann::json& j) { j["step"] = 1000000000000LL; });
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run --resume");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, step + "/state.json: step 1000000000000 is past the 4 steps stages[0].sft is configured "
                                   "for"))
      << p.output;
}

TEST(BadInputE2E, ABadRngStateIsRefusedWithoutATorchStack) {
  const std::string dir = scratch_dir("bad-rng");
  const std::string step = finished_run_without_manifest(dir);
  // Without complete.json the stage continues from its last step, restoring the generator state.
  fs::remove(dir + "/run/checkpoints/00-sft/complete.json");
  edit_json(step + "/state.json", [](nlohmann::json& j) { j["rng"] = {1, 2, 3}; });
  Proc p = run_hpcrl("run " + kSft + " --out " + dir + "/run --resume");
  EXPECT_EQ(p.exit_code, 2) << p.output;
  EXPECT_TRUE(has(p.output, step + "/state.json: \"rng\" must be the ")) << p.output;
  EXPECT_TRUE(has(p.output, " bytes of torch's CPU generator state (integers 0..255), got 3 values")) << p.output;
  EXPECT_FALSE(has(p.output, "Exception raised from")) << p.output;  // c10's stack trace
}

TEST(BadInputE2E, AHugeBatchRunsOutOfMemoryWithTheStageAndTheFix) {
  const std::string dir = scratch_dir("huge-batch");
  // run.check_memory: false, so that the allocation itself fails (the plan's check refuses it first otherwise).
  Proc p = run_hpcrl("run " + kSft + " --set stages[0].sft.batch=1000000000000 --set run.check_memory=false --out " +
                     dir + "/run");
  EXPECT_EQ(p.exit_code, 1) << p.output;
  EXPECT_TRUE(has(p.output, "stages[0].sft ran out of memory on rank 0 (std::bad_alloc): its batch "
                            "(stages[0].sft.batch = 1000000000000 sequences per step) needs more than this machine has"))
      << p.output;
}
