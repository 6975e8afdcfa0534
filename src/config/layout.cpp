// Layout arithmetic (layout.h): whether a role's {tp, sp, ep, pp} fits its rank
// count and its model (docs/communication.md), and the rank bookkeeping of placement.
// Messages spell out every factor ("tp·sp·pp = 2·1·3 = 6 does not divide 8
// ranks"), because the user fixing them is choosing numbers, not reading code.
#include "hpcrl/config/layout.h"

#include <algorithm>
#include <numeric>

#include "hpcrl/util/strings.h"

namespace hpcrl::config {

namespace {

std::string s(int64_t v) { return std::to_string(v); }

std::string divisors(int64_t n, int64_t limit = 12) {
  std::vector<std::string> out;
  for (int64_t d = 1; d <= n && static_cast<int64_t>(out.size()) < limit; ++d)
    if (n % d == 0) out.push_back(s(d));
  return str::join(out, ", ");
}

}  // namespace

int64_t data_parallel_degree(const ParallelConfig& p, int64_t ranks) {
  int64_t model = p.tp * p.sp * p.pp;
  return ranks > 0 && ranks % model == 0 ? ranks / model : 0;
}

int64_t rank_granularity(const ParallelConfig& p) { return p.tp * p.pp * std::lcm(p.sp, p.ep); }

std::vector<LayoutProblem> check_layout(const ParallelConfig& p, int64_t ranks, const ModelDims* dims) {
  std::vector<LayoutProblem> out;
  if (ranks > 0) {
    int64_t model = p.tp * p.sp * p.pp;
    if (ranks % model != 0) {
      out.push_back({"", "tp·sp·pp = " + s(p.tp) + "·" + s(p.sp) + "·" + s(p.pp) + " = " + s(model) +
                             " does not divide the role's " + s(ranks) + " ranks",
                     "choose tp, sp, pp whose product divides " + s(ranks) + " (one of " + divisors(ranks) +
                         "); dp = ranks / (tp·sp·pp)" +
                         (ranks == 1 ? "; or launch " + s(model) + " processes, one rank each: `mpirun -np " +
                                           s(model) + " hpcrl run …` (or srun -n " + s(model) + ")"
                                     : std::string())});
    } else {
      int64_t dp = ranks / model;
      if ((p.sp * dp) % p.ep != 0)
        out.push_back({"ep", "ep = " + s(p.ep) + " does not divide sp·dp = " + s(p.sp) + "·" + s(dp) + " = " +
                                 s(p.sp * dp) + " (experts are sharded over the sp·dp ranks of each tp slot; dp = " +
                                 s(ranks) + " / (tp·sp·pp = " + s(model) + "))",
                       "use an ep that divides " + s(p.sp * dp) + " (one of " + divisors(p.sp * dp) + ")"});
    }
  }
  if (!dims) return out;
  int64_t tpsp = p.tp * p.sp;
  if (dims->heads > 0 && dims->heads % tpsp != 0)
    out.push_back({p.sp > 1 && p.tp == 1 ? "sp" : "tp",
                   "attention heads " + s(dims->heads) + " are not divisible by tp·sp = " + s(p.tp) + "·" + s(p.sp) +
                       " = " + s(tpsp) + " (heads % (tp·sp) = " + s(dims->heads % tpsp) + ")",
                   "use tp·sp that divides " + s(dims->heads) + " (one of " + divisors(dims->heads) + ")"});
  if (dims->kv_heads > 0 && dims->kv_heads % p.tp != 0 && p.tp % dims->kv_heads != 0)
    out.push_back({"tp",
                   "kv-heads " + s(dims->kv_heads) + " and tp " + s(p.tp) + ": neither divides the other (kv % tp = " +
                       s(dims->kv_heads % p.tp) + ", tp % kv = " + s(p.tp % dims->kv_heads) + ")",
                   "use a tp that divides " + s(dims->kv_heads) + " or is a multiple of it (KV heads are then replicated)"});
  int64_t chunks = p.pp * p.pp_virtual;
  if (dims->layers > 0 && dims->layers < chunks)
    out.push_back({"pp", "the model has " + s(dims->layers) + " layers, fewer than pp·pp_virtual = " + s(p.pp) + "·" +
                             s(p.pp_virtual) + " = " + s(chunks) + " pipeline stages",
                   "use pp·pp_virtual ≤ " + s(dims->layers)});
  if (dims->layers > 0 && !p.pp_layers.empty()) {
    int64_t sum = std::accumulate(p.pp_layers.begin(), p.pp_layers.end(), int64_t{0});
    if (sum != dims->layers)
      out.push_back({"pp_layers", "pp_layers sum to " + s(sum) + " but the model has " + s(dims->layers) + " layers",
                     "make the per-stage layer counts add up to " + s(dims->layers)});
  }
  if (dims->heads > 0 && dims->experts == 0 && p.ep > 1)
    out.push_back({"ep", "ep = " + s(p.ep) + " but the model is dense (no experts)", "set ep: 1"});
  if (dims->experts > 0 && dims->experts % p.ep != 0)
    out.push_back({"ep", "experts " + s(dims->experts) + " are not divisible by ep = " + s(p.ep),
                   "use an ep that divides " + s(dims->experts) + " (one of " + divisors(dims->experts) + ")"});
  return out;
}

RankNeeds ranks_needed(const PipelineConfig& config) {
  RankNeeds needs;
  if (config.placement.mode == PlacementMode::disaggregated) {
    needs.exact = true;
    needs.count = 0;
    for (const auto& r : config.placement.ranges) needs.count = std::max(needs.count, r.last + 1);
    return needs;
  }
  for (const auto& m : config.models) {
    needs.count = std::lcm(needs.count, rank_granularity(m.parallel));
    needs.count = std::lcm(needs.count, rank_granularity(m.rollout.parallel));
  }
  return needs;
}

RankSpan ranks_of(const PipelineConfig& config, const std::string& target, int64_t world) {
  if (config.placement.mode == PlacementMode::colocated) return {0, world};
  auto find = [&](const std::string& t) -> const RankRange* {
    for (const auto& r : config.placement.ranges)
      if (r.target == t) return &r;
    return nullptr;
  };
  const RankRange* r = find(target);
  if (!r && str::ends_with(target, ".rollout")) r = find(target.substr(0, target.size() - 8));
  if (!r) return {0, 0};
  return {r->first, r->size()};
}

}  // namespace hpcrl::config
