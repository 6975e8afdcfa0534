// The distillation stage loop (see distill_stage.h).
#include "hpcrl/util/check.h"
#include "hpcrl/algo/distill_stage.h"

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <chrono>
#include <numeric>

#include "hpcrl/algo/distill_loss.h"
#include "hpcrl/algo/evaluation.h"
#include "hpcrl/algo/prompting.h"
#include "hpcrl/algo/reward_fn.h"
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

  const DistillLoss kind = parse_distill_loss(config::to_string(cfg.loss));
  Trainer trainer(student, cfg.train, cfg.steps);
  PromptBuilder prompts(*student.tokenizer, pipeline.find_data(cfg.data));
  io::DataSampler sampler(data.train.size(), static_cast<uint64_t>(pipeline.run.seed) + 17u * env.stage_index,
                          pipeline.find_data(cfg.data)->shuffle);
  const int64_t local_batch = student.local_batch(cfg.batch, env.stage->path + ".batch");
  const int64_t micro = cfg.train.micro_batch > 0 ? std::min(cfg.train.micro_batch, local_batch) : local_batch;
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

  auto train_step = [&](int64_t step, const std::vector<size_t>& rows) {
    trace::ScopedSpan step_span("distill/step", {{"step", double(step)}});
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::vector<int32_t>> p_ids, r_ids;
    for (size_t i : rows) p_ids.push_back(prompts.prompt_ids(data.train[i]));
    if (cfg.on_policy || cfg.sequence_level) {
      trace::ScopedSpan span("distill/rollout");
      Role& gen_role = cfg.on_policy ? student : teacher;
      torch::NoGradGuard no_grad;
      gen_role.model->eval();
      rollout::Engine engine(gen_role.model, gen_role.tokenizer.get(), {gen_role.config->rollout.max_batch, true});
      gen.seed = static_cast<uint64_t>(pipeline.run.seed) * 1000003u + static_cast<uint64_t>(step);
      gen.prompt_offset = student.dp_rank * local_batch;
      for (auto& s : engine.generate(p_ids, 1, gen)) r_ids.push_back(s.tokens);
      gen_role.model->train();
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

    at::Tensor loss_sum = at::zeros({1}, at::TensorOptions(at::kDouble).device(student.device()));
    for (int64_t m = 0; m < local_batch; m += micro) {
      TokenBatch full = slice_rows(batch, m, std::min(local_batch, m + micro));
      TopK tk;
      if (!cfg.sequence_level) {
        trace::ScopedSpan span("distill/teacher_forward");
        torch::NoGradGuard no_grad;
        TokenBatch tb = sequence_shard(full, teacher.ctx.sp_rank(), teacher.ctx.sp_size());
        auto out = teacher.model->forward(tb.ids);
        const int64_t k = cfg.top_k > 0 ? cfg.top_k : teacher.model->arch().vocab_size;
        tk = vocab_parallel_topk(teacher, out.hidden, k, T);
        if (teacher.ctx.sp_size() > 1) {
          tk.ids = teacher.ctx.sp->all_gather(tk.ids.contiguous(), 1);
          tk.logprob = teacher.ctx.sp->all_gather(tk.logprob.contiguous(), 1);
        }
      }
      trace::ScopedSpan span("distill/student_update");
      TokenBatch sb = sequence_shard(full, student.ctx.sp_rank(), student.ctx.sp_size());
      trainer.begin_micro_batch(m + micro >= local_batch);
      auto out = student.model->forward(sb.ids);
      at::Tensor per_token;  // [b, T/sp]
      if (cfg.sequence_level) {
        per_token = -student.model->token_logprobs(out.hidden, sb.targets, false).logprobs;
      } else {
        const int sp = student.ctx.sp_size();
        const int64_t chunk = full.ids.size(1) / sp, lo = student.ctx.sp_rank() * chunk;
        at::Tensor ids = tk.ids.slice(1, lo, lo + chunk);
        at::Tensor ls = logprobs_at(student, out.hidden, ids, T);  // [b, T/sp, k]
        per_token = distill_divergence_on_support(ls, tk.logprob.slice(1, lo, lo + chunk), kind, cfg.beta);
      }
      at::Tensor total = (per_token * sb.loss_mask).sum();
      at::Tensor loss = total * (grad_group / global_tokens);
      if (out.aux_loss.defined()) loss = loss + out.aux_loss * (double(full.rows()) / local_batch);
      loss.backward();
      loss_sum += total.detach().to(at::kDouble);
    }
    double grad_norm = trainer.finish_step("distill", step, world_rank);
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
  loop.step = [&](int64_t step) {
    double loss = train_step(step, sampler.next_batch(cfg.batch, student.dp_rank, student.dp_size));
    return "loss " + std::to_string(loss).substr(0, 6);
  };
  loop.evaluate = run_eval;
  loop.checkpoint = [&](int64_t step) { checkpoint_stage(env, step, saved, sampler, "distill"); };
  run_stage_loop(env, loop, result);
  return result;
}

}  // namespace hpcrl::algo
