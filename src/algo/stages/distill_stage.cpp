// The distillation stage loop (see distill_stage.h).
#include "hpcrl/algo/stages/distill_stage.h"

#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include <memory>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "hpcrl/algo/objectives/distill_loss.h"
#include "hpcrl/algo/stages/evaluation.h"
#include "hpcrl/algo/training/forward_backward.h"
#include "hpcrl/algo/training/pipeline_train.h"
#include "hpcrl/algo/stages/prompting.h"
#include "hpcrl/algo/remote/remote_teacher.h"
#include "hpcrl/algo/objectives/reward_fn.h"
#include "hpcrl/algo/training/role_sums.h"
#include "hpcrl/algo/stages/rollout_copy.h"
#include "hpcrl/algo/stages/stage_loop.h"
#include "hpcrl/algo/objectives/teacher_topk.h"
#include "hpcrl/algo/training/token_batch.h"
#include "hpcrl/algo/training/train_step.h"
#include "hpcrl/rollout/engine.h"
#include "hpcrl/trace/trace.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
void check_pair(const config::DistillStage& cfg, const Role& teacher, const Role& student, const std::string& where) {
  const auto& ta = *teacher.config->arch;
  const auto& sa = *student.config->arch;
  HPCRL_CHECK_INPUT(ta.vocab_size == sa.vocab_size, where << ": teacher '" << teacher.name << "' has vocabulary "
                    << ta.vocab_size << " but student '" << student.name << "' has " << sa.vocab_size
                    << "; distillation needs one tokenizer: pick a student of the teacher's family");
  HPCRL_CHECK_INPUT(teacher.mesh.dp() == student.mesh.dp(),
                    where << ": teacher dp=" << teacher.mesh.dp() << " differs from student dp=" << student.mesh.dp()
                    << "; give both roles layouts with the same data-parallel size");
  HPCRL_CHECK_INPUT(cfg.top_k > 0 || (teacher.mesh.tp() == 1 && student.mesh.tp() == 1),
                    where << ".top_k: full-vocabulary distillation (top_k: 0) needs tp=1 for teacher and student; "
                    "set top_k (e.g. 64) to distil across tensor-parallel layouts");
}

// One distillation stage run: the student learns the teacher's token
// distributions (top-k support or the full vocabulary) on dataset responses,
// its own (on-policy) or the teacher's (sequence-level).
class DistillRun : public StageSteps {
 public:
  explicit DistillRun(StageEnv& env);
  StageResult run();

  std::string step(int64_t step) override;
  void evaluate(int64_t step) override;
  void checkpoint(int64_t step, bool eval_owed) override {
    checkpoint_stage(env_, step, saved_, sampler_, "distill", eval_owed);
  }

 private:
  double train_step(int64_t step, const std::vector<size_t>& rows);
  // The responses the student learns on: the dataset's, or generated.
  std::vector<std::vector<int32_t>> responses(int64_t step, const std::vector<size_t>& rows,
                                              const std::vector<std::vector<int32_t>>& p_ids);
  std::vector<std::vector<int32_t>> generate(int64_t step, const std::vector<std::vector<int32_t>>& p_ids);
  // The teacher's top-k of `batch`: computed here, or asked of the teacher's own ranks.
  TopK teacher_topk_of(const TokenBatch& batch);
  // The student's forward and backward; returns this rank's loss sum (at pp > 1 on the last stage only).
  at::Tensor student_forward_backward(const TokenBatch& batch, const TopK& teacher, double global_tokens);

  StageEnv& env_;
  const config::DistillStage& cfg_;
  Role& teacher_;
  Role& student_;
  const DataSplits& data_;
  StageResult result_;
  std::unique_ptr<RemoteTeacher> remote_teacher_;  // the teacher on ranks of its own
  std::optional<Trainer> trainer_;                 // on the student's ranks
  std::optional<PromptBuilder> prompts_;  // on the student's ranks, which build the batches
  io::DataSampler sampler_;
  int64_t local_batch_;
  std::vector<TrainedRole> saved_;
  RewardFunction verifier_;
  rollout::SamplingParams sampling_;
  std::shared_ptr<model::DecoderModel> teacher_generator_;  // sequence-level: what the teacher generates with
  // Kept from step to step (its packed weights keep their memory: engine.h);
  // made again only if the model it generates with is another object.
  std::unique_ptr<rollout::Engine> engine_;
  InsideStops eval_stops_;
};

// Distributions are matched at the models' own temperature.
constexpr double kDistillTemperature = 1.0;

// The teacher on ranks of its own, apart from the student's (docs/placement.md).
bool teacher_apart(const Role& teacher, const Role& student) {
  return teacher.mesh.first_rank() != student.mesh.first_rank();
}

Role& checked_student(StageEnv& env) {
  const config::DistillStage& cfg = std::get<config::DistillStage>(env.stage->body);
  Role& teacher = env.role(cfg.teacher);
  Role& student = env.role(cfg.student);
  // Sharing ranks, a rank holds both or neither (a rank of another stage's role idles here).
  HPCRL_CHECK_INPUT(teacher_apart(teacher, student) || teacher.member() == student.member(),
                    env.stage->path << ": the teacher and the student must share their ranks exactly or have "
                    "ranks of their own each");
  check_pair(cfg, teacher, student, env.stage->path);
  if (!teacher_apart(teacher, student)) check_same_rows(env.world, student, teacher, env.stage->path);
  return student;
}

DistillRun::DistillRun(StageEnv& env)
    : env_(env),
      cfg_(std::get<config::DistillStage>(env.stage->body)),
      teacher_(env.role(cfg_.teacher)),
      student_(checked_student(env)),
      data_(env.data(cfg_.data)),
      sampler_(data_.train.size(), static_cast<uint64_t>(env.pipeline->run.seed) + 17u * env.stage_index,
               env.pipeline->find_data(cfg_.data)->shuffle, io::content_hash(data_.train)),
      local_batch_(student_.local_batch(cfg_.batch, env.stage->path + ".batch")),
      verifier_(*env.pipeline, {}) {
  if (student_.member()) {
    prompts_.emplace(*student_.tokenizer, env.pipeline->find_data(cfg_.data));
    sampling_ = stage_sampling(cfg_.sampling, prompts_->stop_ids());
  }
  if (student_.member()) trainer_.emplace(student_, cfg_.train, cfg_.steps);
  saved_ = {{&student_, trainer_ ? &trainer_->optimizer() : nullptr}};
  eval_stops_ = InsideStops(env, student_);
  if (teacher_apart(teacher_, student_))
    remote_teacher_ = std::make_unique<RemoteTeacher>(teacher_, student_, env.world->size(),
                                                      cfg_.top_k > 0 ? cfg_.top_k : teacher_.config->arch->vocab_size,
                                                      cfg_.train, kDistillTemperature);
}

StageResult DistillRun::run() {
  StageLoop loop;
  loop.name = "distill";
  loop.start = resume_stage(env_, saved_, sampler_, "distill", &loop.eval_owed);
  if (student_.member()) student_.model->train();
  loop.total = cfg_.steps;
  loop.eval_every = cfg_.eval_every;
  loop.stop_at_accuracy = cfg_.stop_at_accuracy;
  run_stage_loop(env_, loop, *this, result_);
  return result_;
}

std::string DistillRun::step(int64_t step) {
  // Every rank draws, so the data cursor a checkpoint records is the same on all of them.
  const auto rows = sampler_.next_batch(cfg_.batch, student_.ctx.dp_rank(), student_.mesh.dp());
  if (!student_.member()) {
    if (remote_teacher_ && teacher_.member()) remote_teacher_->serve();
    return "";
  }
  return fmt::format("loss {:.4f}", train_step(step, rows));
}

double DistillRun::train_step(int64_t step, const std::vector<size_t>& rows) {
  trace::TimedSpan step_span("distill/step", {{"step", double(step)}});
  std::vector<std::vector<int32_t>> p_ids;
  for (size_t i : rows) p_ids.push_back(prompts_->prompt_ids(data_.train[i]));
  const std::vector<std::vector<int32_t>> r_ids = responses(step, rows, p_ids);
  TokenBatch batch = make_token_batch(p_ids, r_ids, std::max(0, student_.tokenizer->pad_id()),
                                      std::lcm(student_.mesh.sp(), teacher_.mesh.sp()), student_.device());
  const double global_tokens = std::max(1.0, sum_over_dp(student_, batch.loss_mask.sum().item<double>()));
  TopK teacher_tk;  // [B, T, k] for the whole local batch, in the same micro-batches as the student's
  if (!cfg_.sequence_level) teacher_tk = teacher_topk_of(batch);
  at::Tensor loss_sum = student_forward_backward(batch, teacher_tk, global_tokens);
  const double grad_norm = trainer_->finish_step("distill", step, env_.world->rank());
  sum_step_values(student_, loss_sum);
  const double loss = loss_sum.item<double>() / global_tokens;
  const double seconds = step_span.elapsed_seconds();
  write_step_metrics(env_, "distill", step,
                     {loss, trainer_->lr(step), grad_norm, global_tokens / seconds, seconds, batch.mean_row_tokens(),
                      double(batch.padded_row_tokens()),
                      trainer_->skips_nonfinite() ? double(trainer_->skipped_steps()) : -1.0});
  return loss;
}

TopK DistillRun::teacher_topk_of(const TokenBatch& batch) {
  trace::ScopedSpan span("distill/teacher_forward");
  if (remote_teacher_) return remote_teacher_->topk(batch);
  return teacher_topk(teacher_, batch, cfg_.top_k > 0 ? cfg_.top_k : teacher_.model->arch().vocab_size,
                      kDistillTemperature, micro_batch_options(cfg_.train, teacher_.ctx.sp_size()));
}

std::vector<std::vector<int32_t>> DistillRun::responses(int64_t step, const std::vector<size_t>& rows,
                                                        const std::vector<std::vector<int32_t>>& p_ids) {
  std::vector<std::vector<int32_t>> r_ids;
  if (cfg_.on_policy || cfg_.sequence_level) {
    r_ids = generate(step, p_ids);
  } else {
    for (size_t i : rows) r_ids.push_back(prompts_->response_ids(data_.train[i]));
  }
  for (auto& r : r_ids)
    if (r.empty()) r.push_back(prompts_->stop_ids().front());  // an immediate stop is still a target
  return r_ids;
}

std::vector<std::vector<int32_t>> DistillRun::generate(int64_t step, const std::vector<std::vector<int32_t>>& p_ids) {
  trace::ScopedSpan span("distill/rollout");
  // A pipelined role generates from its pp = 1 copy: the student's is
  // refreshed every step, the teacher's (not trained here) made once.
  if (!cfg_.on_policy && !teacher_generator_) teacher_generator_ = sync_rollout_model(teacher_);
  std::shared_ptr<model::DecoderModel> generator = cfg_.on_policy ? sync_rollout_model(student_) : teacher_generator_;
  const Role& gen_role = cfg_.on_policy ? student_ : teacher_;
  torch::NoGradGuard no_grad;
  generator->eval();
  if (!engine_ || &engine_->model() != generator.get())
    engine_ = std::make_unique<rollout::Engine>(generator, gen_role.tokenizer.get(),
                                                rollout_engine_options(gen_role, gen_role.config->rollout.max_batch));
  sampling_.seed = static_cast<uint64_t>(env_.pipeline->run.seed) * 1000003u + static_cast<uint64_t>(step);
  sampling_.prompt_offset = student_.ctx.dp_rank() * local_batch_;
  std::vector<std::vector<int32_t>> r_ids;
  for (auto& s : engine_->generate(p_ids, 1, sampling_)) r_ids.push_back(s.tokens);
  student_.model->train();
  return r_ids;
}

at::Tensor DistillRun::student_forward_backward(const TokenBatch& batch, const TopK& teacher, double global_tokens) {
  trace::ScopedSpan span("distill/student_update");
  const int sp = student_.ctx.sp_size();
  const double grad_group = student_.ctx.grad ? student_.ctx.grad->size() : 1;
  // Each micro-batch (trimmed or packed): its sp shard and the teacher's top-k in its layout.
  const auto plan = plan_micro_batches(batch, micro_batch_options(cfg_.train, sp));
  std::vector<TokenBatch> shards;
  std::vector<TopK> teacher_topks;
  for (const MicroBatch& mb : plan) {
    shards.push_back(sequence_shard(mb.tokens, student_.ctx.sp_rank(), sp));
    teacher_topks.push_back({mb.gather_chunk(teacher.ids, student_.ctx.sp), mb.gather_chunk(teacher.logprob, student_.ctx.sp)});
  }
  at::Tensor loss_sum = at::zeros({1}, at::TensorOptions(at::kDouble).device(student_.device()));
  // A micro-batch's loss from the student's final hidden states.
  auto micro_loss = [&](size_t i, const at::Tensor& hidden) {
    at::Tensor per_token;  // [R, L/sp]
    if (cfg_.sequence_level) {
      per_token = -student_.model->token_logprobs(hidden, shards[i].targets, false).logprobs;
    } else {
      at::Tensor ls = logprobs_at(student_, hidden, teacher_topks[i].ids, kDistillTemperature);  // [R, L/sp, k]
      per_token = distill_divergence_on_support(ls, teacher_topks[i].logprob, cfg_.loss, cfg_.beta);
    }
    at::Tensor total = (per_token * shards[i].loss_mask).sum();
    loss_sum += total.detach().to(at::kDouble);
    return total * (grad_group / global_tokens);
  };
  // With pp the loss is computed on the student's last stage.
  forward_backward(student_, *trainer_, shards, micro_loss, aux_loss_weights_by_rows(plan, local_batch_));
  return loss_sum;
}

void DistillRun::evaluate(int64_t step) {
  if (data_.eval.size() == 0 || !student_.member()) return;
  EvalOptions options = eval_options(*env_.pipeline);
  options.stops = &eval_stops_;
  auto r = algo::evaluate(student_, data_.eval, *prompts_, verifier_.verifier(), options);
  result_.eval_accuracy = r.accuracy;
  result_.eval_loss = r.loss;
  spdlog::info("distill step {}: student eval accuracy {:.3f}, loss {:.4f}", step, r.accuracy, r.loss);
  if (env_.metrics)
    env_.metrics->write("distill", env_.stage_index, step,
                        {{"eval/accuracy", r.accuracy}, {"eval/loss", r.loss}, {"seconds/eval", r.seconds}});
  if (env_.metrics) env_.metrics->write_samples("distill", env_.stage_index, step, r.samples);
}

}  // namespace

StageResult run_distill(StageEnv& env) { return DistillRun(env).run(); }

}  // namespace hpcrl::algo
