// `hpcrl plan` as a library: rank map, groups, node placement, cross-node
// warnings and the memory estimate of the tiny preset (worked out by hand in
// the comments), for colocated and disaggregated pipelines. No MPI.
#include <gtest/gtest.h>

#include "hpcrl/config/loader.h"
#include "hpcrl/distributed/plan.h"
#include "hpcrl/model/attention_saves_scores.h"
#include "hpcrl/util/error.h"

namespace hpcrl::dist {
namespace {

// Bytes one layer of tiny (C 128, 4 heads of 32, 2 KV heads, ffn 384) saves per token in float32,
// for sequences of `seq` tokens (plan_memory.cpp's list):
//   tp 1: two norms 2·128·(4 + 2·4) = 3072, RoPE's inputs and rotated copies (128 + 64)·2·4 = 1536,
//         o_proj's input 128·4 = 512, MLP 4·384·4 = 6144 -> 11264; the attention core on LibTorch 1.13
//         copies q, k, v (128 + 64 + 64)·4 = 1024 and keeps 4 heads' softmax over seq keys, 4·seq·4;
//         SDPA keeps q, k, v and its output (128 + 64 + 64 + 128)·4 = 1536 (KV repeated before 2.5: 2048).
//   tp 2 (2 heads: q 64 values, 1 KV head: 32, ffn 192): 3072 + (64 + 32)·8 + 64·4 + 4·192·4 = 7168;
//         core (64 + 32 + 32)·4 = 512 + 2·seq·4, or SDPA (64 + 32 + 32 + 64)·4 = 768 (1024).
int64_t tiny_layer_bytes_per_token(int tp, int64_t seq) {
  const bool kv_repeated = model::kAttentionRepeatsKvHeads;
  if (tp == 1) return 11264 + (model::kAttentionSavesScores ? 1024 + 16 * seq : kv_repeated ? 2048 : 1536);
  return 7168 + (model::kAttentionSavesScores ? 512 + 8 * seq : kv_repeated ? 1024 : 768);
}

const char* kColocated = R"(
run: {name: plantest, device: cpu}
models:
  policy: {init: {preset: tiny}, parallel: {tp: 2, pp: 2}, rollout: {parallel: {tp: 1}}}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, train: 100, eval: 10}}
stages:
  - sft: {model: policy, data: arith, steps: 1, batch: 8}
  - grpo: {policy: policy, reward: math, data: arith, iterations: 1, prompts: 4, group: 2}
)";

const char* kDisaggregated = R"(
run: {name: plantest, device: cpu}
models:
  policy: {init: {preset: tiny}, parallel: {tp: 2}}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, train: 100, eval: 10}}
placement: {mode: disaggregated, ranges: {policy: [0, 3], policy.rollout: [4, 7]}}
stages:
  - grpo: {policy: policy, reward: math, data: arith, iterations: 1, prompts: 4, group: 2}
)";

config::PipelineConfig load(const char* yaml, int world) {
  config::ValidateOptions opt;
  opt.world = world;
  config::LoadResult res = config::check_pipeline_text(yaml, "plan_test.yaml", {}, opt);
  std::string errors;
  for (const auto& e : res.diagnostics.errors) errors += e.str() + "\n";
  EXPECT_TRUE(res.ok()) << errors;
  return res.config;
}

TEST(Plan, ColocatedRankMapGroupsAndJsonShape) {
  Plan plan = make_plan(load(kColocated, 8), 8, 4);
  ASSERT_EQ(plan.roles.size(), 2u);
  EXPECT_EQ(plan.roles[0].name, "policy");
  EXPECT_EQ(plan.roles[1].name, "policy.rollout");
  EXPECT_TRUE(plan.warnings.empty());
  nlohmann::json j = plan_json(plan);
  EXPECT_EQ(j["world"], 8);
  EXPECT_EQ(j["gpus_per_node"], 4);
  const auto& p = j["roles"]["policy"];
  EXPECT_EQ(p["parallel"], nlohmann::json({{"tp", 2}, {"sp", 1}, {"ep", 1}, {"dp", 2}, {"pp", 2}, {"edp", 2}}));
  ASSERT_EQ(p["ranks"].size(), 8u);
  EXPECT_EQ(p["ranks"][5], nlohmann::json({{"rank", 5}, {"node", 1}, {"local_device", 1}, {"tp", 1}, {"sp", 0},
                                           {"ep", 0}, {"dp", 0}, {"pp", 1}, {"edp", 0}}));
  EXPECT_EQ(p["groups"]["tp"], nlohmann::json({{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  EXPECT_EQ(p["groups"]["dp"], nlohmann::json({{0, 2}, {1, 3}, {4, 6}, {5, 7}}));
  EXPECT_EQ(p["groups"]["pp"], nlohmann::json({{0, 4}, {1, 5}, {2, 6}, {3, 7}}));
  EXPECT_EQ(p["groups"]["tp_pp"], nlohmann::json({{0, 1, 4, 5}, {2, 3, 6, 7}}));
  // The rollout layout sets tp=1; generation runs whole models (pp=1, not the training pp): dp = 8.
  const auto& r = j["roles"]["policy.rollout"];
  EXPECT_EQ(r["parallel"]["tp"], 1);
  EXPECT_EQ(r["parallel"]["pp"], 1);
  EXPECT_EQ(r["parallel"]["dp"], 8);
  EXPECT_EQ(r["groups"]["pp"], nlohmann::json({{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}}));
  EXPECT_EQ(j["warnings"], nlohmann::json::array());
}

TEST(Plan, MemoryOfTheTinyPresetByHand) {
  // tiny: vocab 272, hidden 128, ffn 384, 4 layers, 4 heads, 2 kv heads, head_dim 32, tied, 2048 positions.
  Plan plan = make_plan(load(kColocated, 8), 8, 4);
  // policy, tp=2 pp=2, float32, trained. Per layer: q,o 2·128·2·32 = 16384; k,v (1 kv head per
  // rank) 2·128·32 = 8192; norms 256; ffn 3·128·384/2 = 73728 -> 98560. Vocab shard 272·128/2 = 17408.
  // Stage 0: 2·98560 + 17408 = 214528; stage 1: 197120 + 128 (norm) + 17408 (tied head, pp > 1) = 214656.
  const MemoryEstimate& m = *plan.roles[0].memory;
  EXPECT_EQ(m.parameters, 214656);
  EXPECT_EQ(m.weights, 214656 * 4);
  EXPECT_EQ(m.grads, 214656 * 4);
  EXPECT_EQ(m.optimizer, 214656 * 8);
  // 2 layers · (1 · 2048 tokens) · a layer's bytes per token at tp 2 (24064 on LibTorch 1.13).
  EXPECT_EQ(m.activations, 2 * 2048 * tiny_layer_bytes_per_token(2, 2048));
  EXPECT_EQ(m.kv_cache, 0);
  EXPECT_EQ(m.seq_len, 2048);
  EXPECT_EQ(m.micro_batch, 1);
  // policy.rollout, tp=1 pp=1 (a whole model), not trained, 64 sequences of KV cache.
  // Per layer 2·128·4·32 + 2·128·2·32 + 256 + 3·128·384 = 196864; 4 layers + 128 (norm) + 34816 (tied embedding) = 822400.
  const MemoryEstimate& g = *plan.roles[1].memory;
  EXPECT_EQ(g.parameters, 822400);
  EXPECT_EQ(g.weights, 822400 * 4);
  EXPECT_EQ(g.grads + g.optimizer + g.activations, 0);
  // 2 (k, v) · 4 layers · 2 kv heads · 32 · 4 bytes · 64 sequences · 2048 tokens.
  EXPECT_EQ(g.kv_cache, 2ll * 4 * 2 * 32 * 4 * 64 * 2048);
  // A float32 CPU engine keeps a packed copy of its projections and head: per layer q,o 2·128·4·32 +
  // k,v 2·128·2·32 + ffn 3·128·384 = 196608 (not the norms); 4 layers + 34816 (tied embedding) = 821248, 4 B each.
  EXPECT_EQ(g.engine_weights, 821248 * 4);
  EXPECT_EQ(g.total(), g.weights + g.engine_weights + g.kv_cache);
}

TEST(Plan, LogitsBothActivationCountsAndPerRankPeakByHand) {
  // kColocated: policy tp=2 pp=2 (trained, log-probs), policy.rollout tp=1 (a generation copy: another
  // layout), float32, sequences of 2048 tokens (the context: synthetic data does not bound them).
  Plan plan = make_plan(load(kColocated, 8), 8, 4);
  const MemoryEstimate& m = *plan.roles[0].memory;
  // Logits: 2048 tokens · 272/2 vocabulary columns · (4 B in float32 + 3 fp32 copies of 4 B).
  EXPECT_EQ(m.logits, 2048 * 136 * (4 + 12));
  // Without checkpointing 2 layers of 2048 tokens; with it 2 layer inputs of 2048·128·4 B + one layer.
  EXPECT_EQ(m.activations_full, 2 * 2048 * tiny_layer_bytes_per_token(2, 2048));
  EXPECT_EQ(m.activations_checkpointed, 2 * 2048 * 128 * 4 + 2048 * tiny_layer_bytes_per_token(2, 2048));
  EXPECT_EQ(m.activations, m.activations_full) << "the policy is not configured with checkpointing";
  EXPECT_EQ(m.resident(), 214656 * (4 + 4 + 8));
  const MemoryEstimate& g = *plan.roles[1].memory;
  EXPECT_EQ(g.logits, 0) << "an engine samples from one position's logits, not a micro-batch's";
  EXPECT_FALSE(plan.roles[1].shares_weights_with_trainer) << "tp 1 to generate, tp 2 to train: a copy";
  // Every rank holds both: resident policy state + the copy's weights and their packed copy (above); the
  // largest transient is the KV cache
  // (2·4·2·32·4 B · 64 sequences · 2048 tokens = 256 MiB) over the policy's activations + logits.
  auto peaks = rank_memory(plan);
  ASSERT_EQ(peaks.size(), 1u);
  EXPECT_EQ(peaks[0].ranks, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(peaks[0].roles, (std::vector<std::string>{"policy", "policy.rollout"}));
  EXPECT_EQ(peaks[0].resident, 214656 * 16 + 822400 * 4 + 821248 * 4);
  EXPECT_EQ(peaks[0].transient, 268435456);
  EXPECT_EQ(peaks[0].transient_role, "policy.rollout");
  EXPECT_EQ(peaks[0].peak(), 214656 * 16 + 822400 * 4 + 821248 * 4 + 268435456);
  EXPECT_EQ(plan_json(plan)["rank_memory"][0]["peak"], peaks[0].peak());
}

TEST(Plan, AnEngineInTheTrainingLayoutAddsOnlyItsPackedCopy) {
  std::string yaml = kColocated;
  const std::string policy = "{init: {preset: tiny}, parallel: {tp: 2, pp: 2}, rollout: {parallel: {tp: 1}}}";
  yaml.replace(yaml.find(policy), policy.size(), "{init: {preset: tiny}, activation_checkpointing: true}");
  Plan plan = make_plan(load(yaml.c_str(), 2), 2, 4);
  ASSERT_EQ(plan.roles.size(), 2u);
  EXPECT_TRUE(plan.roles[1].shares_weights_with_trainer);
  const MemoryEstimate& m = *plan.roles[0].memory;
  EXPECT_EQ(m.activations, m.activations_checkpointed);
  auto peaks = rank_memory(plan);
  ASSERT_EQ(peaks.size(), 1u);
  // Generation reads the policy's own weights; on the CPU in float32 the engine keeps its packed copy
  // of them (821248 parameters of tiny, MemoryOfTheTinyPresetByHand).
  EXPECT_EQ(plan.roles[1].memory->engine_weights, 821248 * 4);
  EXPECT_EQ(peaks[0].resident, m.resident() + 821248 * 4);
}

TEST(Plan, OnlyAFloat32CpuEngineKeepsAPackedCopy) {
  for (const char* run : {"{name: plantest, device: cuda}", "{name: plantest, device: cpu, dtype: bfloat16}"}) {
    std::string yaml = kColocated;
    const std::string cpu = "{name: plantest, device: cpu}";
    yaml.replace(yaml.find(cpu), cpu.size(), run);
    Plan plan = make_plan(load(yaml.c_str(), 8), 8, 4);
    EXPECT_EQ(plan.roles[1].memory->engine_weights, 0) << run;
  }
}

TEST(Plan, ZeroShardsDenseStateOverDpTimesSpAndExpertsOverEdpAndZeroTwoTheGradients) {
  // kColocated with another `run` and `policy`.
  auto colocated_with = [](const std::string& run, const std::string& policy) {
    std::string y = kColocated;
    const std::string old_run = "{name: plantest, device: cpu}";
    y.replace(y.find(old_run), old_run.size(), run);
    const std::string old_policy = "{init: {preset: tiny}, parallel: {tp: 2, pp: 2}, rollout: {parallel: {tp: 1}}}";
    return y.replace(y.find(old_policy), old_policy.size(), policy);
  };
  const std::string dense = colocated_with("{name: plantest, device: cpu}",
                                           "{init: {preset: tiny}, parallel: {sp: 2}, optim: {zero: 1}}");
  // tp=1 sp=2 dp=4: the whole tiny model (822400 parameters, 8 B each) over dp·sp = 8 ranks.
  const MemoryEstimate& m = *make_plan(load(dense.c_str(), 8), 8, 4).roles[0].memory;
  EXPECT_EQ(m.parameters, 822400);
  EXPECT_EQ(m.optimizer, 822400 * 8 / 8);
  // Plain dp concatenates every bucket's gradients for the all-reduce: a second full copy on more than one rank.
  const std::string plain = colocated_with("{name: plantest, device: cpu}", "{init: {preset: tiny}}");
  EXPECT_EQ(make_plan(load(plain.c_str(), 8), 8, 4).roles[0].memory->grad_buffers, 822400 * 4);
  EXPECT_EQ(make_plan(load(plain.c_str(), 1), 1, 4).roles[0].memory->grad_buffers, 0);

  const std::string moe = colocated_with("{name: plantest, device: cpu, dtype: bfloat16}",
                                         "{init: {path: configs/models/qwen1.5-moe-a2.7b}, tokenizer: byte, "
                                         "parallel: {ep: 2}, optim: {zero: 1}}");
  // 4 ranks: tp=1 sp=1 dp=4 ep=2, so edp = dp / ep = 2. Experts per rank: 24 layers · 30 · 3·2048·1408;
  // the rest (attention, router, shared expert, embeddings) is dense. bf16: 12 B of state per parameter.
  const MemoryEstimate& e = *make_plan(load(moe.c_str(), 4), 4, 4).roles[0].memory;
  const int64_t experts = 24ll * 30 * 3 * 2048 * 1408;
  const int64_t dense_params = e.parameters - experts;
  ASSERT_GT(dense_params, 0);
  EXPECT_EQ(e.optimizer, (dense_params * 12 + 3) / 4 + experts * 12 / 2);
  EXPECT_EQ(e.grads, e.parameters * 2) << "ZeRO-1 keeps full gradients";

  // ZeRO-1 flattens the gradients for the reduction, a second full copy, beside the shard it reduces into.
  EXPECT_EQ(e.grad_buffers, e.parameters * 2 + (dense_params * 2 + 3) / 4 + experts * 2 / 2);

  // ZeRO-2: gradients sharded as the state is. Its buffers: the 151936 × 2048 bf16 embedding's gradient
  // and its reduced quarter (the largest bucket, larger than 2 × 8 MiB) and two 8 MiB buckets with theirs.
  std::string moe2 = moe;
  moe2.replace(moe2.find("zero: 1"), 7, "zero: 2");
  const MemoryEstimate& z = *make_plan(load(moe2.c_str(), 4), 4, 4).roles[0].memory;
  const int64_t embedding = 151936ll * 2048 * 2, bucket = 8 << 20;
  EXPECT_EQ(z.grads, (dense_params * 2 + 3) / 4 + experts * 2 / 2);
  EXPECT_EQ(z.grad_buffers, embedding + embedding / 4 + 2 * (bucket + bucket / 4));
  EXPECT_EQ(z.optimizer, e.optimizer);
  // tiny's 3.3 MB of gradients are one 8 MiB bucket: the buffers are the whole gradient again.
  std::string dense2 = dense;
  dense2.replace(dense2.find("zero: 1"), 7, "zero: 2");
  const MemoryEstimate& t = *make_plan(load(dense2.c_str(), 8), 8, 4).roles[0].memory;
  EXPECT_EQ(t.grads, 822400 * 4 / 8);
  EXPECT_EQ(t.grad_buffers, 822400 * 4);
}

TEST(Plan, ZeroThreeHoldsTheWeightShardAndGathersTheOuterUnitAndTwoLayers) {
  std::string y = kColocated;
  const std::string old_policy = "{init: {preset: tiny}, parallel: {tp: 2, pp: 2}, rollout: {parallel: {tp: 1}}}";
  y.replace(y.find(old_policy), old_policy.size(), "{init: {preset: tiny}, parallel: {sp: 2}, optim: {zero: 3}}");
  // tp=1 sp=2 dp=4, fp32: tiny's 822400 parameters over dp·sp = 8 ranks.
  //   a layer: q, o 2·128·4·32 + k, v 2·128·2·32 + two norms 2·128 = 49408, MLP 3·128·384 = 147456: 196864
  //   outer unit (tied embedding, final norm): 822400 − 4·196864 = 34944
  const MemoryEstimate& m = *make_plan(load(y.c_str(), 8), 8, 4).roles[0].memory;
  const int64_t layer = 196864 * 4, outer = 34944 * 4, whole = 822400 * 4;
  EXPECT_EQ(m.weights, whole / 8);
  EXPECT_EQ(m.param_gathers, outer + 2 * layer);
  // The CPU float32 engine packs layer by layer: nothing gathers the whole model.
  EXPECT_EQ(m.whole_gathers, 0);
  EXPECT_EQ(m.grads, whole / 8);
  // Gradient buckets are units. The outer unit's is open through the backward; a layer's fills as the
  // backward frees that layer's activations: 1024 tokens (2048 over sp 2) · 45056 B on LibTorch 1.13
  // (tiny_layer_bytes_per_token(1, 2048)), more than a layer's bucket, so the peak is at the first layer.
  EXPECT_EQ(m.grad_buffers, outer + layer);
  EXPECT_EQ(m.optimizer, 822400 * 8 / 8);
  // An engine that reads the weights in place (bf16 here; or a GPU) gathers the rest of the model for a call.
  std::string bf16 = y;
  bf16.replace(bf16.find("device: cpu}"), 12, "device: cpu, dtype: bfloat16}");
  const MemoryEstimate& b = *make_plan(load(bf16.c_str(), 8), 8, 4).roles[0].memory;
  EXPECT_EQ(b.whole_gathers, whole / 2 - whole / 2 / 8);  // 2 bytes a parameter
  // Training holds the gathered layers and the gradient buckets in flight beside its activations; such
  // generation the whole model.
  EXPECT_FALSE(b.buffers_replace_activations);
  EXPECT_EQ(b.transient(), std::max(b.activations + b.logits + b.grad_buffers + b.param_gathers, b.whole_gathers));
  // With LoRA the frozen base is sharded too and one layer more is held: its base goes when the backward is below it.
  const std::string zero3 = "optim: {zero: 3}}";
  y.replace(y.find(zero3), zero3.size(), "optim: {zero: 3}, lora: {rank: 4, alpha: 8, targets: [q_proj]}}");
  const MemoryEstimate& l = *make_plan(load(y.c_str(), 8), 8, 4).roles[0].memory;
  EXPECT_EQ(l.param_gathers, outer + 3 * layer);
  EXPECT_EQ(l.whole_gathers, 0);
}

TEST(Plan, ZeroThreeBucketsPeakWhereTheyOutgrowTheFreedActivations) {
  // layer buckets of 100 B, an outer unit of 10, groups of 2 (each reduced bucket receives 50).
  // Freeing 20 B a layer: after 0, 1, 2 layers 100, 200 + 50 − 20 = 230, 300 + 100 − 40 = 360 held.
  EXPECT_EQ(zero3_gradient_buckets(100, 10, 20, 2, 4), 10 + 360);
  // Freeing 200 B a layer: 100, 250 − 200, 400 − 400: the first layer's bucket is the peak.
  EXPECT_EQ(zero3_gradient_buckets(100, 10, 200, 2, 4), 10 + 100);
  // A one-layer stage has no second bucket.
  EXPECT_EQ(zero3_gradient_buckets(100, 10, 20, 2, 1), 10 + 100);
}

TEST(Plan, LoraTrainsOnlyItsFactorsAndTheReferenceIsThePolicyBase) {
  const char* yaml = R"(
run: {name: plantest, device: cpu}
models:
  policy: {init: {preset: tiny}, parallel: {tp: 2}, lora: {rank: 8, targets: [q_proj, v_proj, down_proj]}}
  reference: {init: {from: policy}, parallel: {tp: 2}, frozen: true}
rewards:
  math: {type: verifiable}
data:
  arith: {synthetic: {task: arithmetic, digits: 2, train: 100, eval: 10}}
stages:
  - grpo: {policy: policy, reference: reference, reward: math, data: arith, iterations: 1, prompts: 4, group: 2}
)";
  Plan plan = make_plan(load(yaml, 4), 4, 4);
  const RolePlan* policy = nullptr;
  const RolePlan* reference = nullptr;
  for (const auto& rp : plan.roles) {
    if (rp.name == "policy") policy = &rp;
    if (rp.name == "reference") reference = &rp;
  }
  ASSERT_TRUE(policy && reference);
  // tiny at tp 2 (C 128, 2 of 4 query heads, 1 of 2 kv heads, head_dim 32, ffn 384/2 = 192), rank 8:
  //   q_proj (column): A 8·128 + B 64·8 = 1536;  v_proj: 8·128 + 32·8 = 1280;
  //   down_proj (row): A 8·192 + B 128·8 = 2560;  5376 per layer, 4 layers: 21504.
  // The base: 4 · 98560 + 17408 (vocab shard) + 128 (final norm) = 411776.
  const MemoryEstimate& m = *policy->memory;
  EXPECT_EQ(m.parameters, 411776 + 21504);
  EXPECT_EQ(m.weights, (411776 + 21504) * 4);
  EXPECT_EQ(m.grads, 21504 * 4);
  EXPECT_EQ(m.optimizer, 21504 * 8);
  EXPECT_EQ(m.grad_buffers, 21504 * 4);  // dp 2: the flattened copy of the adapters' gradients
  EXPECT_EQ(reference->memory->weights, 0) << "the reference runs the policy's base";
  EXPECT_GT(reference->memory->logits, 0);
}

TEST(Plan, SequenceLengthFromTheDataAndCheckpointedActivations) {
  const std::string yaml = std::string(R"(
run: {name: plantest, device: cpu}
models:
  policy: {init: {preset: tiny}, activation_checkpointing: true}
rewards:
  math: {type: verifiable}
data:
  gsm8k: {jsonl: {path: )") + HPCRL_DATA_DIR + R"(/gsm8k/train.jsonl, max_prompt_len: 256, max_response_len: 512}}
stages:
  - grpo: {policy: policy, reward: math, data: gsm8k, iterations: 1, prompts: 4, group: 2, max_new_tokens: 100,
           micro_batch: 4}
)";
  Plan plan = make_plan(load(yaml.c_str(), 2), 2, 4);
  ASSERT_EQ(plan.roles.size(), 2u);
  // GRPO sequences: 256 prompt + 100 new tokens; 4 per micro-batch.
  const MemoryEstimate& m = *plan.roles[0].memory;
  EXPECT_EQ(m.seq_len, 356);
  EXPECT_EQ(m.micro_batch, 4);
  // Checkpointed: 4 layers keep their input (1424 tokens · 128 · 4 B) + one layer in full.
  EXPECT_EQ(m.activations, 4 * 1424 * 128 * 4 + 1424 * tiny_layer_bytes_per_token(1, 356));
  const MemoryEstimate& g = *plan.roles[1].memory;
  EXPECT_EQ(g.seq_len, 356);
  EXPECT_EQ(g.kv_sequences, 64);
  EXPECT_EQ(g.kv_cache, 2ll * 4 * 2 * 32 * 4 * 64 * 356);  // k and v · layers · kv heads · head_dim · 4 B
}

TEST(Plan, PlainDpsGradientCopyAndTheActivationsAreNotHeldAtOnce) {
  // Plain dp over 2 ranks flattens the gradients for the all-reduce (822400 · 4 B for tiny). The copy
  // fills during the backward as it frees the activations, so the transient bytes are the larger of
  // the two, not their sum.
  auto policy_memory = [](int prompt, int new_tokens, int micro_batch, int zero = 0) {
    const std::string yaml = std::string(R"(
run: {name: plantest, device: cpu}
models:
  policy: {init: {preset: tiny}, optim: {zero: )") + std::to_string(zero) + R"(}}
rewards:
  math: {type: verifiable}
data:
  gsm8k: {jsonl: {path: )" + HPCRL_DATA_DIR + "/gsm8k/train.jsonl, max_prompt_len: " + std::to_string(prompt) +
                             R"(, max_response_len: 512}}
stages:
  - grpo: {policy: policy, reward: math, data: gsm8k, iterations: 1, prompts: 4, group: 2, max_new_tokens: )" +
                             std::to_string(new_tokens) + ", micro_batch: " + std::to_string(micro_batch) + "}\n";
    return *make_plan(load(yaml.c_str(), 2), 2, 4).roles[0].memory;
  };
  // One sequence of 16 + 8 tokens: 4 layers · 24 tokens · (11264 + 1024 + 16·24) B of activations.
  const MemoryEstimate small = policy_memory(16, 8, 1);
  EXPECT_EQ(small.activations, 4 * 24 * tiny_layer_bytes_per_token(1, 24));
  EXPECT_EQ(small.grad_buffers, 822400 * 4);
  EXPECT_EQ(small.transient(), small.grad_buffers);
  // Four sequences of 256 + 100 tokens: the activations (4 · 1424 tokens · 17984 B on LibTorch 1.13) are the larger.
  const MemoryEstimate large = policy_memory(256, 100, 4);
  EXPECT_EQ(large.activations, 4 * 1424 * tiny_layer_bytes_per_token(1, 356));
  EXPECT_EQ(large.transient(), large.activations + large.logits);
  // ZeRO-2 reduces bucket by bucket from the first layers of the backward on: its buffers (here the
  // whole 3.3 MB gradient, one 8 MiB bucket) are held beside the activations.
  const MemoryEstimate zero2 = policy_memory(256, 100, 4, 2);
  EXPECT_EQ(zero2.grad_buffers, 822400 * 4);
  EXPECT_EQ(zero2.transient(), zero2.activations + zero2.logits + zero2.grad_buffers);
}

TEST(Plan, DisaggregatedRolesSitOnTheirRanges) {
  Plan plan = make_plan(load(kDisaggregated, 8), 8, 4);
  nlohmann::json j = plan_json(plan);
  const auto& p = j["roles"]["policy"];
  EXPECT_EQ(p["first_rank"], 0);
  EXPECT_EQ(p["last_rank"], 3);
  EXPECT_EQ(p["groups"]["tp"], nlohmann::json({{0, 1}, {2, 3}}));
  const auto& r = j["roles"]["policy.rollout"];
  EXPECT_EQ(r["first_rank"], 4);
  EXPECT_EQ(r["ranks"][0]["rank"], 4);
  EXPECT_EQ(r["ranks"][0]["node"], 1);
  EXPECT_EQ(r["ranks"][0]["local_device"], 0);
  EXPECT_EQ(r["groups"]["tp"], nlohmann::json({{4, 5}, {6, 7}}));  // rollout inherits tp=2
  EXPECT_EQ(r["groups"]["dp"], nlohmann::json({{4, 6}, {5, 7}}));
}

TEST(Plan, TensorGroupsAcrossNodesAreWarnedAbout) {
  Plan plan = make_plan(load(kColocated, 8), 8, 1);
  ASSERT_EQ(plan.warnings.size(), 1u);
  EXPECT_EQ(plan.warnings[0],
            "policy: 4 of 4 tp groups span nodes (e.g. ranks 0-1 on nodes 0-1 with 1 GPUs per node); tensor "
            "parallelism all-reduces every layer and wants NVLink: keep tp within a node (tp <= gpus per node, "
            "dividing it)");
  EXPECT_EQ(plan_json(plan)["roles"]["policy"]["ranks"][3]["node"], 3);
}

TEST(Plan, LayoutThatDoesNotFitTheWorldIsAnInputError) {
  config::PipelineConfig cfg = load(kColocated, 8);
  try {
    make_plan(cfg, 6, 4);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "role 'policy' has 6 ranks (ranks 0-5), which tp=2 × sp=1 × pp=2 = 4 does not divide; "
                           "dp = ranks / (tp·sp·pp) must be whole: choose tp·sp·pp among 1, 2, 3, 6");
  }
}

TEST(Plan, TextListsEveryRoleWithItsLayoutAndMemory) {
  std::string text = plan_text(make_plan(load(kColocated, 8), 8, 4));
  EXPECT_NE(text.find("world 8 ranks, 4 per node (2 nodes)"), std::string::npos) << text;
  EXPECT_NE(text.find("policy: tp=2 sp=1 ep=1 dp=2 pp=2 on ranks 0-7 (edp=2)"), std::string::npos) << text;
  EXPECT_NE(text.find("policy.rollout: tp=1 sp=1 ep=1 dp=8 pp=1 on ranks 0-7"), std::string::npos) << text;
  EXPECT_NE(text.find("  tp    [0,1] [2,3] [4,5] [6,7]"), std::string::npos) << text;
  EXPECT_NE(text.find("214656 parameters"), std::string::npos) << text;
}

// The policy (tp 2, sp 1, ep 1) has no sp or ep group of more than one rank: those lines would
// only list single ranks, so they are named once instead.
TEST(Plan, TextLeavesOutGroupKindsOfOneRankEach) {
  std::string text = plan_text(make_plan(load(kColocated, 8), 8, 4));
  EXPECT_EQ(text.find("  sp    [0]"), std::string::npos) << text;
  EXPECT_NE(text.find("(groups of one rank, not shown: sp, ep"), std::string::npos) << text;
}

}  // namespace
}  // namespace hpcrl::dist
