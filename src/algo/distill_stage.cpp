// The distillation stage loop (see distill_stage.h).
#include "hpcrl/util/check.h"
#include "hpcrl/algo/distill_stage.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <numeric>
#include <utility>
#include <vector>

#include "hpcrl/algo/distill_loss.h"
#include "hpcrl/algo/evaluation.h"
#include "hpcrl/algo/forward_backward.h"
#include "hpcrl/algo/pipeline_train.h"
#include "hpcrl/algo/prompting.h"
#include "hpcrl/algo/reward_fn.h"
#include "hpcrl/algo/rollout_copy.h"
#include "hpcrl/algo/stage_loop.h"
#include "hpcrl/algo/teacher_topk.h"
#include "hpcrl/algo/token_batch.h"
#include "hpcrl/algo/train_step.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/trace/trace.h"

namespace hpcrl::algo {

namespace {
void check_pair(const config::DistillStage& cfg, const Role& teacher, const Role& student, const std::string& where) {
  const auto& ta = teacher.model->arch();
  const auto& sa = student.model->arch();
  HPCRL_CHECK_INPUT(ta.vocab_size == sa.vocab_size, where << ": teacher '" << teacher.name << "' has vocabulary "
                    << ta.vocab_size << " but student '" << student.name << "' has " << sa.vocab_size
                    << "; distillation needs one tokenizer: pick a student of the teacher's family");
  HPCRL_CHECK_INPUT(teacher.dp_size == student.dp_size,
                    where << ": teacher dp=" << teacher.dp_size << " differs from student dp=" << student.dp_size
                    << "; give both roles layouts with the same data-parallel size");
  HPCRL_CHECK_INPUT(cfg.top_k > 0 || (teacher.ctx.tp_size() == 1 && student.ctx.tp_size() == 1),
                    where << ".top_k: full-vocabulary distillation (top_k: 0) needs tp=1 for teacher and student; "
                    "set top_k (e.g. 64) to distil across tensor-parallel layouts");
}
}  // namespace

StageResult run_distill(StageEnv& env) {
  const config::DistillStage& cfg = env.stage->distill;
  const auto& pipeline = *env.pipeline;
  Role& teacher = env.role(cfg.teacher);
  Role& student = env.role(cfg.student);
  const DataSplits& data = env.data(cfg.data);
  const int world_rank = env.world->rank();
  StageResult result;
  HPCRL_CHECK_INPUT(teacher.member() && student.member(),
                    env.stage->path << ": every rank must hold teacher and student in this build; use "
                    "placement.mode: colocated");
  check_pair(cfg, teacher, student, env.stage->path);
  check_same_rows(env.world, student, teacher, env.stage->path);  // the teacher scores the student's rows

  const DistillLoss kind = cfg.loss;
  Trainer trainer(student, cfg.train, cfg.steps);
  PromptBuilder prompts(*student.tokenizer, pipeline.find_data(cfg.data));
  io::DataSampler sampler(data.train.size(), static_cast<uint64_t>(pipeline.run.seed) + 17u * env.stage_index,
                          pipeline.find_data(cfg.data)->shuffle);
  const int64_t local_batch = student.local_batch(cfg.batch, env.stage->path + ".batch");
  std::vector<TrainedRole> saved{{&student, &trainer.optimizer()}};
  RewardFunction verifier(pipeline, {});

  const int64_t start = resume_stage(env, saved, sampler, "distill");
  auto run_eval = [&](int64_t step) {
    if (data.eval.size() == 0) return;
    auto r = evaluate(student, data.eval, prompts, verifier.verifier(), eval_options(pipeline));
    result.eval_accuracy = r.accuracy;
    result.eval_loss = r.loss;
    spdlog::info("distill step {}: student eval accuracy {:.3f}, loss {:.4f}", step, r.accuracy, r.loss);
    if (env.metrics)
      env.metrics->write("distill", env.stage_index, step,
                         {{"eval/accuracy", r.accuracy}, {"eval/loss", r.loss}, {"seconds/eval", r.seconds}});
  };

  rollout::SamplingParams gen;
  gen.temperature = cfg.sampling.temperature;
  gen.top_p = cfg.sampling.top_p;
  gen.top_k = cfg.sampling.top_k;
  gen.max_new_tokens = cfg.sampling.max_new_tokens;
  gen.eos_ids = prompts.stop_ids();
  const double T = 1.0;  // distributions are matched at the models' own temperature
  const double grad_group = student.ctx.grad ? student.ctx.grad->size() : 1;
  std::shared_ptr<model::DecoderModel> teacher_generator;  // sequence-level: what the teacher generates with

  auto train_step = [&](int64_t step, const std::vector<size_t>& rows) {
    trace::ScopedSpan step_span("distill/step", {{"step", double(step)}});
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<int32_t>> p_ids, r_ids;
    for (size_t i : rows) p_ids.push_back(prompts.prompt_ids(data.train[i]));
    if (cfg.on_policy || cfg.sequence_level) {
      trace::ScopedSpan span("distill/rollout");
      // A pipelined role generates from its pp = 1 copy: the student's is
      // refreshed every step, the teacher's (not trained here) made once.
      if (!cfg.on_policy && !teacher_generator) teacher_generator = sync_rollout_model(teacher);
      std::shared_ptr<model::DecoderModel> generator = cfg.on_policy ? sync_rollout_model(student) : teacher_generator;
      const Role& gen_role = cfg.on_policy ? student : teacher;
      torch::NoGradGuard no_grad;
      generator->eval();
      rollout::Engine engine(generator, gen_role.tokenizer.get(), {gen_role.config->rollout.max_batch, true});
      gen.seed = static_cast<uint64_t>(pipeline.run.seed) * 1000003u + static_cast<uint64_t>(step);
      gen.prompt_offset = student.dp_rank * local_batch;
      for (auto& s : engine.generate(p_ids, 1, gen)) r_ids.push_back(s.tokens);
      student.model->train();
    } else {
      for (size_t i : rows) r_ids.push_back(prompts.response_ids(data.train[i]));
    }
    for (auto& r : r_ids)
      if (r.empty()) r.push_back(prompts.stop_ids().front());  // an immediate stop is still a target
    TokenBatch batch = make_token_batch(p_ids, r_ids, std::max(0, student.tokenizer->pad_id()),
                                        std::lcm(student.ctx.sp_size(), teacher.ctx.sp_size()), student.device());
    at::Tensor counts = at::tensor({double(batch.loss_mask.sum().item<double>())}, at::kDouble);
    if (student.ctx.dp && student.ctx.dp->size() > 1) student.ctx.dp->all_reduce(counts);
    const double global_tokens = std::max(1.0, counts.item<double>());

    TopK tk;  // [B, T, k] for the whole local batch, in the same micro-batches as the student's
    if (!cfg.sequence_level) {
      trace::ScopedSpan span("distill/teacher_forward");
      tk = teacher_topk(teacher, batch, cfg.top_k > 0 ? cfg.top_k : teacher.model->arch().vocab_size, T,
                        micro_batch_options(cfg.train, teacher.ctx.sp_size()));
    }
    at::Tensor loss_sum = at::zeros({1}, at::TensorOptions(at::kDouble).device(student.device()));
    {
      trace::ScopedSpan span("distill/student_update");
      const int sp = student.ctx.sp_size();
      // Each micro-batch (trimmed or packed): its sp shard and the teacher's top-k in its layout.
      const auto plan = plan_micro_batches(batch, micro_batch_options(cfg.train, sp));
      std::vector<TokenBatch> shards;
      std::vector<TopK> teacher_topks;
      for (const MicroBatch& mb : plan) {
        shards.push_back(sequence_shard(mb.tokens, student.ctx.sp_rank(), sp));
        teacher_topks.push_back({mb.gather_chunk(tk.ids, student.ctx.sp), mb.gather_chunk(tk.logprob, student.ctx.sp)});
      }
      // A micro-batch's loss from the student's final hidden states.
      auto micro_loss = [&](size_t i, const at::Tensor& hidden) {
        at::Tensor per_token;  // [R, L/sp]
        if (cfg.sequence_level) {
          per_token = -student.model->token_logprobs(hidden, shards[i].targets, false).logprobs;
        } else {
          at::Tensor ls = logprobs_at(student, hidden, teacher_topks[i].ids, T);  // [R, L/sp, k]
          per_token = distill_divergence_on_support(ls, teacher_topks[i].logprob, kind, cfg.beta);
        }
        at::Tensor total = (per_token * shards[i].loss_mask).sum();
        loss_sum += total.detach().to(at::kDouble);
        return total * (grad_group / global_tokens);
      };
      // With pp the loss is computed on the student's last stage.
      forward_backward(student, trainer, shards, micro_loss, aux_loss_weights_by_rows(plan, local_batch));
    }
    double grad_norm = trainer.finish_step("distill", step, world_rank);
    share_from_last_stage(student, loss_sum);
    if (student.ctx.grad && student.ctx.grad->size() > 1) student.ctx.grad->all_reduce(loss_sum);
    const double loss = loss_sum.item<double>() / global_tokens;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (env.metrics)
      env.metrics->write("distill", env.stage_index, step + 1,
                         {{"loss", loss}, {"lr", trainer.lr(step)}, {"grad_norm", grad_norm},
                          {"tokens_per_s", global_tokens / seconds}, {"seconds/step", seconds}});
    return loss;
  };

  student.model->train();
  StageLoop loop;
  loop.name = "distill";
  loop.start = start;
  loop.total = cfg.steps;
  loop.eval_every = cfg.eval_every;
  loop.stop_at_accuracy = cfg.stop_at_accuracy;
  loop.step = [&](int64_t step) {
    double loss = train_step(step, sampler.next_batch(cfg.batch, student.dp_rank, student.dp_size));
    return fmt::format("loss {:.4f}", loss);
  };
  loop.evaluate = run_eval;
  loop.checkpoint = [&](int64_t step) { checkpoint_stage(env, step, saved, sampler, "distill"); };
  run_stage_loop(env, loop, result);
  return result;
}

}  // namespace hpcrl::algo
