// The process mesh of one model role: a validated value type for the sizes
// {tp, sp, ep, dp, pp} on the role's rank range, every rank group, and each
// rank's coordinates (docs/communication.md, Meshes; Megatron semantics).
//
// Dense layout, order "tp-sp-dp-pp" (tp fastest), for r = world rank - first:
//   tp = r % TP, sp = (r / TP) % SP, dp = (r / (TP·SP)) % DP, pp = r / (TP·SP·DP)
// Expert layout, order "tp-ep-edp-pp": the same ranks, with the sp·dp ranks of
// each (tp, pp) slot regrouped as ep × edp, ep fastest:
//   e = (r / TP) % (SP·DP), ep = e % EP, edp = e / EP
// so EP must divide SP·DP; expert weights are sharded over ep and replicated
// over edp. Both layouts have the same pp groups (checked on construction).
#pragma once

#include <string>
#include <vector>

#include "hpcrl/config/model_dims.h"
#include "hpcrl/distributed/rank_generator.h"

namespace hpcrl::dist {

// Requested sizes of a role's dims. dp = 0 means "what tp·sp·pp leave of the ranks".
struct ParallelSizes {
  int tp = 1, sp = 1, ep = 1, dp = 0, pp = 1;
};

// One rank's coordinates in both layouts.
struct MeshCoord {
  int tp = 0, sp = 0, dp = 0, pp = 0;  // dense
  int ep = 0, edp = 0;                 // expert
};

// The groups a mesh defines. dp_sp is where gradients are averaged (a sequence
// shard's gradient is partial too); tp_pp is one model replica.
enum class GroupKind { kTp, kSp, kDp, kPp, kDpSp, kTpPp, kEp, kEdp };
inline constexpr GroupKind kAllGroupKinds[] = {GroupKind::kTp,   GroupKind::kSp,   GroupKind::kDp, GroupKind::kPp,
                                               GroupKind::kDpSp, GroupKind::kTpPp, GroupKind::kEp, GroupKind::kEdp};
// "tp", "sp", "dp", "pp", "dp_sp", "tp_pp", "ep", "edp" (JSON keys, trace group names).
const char* group_name(GroupKind kind);

class Mesh {
 public:
  // The role's mesh on world ranks [first_rank, first_rank + num_ranks).
  // InputError naming every factor when the sizes do not fit the rank count
  // (product ≠ ranks, tp·sp·pp not dividing it, ep not dividing sp·dp, a size < 1).
  Mesh(const ParallelSizes& sizes, int first_rank, int num_ranks, std::string role = "");

  // InputError listing every model dimension the layout does not divide:
  // heads % (tp·sp), kv_heads vs tp (split or replicate), layers ≥ pp,
  // experts % ep (and ep > 1 only for MoE models), seq_len % sp. Zero fields are unknown and skipped.
  void check_model(const ModelDims& dims) const;

  int tp() const { return tp_; }
  int sp() const { return sp_; }
  int ep() const { return ep_; }
  int dp() const { return dp_; }
  int pp() const { return pp_; }
  int edp() const { return edp_; }
  int size() const { return size_; }
  int first_rank() const { return first_; }
  int last_rank() const { return first_ + size_ - 1; }
  const std::string& role() const { return role_; }
  bool contains(int world_rank) const { return world_rank >= first_ && world_rank <= last_rank(); }

  MeshCoord coord(int world_rank) const;
  // World rank at dense coordinates (tp, sp, dp, pp).
  int world_rank(int tp, int sp, int dp, int pp) const;

  // Every group of `kind`, as world ranks in group-rank order.
  const RankGroups& groups(GroupKind kind) const { return groups_[static_cast<int>(kind)]; }
  // Index into groups(kind) of the group holding `world_rank`, and that group.
  int group_index(GroupKind kind, int world_rank) const;
  const std::vector<int>& group_of(GroupKind kind, int world_rank) const;

  // Neighbouring pp stages of `world_rank` (same tp/sp/dp), -1 past either end.
  int pp_prev(int world_rank) const;
  int pp_next(int world_rank) const;
  bool is_first_stage(int world_rank) const { return coord(world_rank).pp == 0; }
  bool is_last_stage(int world_rank) const { return coord(world_rank).pp == pp_ - 1; }

  // "TP(2)-SP(1)-EP(2)-DP(2)-PP(2)-Rank(5)": the layout and the world rank (log prefixes).
  std::string rank_name(int world_rank) const;
  // "tp=2 sp=1 ep=2 dp=2 pp=2 on ranks 0-15" (error messages, plan output).
  std::string describe() const;

 private:
  void check_rank(int world_rank) const;

  std::string role_;
  int tp_, sp_, ep_, dp_, pp_, edp_, size_, first_;
  std::vector<RankGroups> groups_;             // by GroupKind
  std::vector<std::vector<int>> group_index_;  // [kind][world_rank - first]
};

}  // namespace hpcrl::dist
