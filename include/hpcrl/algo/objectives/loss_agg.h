// How per-token losses become one number. The choice matters for long
// responses (DAPO, Dr.GRPO): token_mean weighs every token equally across the
// batch; seq_mean_token_mean weighs every sequence equally (long answers' tokens
// count less); seq_mean_token_sum sums each sequence (length-biased, Dr.GRPO's
// "no length normalisation" when followed by a constant scale).
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "hpcrl/config/enums.h"

namespace hpcrl::algo {

using config::LossAgg;  // token_mean | seq_mean_token_sum | seq_mean_token_mean, as the YAML spells it

// values, mask: [B, T] (mask 1 on response tokens). Returns a scalar.
at::Tensor aggregate(const at::Tensor& values, const at::Tensor& mask, LossAgg agg);

// The aggregate as numerator / denominator, so a batch split over micro-batches
// and dp ranks can divide by the global denominator: the sum of masked values
// (token_mean), of per-row sums (seq_mean_token_sum) or of per-row means
// (seq_mean_token_mean); the denominator counts tokens or rows accordingly.
at::Tensor aggregate_numerator(const at::Tensor& values, const at::Tensor& mask, LossAgg agg);
// The numerator as per-token weights, Σ values · weights: the mask, divided by
// each row's token count for seq_mean_token_mean. Computed on whole rows, they
// stay right when the rows are later cut over sp ranks or packed.
at::Tensor loss_weights(const at::Tensor& mask, LossAgg agg);
double aggregate_denominator(const at::Tensor& mask, LossAgg agg);

// Mean of `values` over the masked tokens (a scalar).
at::Tensor masked_mean(const at::Tensor& values, const at::Tensor& mask);

}  // namespace hpcrl::algo
