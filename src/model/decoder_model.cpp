// DecoderModel (decoder_model.h): embedding → layers → final norm, the masks
// and RoPE tables shared by all layers, per-layer activation checkpointing,
// and the LM / value heads.
#include "hpcrl/model/decoder_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/utils.h>

#include <mutex>

#include "hpcrl/model/attention_kernel.h"
#include "hpcrl/model/checkpointing.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/parallel/sequence/ulysses.h"
#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::model {

namespace tensor = parallel::tensor;

namespace {

// Stands in for a layer another pp stage holds: no parameters, so the held
// layers keep their global index (their HF name) in the ModuleList.
class AbsentLayer : public torch::nn::Module {};

HeldParts held_parts(const ModelArch& arch, const PipelineLayout& layout, const std::vector<int>& chunks,
                     const ModelOptions& options) {
  HeldParts held;
  held.layers.assign(arch.num_layers, false);
  for (int c : chunks)
    for (int64_t l = layout.first_layer(c); l < layout.end_layer(c); ++l) held.layers[l] = true;
  const bool first = chunks.front() == 0, last = layout.is_last_chunk(chunks.back());
  held.embedding = first || (last && options.lm_head && arch.tie_word_embeddings);  // tied: the LM head's table
  held.norm = last;
  return held;
}

int pp_virtual(const parallel::ParallelContext& ctx, const ModelOptions& o) {
  return ctx.pp_size() > 1 ? o.pp_virtual_stages : 1;
}

}  // namespace

DecoderBody::DecoderBody(const ModelArch& arch, const parallel::ParallelContext& ctx, const HeldParts& held) {
  if (held.embedding)
    embed_tokens = register_module(
        "embed_tokens", std::make_shared<tensor::VocabParallelEmbedding>(arch.vocab_size, arch.hidden_size, ctx.tp));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < arch.num_layers; ++i) {
    if (held.layers[i]) {
      layers->push_back(std::make_shared<DecoderLayer>(arch, ctx));
    } else {
      if (arch.num_experts > 0) MoeBlock::draw_init_seed();
      layers->push_back(std::make_shared<AbsentLayer>());
    }
  }
  if (held.norm) norm = register_module("norm", std::make_shared<RmsNorm>(arch.hidden_size, arch.rms_norm_eps));
}

DecoderModel::DecoderModel(const ModelArch& arch, const parallel::ParallelContext& ctx, ModelOptions options)
    : arch_(arch),
      ctx_(ctx),
      options_(options),
      layout_(partition_layers(arch, ctx.pp_size(), pp_virtual(ctx, options),
                               ctx.pp_size() > 1 ? options.pp_layers : std::vector<int64_t>{}, options.lm_head,
                               options.value_head)),
      local_chunks_(layout_.chunks_of_rank(ctx.pp_rank())),
      held_(held_parts(arch, layout_, local_chunks_, options)),
      rope_(arch) {
  HPCRL_CHECK_INPUT(options.lm_head || options.value_head, "a model needs an LM head, a value head or both");
  {
    // MoE blocks draw their initial seed from the global generator: seed it from
    // options.seed so every rank and layout builds the same experts, then put
    // the caller's RNG stream back.
    auto gen = at::detail::getDefaultCPUGenerator();
    at::Tensor saved;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      saved = gen.get_state();
      gen.set_current_seed(options.seed ^ 0x9e3779b97f4a7c15ULL);
    }
    model = register_module("model", std::make_shared<DecoderBody>(arch, ctx, held_));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(saved);
  }
  const bool last = holds_last_chunk();
  if (options.lm_head && !arch.tie_word_embeddings && last)
    lm_head = register_module(
        "lm_head", std::make_shared<tensor::ColumnParallelLinear>(arch.hidden_size, arch.vocab_size, false, ctx.tp));
  if (options.value_head && last) score = register_module("score", std::make_shared<ValueHead>(arch.hidden_size));
  if (options.init) init_weights(*this, options.seed);
}

namespace {

// The global layer index of "model.layers.N.*"; -1 for other names.
int64_t layer_index(const std::string& name) {
  const std::string prefix = "model.layers.";
  if (!str::starts_with(name, prefix)) return -1;
  const size_t dot = name.find('.', prefix.size());
  const std::string index = name.substr(prefix.size(), dot == std::string::npos ? dot : dot - prefix.size());
  if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos) return -1;
  return std::stoll(index);
}

}  // namespace

bool DecoderModel::holds_tensor(const std::string& name) const {
  if (str::starts_with(name, "model.layers.")) {
    const int64_t i = layer_index(name);
    return i >= 0 && i < arch_.num_layers && held_.layers[i];
  }
  if (str::starts_with(name, "model.embed_tokens.")) return held_.embedding;
  if (str::starts_with(name, "model.norm.")) return held_.norm;
  if (str::starts_with(name, "lm_head.") || str::starts_with(name, "score.")) return holds_last_chunk();
  return true;
}

bool DecoderModel::on_other_stage(const std::string& name) const {
  if (is_whole()) return false;
  const int64_t i = layer_index(name);
  if (str::starts_with(name, "model.layers.") && (i < 0 || i >= arch_.num_layers)) return false;
  return !holds_tensor(name);
}

ForwardOutput DecoderModel::forward(const at::Tensor& ids, const at::Tensor& positions,
                                    const at::Tensor& attention_mask, KvCache* cache) {
  HPCRL_CHECK(is_whole(), "this rank holds only pp stage " << ctx_.pp_rank() << " of " << layout_.describe()
                                                           << "; run a pipelined model through "
                                                              "model/pipeline_stage.h and parallel/pipeline");
  HPCRL_CHECK(ids.dim() == 2 && ids.scalar_type() == at::kLong, "ids must be [B, T] int64, got " << ids.sizes()
                                                                                                  << " " << ids.scalar_type());
  if (cache && cache->layers.empty()) cache->layers.resize(arch_.num_layers);
  // The outer unit stays gathered after the forward: the heads read it next.
  if (units_) units_->before_forward(ParameterUnits::kOuter);
  at::Tensor h = model->embed_tokens->forward(ids);  // [B, Tl, C]
  LayerInputs in = layer_inputs(ids, positions, attention_mask, cache, h.scalar_type());
  ForwardOutput out = run_layers(h, 0, arch_.num_layers, in, cache);
  out.hidden = model->norm->forward(out.hidden);
  return out;
}

LayerInputs DecoderModel::layer_inputs(const at::Tensor& ids, const at::Tensor& positions,
                                       const at::Tensor& attention_mask, KvCache* cache, at::ScalarType dtype) {
  HPCRL_CHECK(ids.dim() == 2, "ids must be [B, T], got " << ids.sizes());
  const int64_t B = ids.size(0), Tl = ids.size(1);
  const int sp = ctx_.sp_size();
  HPCRL_CHECK(cache == nullptr || sp == 1, "KV-cache decoding needs sp=1 (got sp=" << sp << ")");
  const int64_t past = cache ? cache->length() : 0;

  at::Tensor pos = positions;
  if (!pos.defined()) {
    const int64_t first = past + ctx_.sp_rank() * Tl;
    pos = at::arange(first, first + Tl, ids.options().dtype(at::kLong)).unsqueeze(0).expand({B, Tl});
  }
  HPCRL_CHECK(pos.sizes() == ids.sizes(), "positions " << pos.sizes() << " do not match ids " << ids.sizes());

  // The segment of every key attention sees (all sp chunks, the cache): 0 for
  // padding, one id per sequence of a packed row.
  LayerInputs in;
  at::Tensor key_segments;
  if (attention_mask.defined()) {
    at::Tensor segments = attention_mask.to(at::kLong);
    HPCRL_CHECK(segments.dim() == 2 && segments.size(0) == B && segments.size(1) == past + Tl,
                "attention_mask " << segments.sizes() << " must be [B, cached + T] = [" << B << ", " << past + Tl
                                  << "]");
    in.token_mask = segments.narrow(1, past, Tl) != 0;
    key_segments = sp > 1 ? parallel::sequence::gather_sequence(segments, ctx_.sp) : segments;
  }
  const int64_t tq = Tl * sp;
  in.allowed = hpcrl::model::attention_mask(key_segments, tq, past + tq);
  in.rope = rope_.tables(pos, dtype);
  return in;
}

ForwardOutput DecoderModel::run_layers(at::Tensor h, int64_t first, int64_t end, const LayerInputs& in,
                                       KvCache* cache) {
  const bool recompute = options_.activation_checkpointing && is_training() && at::GradMode::is_enabled() && !cache;
  // A checkpointed block's output needs gradients only if its input has them;
  // with a frozen embedding (LoRA) the first input has none, yet the adapters
  // inside need the backward (PEFT's enable_input_require_grads).
  if (recompute && !h.requires_grad()) h = h.detach().requires_grad_(true);
  std::vector<at::Tensor> aux;
  for (int64_t i = first; i < end; ++i) {
    auto layer = model->layers->ptr<DecoderLayer>(i);
    HPCRL_CHECK(layer, "layer " << i << " is not on this pp stage (" << layout_.describe() << ")");
    LayerOutput out;
    if (units_) units_->before_forward(i);
    if (recompute) {
      const RopeTables& rope = in.rope;
      const at::Tensor &allowed = in.allowed, &token_mask = in.token_mask;
      auto fn = [layer, rope, allowed, token_mask](const std::vector<at::Tensor>& x) -> std::vector<at::Tensor> {
        LayerOutput o = layer->forward(x[0], rope, allowed, token_mask, nullptr);
        if (!o.aux_loss.defined()) return {o.hidden};
        return {o.hidden, o.aux_loss};
      };
      auto outs = checkpoint(fn, {h});
      out.hidden = outs[0];
      if (outs.size() > 1) out.aux_loss = outs[1];
    } else {
      out = layer->forward(h, in.rope, in.allowed, in.token_mask, cache ? &cache->layers[i] : nullptr);
    }
    // The backward reaches the layer's parameters only through its hidden
    // output (the aux loss flows through the router, which feeds it), so the
    // gather for the backward waits on that gradient alone.
    if (units_) units_->after_forward(i, out.hidden);
    h = out.hidden;
    if (out.aux_loss.defined()) aux.push_back(out.aux_loss);
  }
  // This range's share of coef × mean over all of the model's MoE layers.
  at::Tensor aux_loss = aux.empty() ? at::zeros({}, h.options().dtype(at::kFloat))
                                    : at::stack(aux).sum() * (arch_.router_aux_loss_coef / double(arch_.num_layers));
  return {h, aux_loss};
}

at::Tensor DecoderModel::local_logits(const at::Tensor& hidden, double temperature) {
  HPCRL_CHECK(options_.lm_head, "this model was built without an LM head (options.lm_head = false)");
  HPCRL_CHECK(holds_last_chunk(), "the LM head is on the last pp stage; this rank is pp stage " << ctx_.pp_rank());
  HPCRL_CHECK(temperature > 0, "local_logits: temperature must be > 0, got " << temperature);
  if (units_) units_->before_forward(ParameterUnits::kOuter);
  at::Tensor logits = lm_head ? lm_head->forward(hidden)
                              : at::linear(tensor::copy_to_tp(hidden, ctx_.tp), model->embed_tokens->weight);  // tied
  if (temperature == 1.0) return logits;  // [B, T, V/tp]
  return logits.to(at::kFloat) / temperature;
}

tensor::TokenLogProbs DecoderModel::token_logprobs(const at::Tensor& hidden, const at::Tensor& targets,
                                                   bool with_entropy, double temperature) {
  return tensor::vocab_parallel_logprobs(local_logits(hidden, temperature), targets, ctx_.tp, vocab_start(),
                                         with_entropy);
}

at::Tensor DecoderModel::values(const at::Tensor& hidden) {
  HPCRL_CHECK(score, "this model was built without a value head (options.value_head = false)");
  if (units_) units_->before_forward(ParameterUnits::kOuter);
  return score->forward(hidden);
}

KvCache DecoderModel::new_kv_cache() const {
  KvCache c;
  c.layers.resize(arch_.num_layers);
  return c;
}

std::map<std::string, tensor::ShardSpec> DecoderModel::shard_specs() {
  std::map<std::string, tensor::ShardSpec> specs;
  for (const auto& p : named_parameters(/*recurse=*/true)) specs[p.key()] = tensor::ShardSpec{};
  for (const auto& m : named_modules(/*name_prefix=*/"", /*include_self=*/false)) {
    auto* sharded = dynamic_cast<tensor::ShardedModule*>(m.value().get());
    if (!sharded) continue;
    for (const auto& [name, spec] : sharded->shard_specs()) specs[m.key() + "." + name] = spec;
  }
  return specs;
}

}  // namespace hpcrl::model
