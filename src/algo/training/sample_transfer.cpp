// Samples from the generating replicas to the trainer ranks (sample_transfer.h).
#include "hpcrl/algo/training/sample_transfer.h"

#include <cstring>
#include <numeric>
#include <string>

#include "hpcrl/util/byte_stream.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
constexpr int kSamplesTag = 7101;  // and 7102 (send_bytes)
constexpr int kGeneratorStateTag = 7103;  // and 7104

using Writer = util::ByteWriter;
using Reader = util::ByteReader;

void put_samples(Writer& w, const RolloutSamples& s) {
  w.put<uint64_t>(s.size());
  for (size_t k = 0; k < s.size(); ++k) {
    w.list(s.prompt_ids[k]);
    w.list(s.response_ids[k]);
    w.list(s.logprobs[k]);
    w.list(k < s.versions.size() ? s.versions[k] : std::vector<int32_t>{});
    w.list(k < s.sampled.size() ? s.sampled[k] : std::vector<uint8_t>{});
    w.put<uint64_t>(s.example[k]);
    w.put<double>(s.scores[k]);
    w.put<uint8_t>(s.truncated[k] ? 1 : 0);
  }
}

RolloutSamples get_samples(Reader& r) {
  RolloutSamples s;
  const auto n = r.get<uint64_t>();
  for (uint64_t k = 0; k < n; ++k) {
    s.prompt_ids.push_back(r.list<int32_t>());
    s.response_ids.push_back(r.list<int32_t>());
    s.logprobs.push_back(r.list<float>());
    s.versions.push_back(r.list<int32_t>());
    s.sampled.push_back(r.list<uint8_t>());
    s.example.push_back(static_cast<size_t>(r.get<uint64_t>()));
    s.scores.push_back(r.get<double>());
    s.truncated.push_back(r.get<uint8_t>() != 0);
  }
  return s;
}
}  // namespace

bool SampleMessage::operator==(const SampleMessage& o) const {
  return encode_samples(*this) == encode_samples(o);
}

std::vector<uint8_t> encode_samples(const SampleMessage& msg) {
  Writer w;
  w.put(msg.iteration);
  w.put(msg.version);
  w.put(msg.cursor);
  w.put(msg.round.totals);
  w.put(msg.round.max_response_len);
  w.put(msg.round.kept_groups);
  w.put(msg.round.rounds);
  w.put(msg.round.dropped_stale);
  w.put(msg.wait_weights_seconds);
  w.put<uint64_t>(msg.round.seconds_by_span.size());
  for (const auto& [k, v] : msg.round.seconds_by_span) {
    w.text(k);
    w.put(v);
  }
  put_samples(w, msg.round.kept);
  return w.out;
}

SampleMessage decode_samples(const std::vector<uint8_t>& bytes) {
  Reader r{bytes, "sample message"};
  SampleMessage m;
  m.iteration = r.get<int64_t>();
  m.version = r.get<int64_t>();
  m.cursor = r.get<io::DataCursor>();
  m.round.totals = r.get<RolloutSums>();
  m.round.max_response_len = r.get<double>();
  m.round.kept_groups = r.get<double>();
  m.round.rounds = r.get<double>();
  m.round.dropped_stale = r.get<double>();
  m.wait_weights_seconds = r.get<double>();
  const auto spans = r.get<uint64_t>();
  for (uint64_t i = 0; i < spans; ++i) {
    std::string k = r.text();
    m.round.seconds_by_span.emplace_back(k, r.get<double>());
  }
  m.round.kept = get_samples(r);
  r.finish();
  return m;
}

std::vector<uint8_t> encode_values(const std::vector<std::vector<float>>& rows) {
  Writer w;
  w.put<uint64_t>(rows.size());
  for (const auto& r : rows) w.list(r);
  return w.out;
}

std::vector<std::vector<float>> decode_values(const std::vector<uint8_t>& bytes) {
  Reader r{bytes, "value message"};
  std::vector<std::vector<float>> rows(r.get<uint64_t>());
  for (auto& row : rows) row = r.list<float>();
  r.finish();
  return rows;
}

void send_bytes(dist::Communicator& comm, const std::vector<uint8_t>& bytes, int peer, int tag,
                std::vector<dist::WorkPtr>& works, std::vector<at::Tensor>& keep) {
  at::Tensor len = at::full({1}, int64_t(bytes.size()), at::kLong);
  at::Tensor buf = at::empty({int64_t(bytes.size())}, at::kByte);
  if (!bytes.empty()) std::memcpy(buf.data_ptr(), bytes.data(), bytes.size());
  works.push_back(comm.send_async(len, peer, tag));
  works.push_back(comm.send_async(buf, peer, tag + 1));
  keep.push_back(len);
  keep.push_back(buf);
}

std::vector<uint8_t> recv_bytes(dist::Communicator& comm, int peer, int tag) {
  at::Tensor len = at::empty({1}, at::kLong);
  comm.recv(len, peer, tag);
  at::Tensor buf = at::empty({len.item<int64_t>()}, at::kByte);
  comm.recv(buf, peer, tag + 1);
  const auto* p = buf.data_ptr<uint8_t>();
  return std::vector<uint8_t>(p, p + buf.numel());
}

std::vector<int> all_ranks(int world) {
  std::vector<int> r(size_t(world), 0);
  std::iota(r.begin(), r.end(), 0);
  return r;
}

std::vector<int> dp_group(const dist::Mesh& mesh, int j) {
  std::vector<int> out;
  for (int r = mesh.first_rank(); r <= mesh.last_rank(); ++r)
    if (mesh.coord(r).dp == j) out.push_back(r);
  return out;
}

bool leads_replica(const dist::Mesh& mesh, int rank) {
  const dist::MeshCoord c = mesh.coord(rank);
  return c.tp == 0 && c.sp == 0 && c.pp == 0;
}

void send_to_group(dist::Communicator& comm, const std::vector<uint8_t>& bytes, const dist::Mesh& to, int j, int tag) {
  std::vector<dist::WorkPtr> works;
  std::vector<at::Tensor> keep;
  for (int r : dp_group(to, j)) send_bytes(comm, bytes, r, tag, works, keep);
  for (auto& w : works) w->wait();
}

void send_rows(dist::Communicator& comm, const RolloutSamples& rows, const dist::Mesh& from, const dist::Mesh& to,
               int j, int tag) {
  if (!leads_replica(from, comm.rank())) return;
  SampleMessage request;
  request.round.kept = rows;
  send_to_group(comm, encode_samples(request), to, j, tag);
}

RolloutSamples batch_rows(const TokenBatch& b) {
  RolloutSamples s;
  const at::Tensor ids = b.ids.to(at::kCPU, at::kLong).contiguous();
  for (int64_t i = 0; i < b.rows(); ++i) {
    const int64_t P = b.prompt_lens[size_t(i)], R = b.response_lens[size_t(i)];
    const int64_t* row = ids[i].data_ptr<int64_t>();
    s.prompt_ids.emplace_back(row, row + P);
    s.response_ids.emplace_back(row + P, row + P + R);
    s.logprobs.emplace_back();
    s.versions.emplace_back();
    s.sampled.push_back(response_sampled(b, i));
    s.example.push_back(0);
    s.scores.push_back(0);
    s.truncated.push_back(false);
  }
  return s;
}

GroupSlice trainer_share(const std::vector<int64_t>& groups_per_replica, int replica, int dp, int dp_rank) {
  int64_t total = 0, before = 0;
  for (size_t r = 0; r < groups_per_replica.size(); ++r) {
    if (static_cast<int>(r) < replica) before += groups_per_replica[r];
    total += groups_per_replica[r];
  }
  const int64_t lo = total * dp_rank / dp, hi = total * (dp_rank + 1) / dp;
  const int64_t first = std::max(lo, before), last = std::min(hi, before + groups_per_replica[replica]);
  return last > first ? GroupSlice{first - before, last - first} : GroupSlice{0, 0};
}

SampleChannel::SampleChannel(const Role& generator, const Role& trainer, dist::CommPtr world, int64_t group)
    : generator_(generator), trainer_(trainer), world_(std::move(world)), group_(group) {}

void SampleChannel::send(const SampleMessage& msg) {
  // Every replica's kept group count, so each leader knows where its groups fall globally.
  at::Tensor mine = at::full({1}, int64_t(msg.round.kept.size()) / group_, at::kLong);
  at::Tensor all = dist::all_gather(generator_.ctx.dp, mine, 0);
  const int me = world_->rank();
  const dist::MeshCoord pos = generator_.mesh.coord(me);
  if (pos.tp != 0 || pos.sp != 0) return;  // the replica's other ranks hold the same samples
  std::vector<int64_t> counts(all.data_ptr<int64_t>(), all.data_ptr<int64_t>() + all.numel());
  const dist::Mesh& tm = trainer_.mesh;
  for (int r = tm.first_rank(); r <= tm.last_rank(); ++r) {
    const GroupSlice share = trainer_share(counts, pos.dp, tm.dp(), tm.coord(r).dp);
    SampleMessage part = msg;
    part.round.kept = RolloutSamples();
    part.round.kept.append(msg.round.kept, size_t(share.first * group_), size_t(share.count * group_));
    send_bytes(*world_, encode_samples(part), r, kSamplesTag, pending_, in_flight_);
  }
}

void SampleChannel::wait_sends() {
  for (auto& w : pending_) w->wait();
  pending_.clear();
  in_flight_.clear();
}

RolloutSamples SampleChannel::redeal(const RolloutSamples& kept) {
  const int me = world_->rank();
  const dist::MeshCoord pos = generator_.mesh.coord(me);
  SampleMessage mine;
  if (pos.tp == 0 && pos.sp == 0) mine.round.kept = kept;  // the replica's other ranks hold the same samples
  const std::vector<uint8_t> bytes = encode_samples(mine);
  at::Tensor len = at::full({1}, int64_t(bytes.size()), at::kLong);
  const at::Tensor lens = world_->all_gather(len, 0);
  const int64_t longest = lens.max().item<int64_t>();
  at::Tensor buf = at::zeros({1, longest}, at::kByte);
  std::memcpy(buf.data_ptr(), bytes.data(), bytes.size());
  const at::Tensor all = world_->all_gather(buf, 0);  // [world, longest]
  const dist::Mesh& gm = generator_.mesh;
  std::vector<RolloutSamples> replicas;
  std::vector<int64_t> counts;
  for (int replica = 0; replica < gm.dp(); ++replica) {
    const int from = gm.world_rank(0, 0, replica, 0);
    const auto* p = all[from].data_ptr<uint8_t>();
    replicas.push_back(decode_samples(std::vector<uint8_t>(p, p + lens[from].item<int64_t>())).round.kept);
    counts.push_back(int64_t(replicas.back().size()) / group_);
  }
  const dist::Mesh& tm = trainer_.mesh;
  RolloutSamples out;
  for (int replica = 0; replica < gm.dp(); ++replica) {
    const GroupSlice share = trainer_share(counts, replica, tm.dp(), tm.coord(me).dp);
    out.append(replicas[size_t(replica)], size_t(share.first * group_), size_t(share.count * group_));
  }
  return out;
}

SampleMessage SampleChannel::receive(int64_t iteration) {
  const dist::Mesh& gm = generator_.mesh;
  SampleMessage merged;
  for (int replica = 0; replica < gm.dp(); ++replica) {
    const int from = gm.world_rank(0, 0, replica, 0);
    SampleMessage m = decode_samples(recv_bytes(*world_, from, kSamplesTag));
    HPCRL_CHECK(m.iteration == iteration, "samples of iteration " << m.iteration << " arrived from rank " << from
                                                                  << " while the trainer expects iteration " << iteration);
    if (replica == 0) {
      RolloutSamples kept = std::move(m.round.kept);
      merged = std::move(m);
      merged.round.kept = std::move(kept);
    } else {
      merged.round.kept.append(m.round.kept, 0, m.round.kept.size());
    }
  }
  return merged;
}

void SampleChannel::send_generator_state(const std::vector<uint8_t>& bytes) {
  std::vector<dist::WorkPtr> works;
  std::vector<at::Tensor> keep;
  send_bytes(*world_, bytes, trainer_.mesh.first_rank(), kGeneratorStateTag, works, keep);
  for (auto& w : works) w->wait();
}

std::vector<std::vector<uint8_t>> SampleChannel::receive_generator_states() {
  std::vector<std::vector<uint8_t>> states;
  if (world_->rank() != trainer_.mesh.first_rank()) return states;
  for (int r = generator_.mesh.first_rank(); r <= generator_.mesh.last_rank(); ++r)
    states.push_back(recv_bytes(*world_, r, kGeneratorStateTag));
  return states;
}

}  // namespace hpcrl::algo
