// DecoderModel (decoder_model.h): embedding → layers → final norm, the masks
// and RoPE tables shared by all layers, per-layer activation checkpointing,
// and the LM / value heads.
#include "hpcrl/model/decoder_model.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <mutex>

#include "hpcrl/model/attention_kernel.h"
#include "hpcrl/model/checkpointing.h"
#include "hpcrl/model/weights.h"
#include "hpcrl/parallel/sequence/ulysses.h"
#include "hpcrl/parallel/tensor/comm_ops.h"
#include "hpcrl/util/check.h"

namespace hpcrl::model {

namespace tensor = parallel::tensor;

DecoderBody::DecoderBody(const ModelArch& arch, const parallel::ParallelContext& ctx) {
  embed_tokens = register_module(
      "embed_tokens", std::make_shared<tensor::VocabParallelEmbedding>(arch.vocab_size, arch.hidden_size, ctx.tp));
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < arch.num_layers; ++i) layers->push_back(std::make_shared<DecoderLayer>(arch, ctx));
  norm = register_module("norm", std::make_shared<RmsNorm>(arch.hidden_size, arch.rms_norm_eps));
}

DecoderModel::DecoderModel(const ModelArch& arch, const parallel::ParallelContext& ctx, ModelOptions options)
    : arch_(arch), ctx_(ctx), options_(options), rope_(arch) {
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
    model = register_module("model", std::make_shared<DecoderBody>(arch, ctx));
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(saved);
  }
  if (options.lm_head && !arch.tie_word_embeddings)
    lm_head = register_module(
        "lm_head", std::make_shared<tensor::ColumnParallelLinear>(arch.hidden_size, arch.vocab_size, false, ctx.tp));
  if (options.value_head) score = register_module("score", std::make_shared<ValueHead>(arch.hidden_size));
  if (options.init) init_weights(*this, options.seed);
}

ForwardOutput DecoderModel::forward(const at::Tensor& ids, const at::Tensor& positions,
                                    const at::Tensor& attention_mask, KvCache* cache) {
  HPCRL_CHECK(ids.dim() == 2 && ids.scalar_type() == at::kLong, "ids must be [B, T] int64, got " << ids.sizes()
                                                                                                  << " " << ids.scalar_type());
  const int64_t B = ids.size(0), Tl = ids.size(1);
  const int sp = ctx_.sp_size();
  HPCRL_CHECK(cache == nullptr || sp == 1, "KV-cache decoding needs sp=1 (got sp=" << sp << ")");
  const int64_t past = cache ? cache->length() : 0;
  if (cache && cache->layers.empty()) cache->layers.resize(arch_.num_layers);

  at::Tensor pos = positions;
  if (!pos.defined()) {
    const int64_t first = past + ctx_.sp_rank() * Tl;
    pos = at::arange(first, first + Tl, ids.options()).unsqueeze(0).expand({B, Tl});
  }
  HPCRL_CHECK(pos.sizes() == ids.sizes(), "positions " << pos.sizes() << " do not match ids " << ids.sizes());

  // Which keys are real tokens, over everything attention sees (all sp chunks, the cache).
  at::Tensor key_valid, token_mask;
  if (attention_mask.defined()) {
    at::Tensor mask = attention_mask.to(at::kBool);
    HPCRL_CHECK(mask.dim() == 2 && mask.size(0) == B && mask.size(1) == past + Tl,
                "attention_mask " << mask.sizes() << " must be [B, cached + T] = [" << B << ", " << past + Tl << "]");
    token_mask = mask.narrow(1, past, Tl);
    key_valid = sp > 1 ? parallel::sequence::gather_sequence(mask, ctx_.sp) : mask;
  }
  const int64_t tq = Tl * sp;
  at::Tensor allowed = hpcrl::model::attention_mask(key_valid, tq, past + tq);

  at::Tensor h = model->embed_tokens->forward(ids);  // [B, Tl, C]
  RopeTables rope = rope_.tables(pos, h.scalar_type());
  const bool recompute = options_.activation_checkpointing && is_training() && at::GradMode::is_enabled() && !cache;
  std::vector<at::Tensor> aux;
  for (size_t i = 0; i < model->layers->size(); ++i) {
    auto layer = model->layers->ptr<DecoderLayer>(i);
    LayerOutput out;
    if (recompute) {
      auto fn = [layer, rope, allowed, token_mask](const std::vector<at::Tensor>& in) -> std::vector<at::Tensor> {
        LayerOutput o = layer->forward(in[0], rope, allowed, token_mask, nullptr);
        if (!o.aux_loss.defined()) return {o.hidden};
        return {o.hidden, o.aux_loss};
      };
      auto outs = checkpoint(fn, {h});
      out.hidden = outs[0];
      if (outs.size() > 1) out.aux_loss = outs[1];
    } else {
      out = layer->forward(h, rope, allowed, token_mask, cache ? &cache->layers[i] : nullptr);
    }
    h = out.hidden;
    if (out.aux_loss.defined()) aux.push_back(out.aux_loss);
  }
  h = model->norm->forward(h);
  at::Tensor aux_loss = aux.empty() ? at::zeros({}, h.options().dtype(at::kFloat))
                                    : at::stack(aux).mean() * arch_.router_aux_loss_coef;
  return {h, aux_loss};
}

at::Tensor DecoderModel::local_logits(const at::Tensor& hidden) {
  HPCRL_CHECK(options_.lm_head, "this model was built without an LM head (options.lm_head = false)");
  if (lm_head) return lm_head->forward(hidden);
  return at::linear(tensor::copy_to_tp(hidden, ctx_.tp), model->embed_tokens->weight);  // tied: [B, T, V/tp]
}

tensor::TokenLogProbs DecoderModel::token_logprobs(const at::Tensor& hidden, const at::Tensor& targets,
                                                   bool with_entropy) {
  return tensor::vocab_parallel_logprobs(local_logits(hidden), targets, ctx_.tp, vocab_start(), with_entropy);
}

at::Tensor DecoderModel::values(const at::Tensor& hidden) {
  HPCRL_CHECK(score, "this model was built without a value head (options.value_head = false)");
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
