// Validation and group generation of a role's process mesh (see mesh.h). The
// groups come from two RankGenerators over the same ranks; the closed-form
// coordinates in mesh.h are what the golden tests check them against.
#include "hpcrl/distributed/mesh.h"

#include <sstream>

#include "hpcrl/util/check.h"

namespace hpcrl::dist {
namespace {

std::string divisors(int n) {
  std::ostringstream os;
  for (int d = 1, first = 1; d <= n; ++d)
    if (n % d == 0) {
      os << (first ? "" : ", ") << d;
      first = 0;
    }
  return os.str();
}

std::string who(const std::string& role) { return role.empty() ? std::string("layout") : "role '" + role + "'"; }

}  // namespace

const char* group_name(GroupKind kind) {
  switch (kind) {
    case GroupKind::kTp: return "tp";
    case GroupKind::kSp: return "sp";
    case GroupKind::kDp: return "dp";
    case GroupKind::kPp: return "pp";
    case GroupKind::kDpSp: return "dp_sp";
    case GroupKind::kTpPp: return "tp_pp";
    case GroupKind::kEp: return "ep";
    case GroupKind::kEdp: return "edp";
  }
  return "?";
}

Mesh::Mesh(const ParallelSizes& s, int first_rank, int num_ranks, std::string role)
    : role_(std::move(role)), tp_(s.tp), sp_(s.sp), ep_(s.ep), dp_(s.dp), pp_(s.pp), size_(num_ranks),
      first_(first_rank) {
  const std::string w = who(role_);
  HPCRL_CHECK_INPUT(num_ranks >= 1 && first_rank >= 0,
                    w << ": rank range starts at " << first_rank << " with " << num_ranks << " ranks; it needs at least one rank");
  HPCRL_CHECK_INPUT(tp_ >= 1 && sp_ >= 1 && ep_ >= 1 && pp_ >= 1 && dp_ >= 0,
                    w << ": parallel sizes must be at least 1 (got tp=" << tp_ << " sp=" << sp_ << " ep=" << ep_
                      << " pp=" << pp_ << " dp=" << dp_ << "; dp may be omitted to derive it)");
  const int model = tp_ * sp_ * pp_;
  const std::string range = "ranks " + std::to_string(first_) + "-" + std::to_string(last_rank());
  if (dp_ == 0) {
    HPCRL_CHECK_INPUT(num_ranks % model == 0,
                      w << " has " << num_ranks << " ranks (" << range << "), which tp=" << tp_ << " × sp=" << sp_
                        << " × pp=" << pp_ << " = " << model << " does not divide; dp = ranks / (tp·sp·pp) must be "
                        << "whole: choose tp·sp·pp among " << divisors(num_ranks));
    dp_ = num_ranks / model;
  } else {
    HPCRL_CHECK_INPUT(model * dp_ == num_ranks,
                      w << ": tp=" << tp_ << " × sp=" << sp_ << " × dp=" << dp_ << " × pp=" << pp_ << " = "
                        << model * dp_ << ", but the role has " << num_ranks << " ranks (" << range
                        << "); the product must equal the rank count (omit dp to derive it)");
  }
  HPCRL_CHECK_INPUT((sp_ * dp_) % ep_ == 0,
                    w << ": ep=" << ep_ << " does not divide sp × dp = " << sp_ << " × " << dp_ << " = " << sp_ * dp_
                      << "; experts are sharded over the sp·dp ranks of each tp slot, so choose ep among "
                      << divisors(sp_ * dp_));
  edp_ = sp_ * dp_ / ep_;

  RankGenerator dense("tp-sp-dp-pp", {{"tp", tp_}, {"sp", sp_}, {"dp", dp_}, {"pp", pp_}}, first_);
  RankGenerator expert("tp-ep-edp-pp", {{"tp", tp_}, {"ep", ep_}, {"edp", edp_}, {"pp", pp_}}, first_);
  groups_.resize(std::size(kAllGroupKinds));
  groups_[static_cast<int>(GroupKind::kTp)] = dense.get("tp");
  groups_[static_cast<int>(GroupKind::kSp)] = dense.get("sp");
  groups_[static_cast<int>(GroupKind::kDp)] = dense.get("dp");
  groups_[static_cast<int>(GroupKind::kPp)] = dense.get("pp");
  groups_[static_cast<int>(GroupKind::kDpSp)] = dense.get("sp-dp");
  groups_[static_cast<int>(GroupKind::kTpPp)] = dense.get("tp-pp");
  groups_[static_cast<int>(GroupKind::kEp)] = expert.get("ep");
  groups_[static_cast<int>(GroupKind::kEdp)] = expert.get("edp");
  HPCRL_CHECK(expert.get("pp") == groups(GroupKind::kPp),
              "the expert layout's pp groups differ from the dense layout's for " << describe());

  group_index_.assign(groups_.size(), std::vector<int>(size_, -1));
  for (size_t k = 0; k < groups_.size(); ++k)
    for (size_t g = 0; g < groups_[k].size(); ++g)
      for (int r : groups_[k][g]) group_index_[k][r - first_] = static_cast<int>(g);
}

void Mesh::check_model(const ModelDims& d) const {
  std::vector<std::string> problems;
  auto add = [&](std::ostringstream& os) { problems.push_back(os.str()); };
  if (d.heads > 0 && d.heads % (tp_ * sp_) != 0) {
    std::ostringstream os;
    os << "heads=" << d.heads << " is not divisible by tp × sp = " << tp_ << " × " << sp_ << " = " << tp_ * sp_
       << " (tp splits the heads, Ulysses sp splits them again)";
    add(os);
  }
  if (d.kv_heads > 0 && d.kv_heads % tp_ != 0 && tp_ % d.kv_heads != 0) {
    std::ostringstream os;
    os << "kv_heads=" << d.kv_heads << " and tp=" << tp_ << ": need kv_heads % tp == 0 (KV heads split) or "
       << "tp % kv_heads == 0 (KV heads replicated)";
    add(os);
  }
  if (d.layers > 0 && d.layers < pp_) {
    std::ostringstream os;
    os << "layers=" << d.layers << " is less than pp=" << pp_ << " (every pp stage needs at least one layer)";
    add(os);
  }
  if (d.experts > 0 && d.experts % ep_ != 0) {
    std::ostringstream os;
    os << "experts=" << d.experts << " is not divisible by ep=" << ep_;
    add(os);
  }
  const bool model_known = d.heads > 0 || d.layers > 0;  // experts == 0 then means dense, not unknown
  if (d.experts == 0 && ep_ > 1 && model_known) {
    std::ostringstream os;
    os << "ep=" << ep_ << " but the model is dense (no experts); use ep=1";
    add(os);
  }
  if (d.seq_len > 0 && d.seq_len % sp_ != 0) {
    std::ostringstream os;
    os << "seq_len=" << d.seq_len << " is not divisible by sp=" << sp_ << " (Ulysses splits the sequence)";
    add(os);
  }
  if (problems.empty()) return;
  std::ostringstream os;
  os << who(role_) << ": layout " << describe() << " does not fit the model:";
  for (const auto& p : problems) os << "\n  - " << p;
  throw InputError(os.str());
}

void Mesh::check_rank(int world_rank) const {
  HPCRL_CHECK(contains(world_rank), "world rank " << world_rank << " is not in " << who(role_) << " (" << describe() << ")");
}

MeshCoord Mesh::coord(int world_rank) const {
  check_rank(world_rank);
  const int r = world_rank - first_;
  MeshCoord c;
  c.tp = r % tp_;
  c.sp = (r / tp_) % sp_;
  c.dp = (r / (tp_ * sp_)) % dp_;
  c.pp = r / (tp_ * sp_ * dp_);
  const int e = (r / tp_) % (sp_ * dp_);
  c.ep = e % ep_;
  c.edp = e / ep_;
  return c;
}

int Mesh::world_rank(int tp, int sp, int dp, int pp) const {
  HPCRL_CHECK(tp >= 0 && tp < tp_ && sp >= 0 && sp < sp_ && dp >= 0 && dp < dp_ && pp >= 0 && pp < pp_,
              "coordinates tp=" << tp << " sp=" << sp << " dp=" << dp << " pp=" << pp << " are outside " << describe());
  return first_ + tp + tp_ * (sp + sp_ * (dp + dp_ * pp));
}

int Mesh::group_index(GroupKind kind, int world_rank) const {
  check_rank(world_rank);
  return group_index_[static_cast<int>(kind)][world_rank - first_];
}

const std::vector<int>& Mesh::group_of(GroupKind kind, int world_rank) const {
  return groups(kind)[group_index(kind, world_rank)];
}

int Mesh::pp_prev(int world_rank) const {
  MeshCoord c = coord(world_rank);
  return c.pp == 0 ? -1 : world_rank - tp_ * sp_ * dp_;
}

int Mesh::pp_next(int world_rank) const {
  MeshCoord c = coord(world_rank);
  return c.pp == pp_ - 1 ? -1 : world_rank + tp_ * sp_ * dp_;
}

std::string Mesh::rank_name(int world_rank) const {
  check_rank(world_rank);
  std::ostringstream os;
  os << "TP(" << tp_ << ")-SP(" << sp_ << ")-EP(" << ep_ << ")-DP(" << dp_ << ")-PP(" << pp_ << ")-Rank(" << world_rank
     << ")";
  return os.str();
}

std::string Mesh::describe() const {
  std::ostringstream os;
  os << "tp=" << tp_ << " sp=" << sp_ << " ep=" << ep_ << " dp=" << dp_ << " pp=" << pp_ << " on ranks " << first_
     << "-" << last_rank();
  return os.str();
}

}  // namespace hpcrl::dist
