// A disaggregated stage's in-flight state as checkpoint files (in_flight.h).
#include "hpcrl/algo/stages/in_flight.h"

#include <ATen/ATen.h>

#include <cstdio>
#include <cstring>

#include "hpcrl/util/byte_stream.h"
#include "hpcrl/util/check.h"

namespace hpcrl::algo {

namespace {
constexpr uint32_t kGeneratorMagic = 0x47464c32;  // "2LFG": in-flight generator, version 2 (kept caches)
constexpr uint32_t kInboxMagic = 0x49464c31;      // "1LFI": in-flight inbox, version 1

// A tensor as its dtype, shape and bytes (copied to the host).
void put_tensor(util::ByteWriter& w, const at::Tensor& t) {
  const at::Tensor host = t.to(at::kCPU).contiguous();
  w.put<int32_t>(int32_t(host.scalar_type()));
  w.list(host.sizes().vec());
  const auto* p = static_cast<const uint8_t*>(host.data_ptr());
  w.list(std::vector<uint8_t>(p, p + host.nbytes()));
}

at::Tensor get_tensor(util::ByteReader& r) {
  const auto type = r.get<int32_t>();
  HPCRL_CHECK(type >= 0 && type < int32_t(at::ScalarType::NumOptions), "a tensor of unknown dtype " << type);
  const auto sizes = r.list<int64_t>();
  const auto bytes = r.list<uint8_t>();
  at::Tensor t = at::empty(sizes, at::ScalarType(type));
  HPCRL_CHECK(size_t(t.nbytes()) == bytes.size(), "a tensor of " << t.nbytes() << " bytes stored in " << bytes.size());
  if (!bytes.empty()) std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

// A paused row's kept cache (Sample::cache), or its absence.
void put_cache(util::ByteWriter& w, const std::shared_ptr<const rollout::SlotCache>& c) {
  w.put<uint8_t>(c ? 1 : 0);
  if (!c) return;
  w.put(c->length);
  w.put<uint64_t>(c->k.size());
  for (size_t l = 0; l < c->k.size(); ++l) {
    put_tensor(w, c->k[l]);
    put_tensor(w, c->v[l]);
  }
}

std::shared_ptr<const rollout::SlotCache> get_cache(util::ByteReader& r) {
  if (r.get<uint8_t>() == 0) return nullptr;
  auto c = std::make_shared<rollout::SlotCache>();
  c->length = r.get<int64_t>();
  const auto layers = r.get<uint64_t>();
  for (uint64_t l = 0; l < layers; ++l) {
    c->k.push_back(get_tensor(r));
    c->v.push_back(get_tensor(r));
  }
  return c;
}

void put_sample(util::ByteWriter& w, const rollout::Sample& s) {
  w.put(s.prompt_index);
  w.put(s.sample_index);
  w.list(s.tokens);
  w.list(s.logprobs);
  w.list(s.sampled);
  w.text(s.finish_reason);
  w.put(s.turns);
  w.put(s.turn_reward);
  put_cache(w, s.cache);
}

rollout::Sample get_sample(util::ByteReader& r) {
  rollout::Sample s;
  s.prompt_index = r.get<int64_t>();
  s.sample_index = r.get<int64_t>();
  s.tokens = r.list<int32_t>();
  s.logprobs = r.list<float>();
  s.sampled = r.list<uint8_t>();
  s.finish_reason = r.text();
  s.turns = r.get<int64_t>();
  s.turn_reward = r.get<double>();
  s.cache = get_cache(r);
  return s;
}

void put_group(util::ByteWriter& w, const GroupInFlight& g) {
  w.put<uint64_t>(g.example);
  w.list(g.prompt_ids);
  w.put(g.key);
  w.put<uint64_t>(g.samples.size());
  for (const auto& s : g.samples) put_sample(w, s);
  w.put<uint64_t>(g.versions.size());
  for (const auto& v : g.versions) w.list(v);
}

GroupInFlight get_group(util::ByteReader& r) {
  GroupInFlight g;
  g.example = size_t(r.get<uint64_t>());
  g.prompt_ids = r.list<int32_t>();
  g.key = r.get<int64_t>();
  const auto samples = r.get<uint64_t>();
  for (uint64_t i = 0; i < samples; ++i) g.samples.push_back(get_sample(r));
  const auto versions = r.get<uint64_t>();
  for (uint64_t i = 0; i < versions; ++i) g.versions.push_back(r.list<int32_t>());
  return g;
}

// Runs `read` over `bytes`; what the reader throws becomes an InputError naming the file.
template <class F>
auto decode_file(const std::vector<uint8_t>& bytes, uint32_t magic, const std::string& where, F read) {
  const char* fix = ": the checkpoint is damaged; resume from an earlier step directory or start over";
  try {
    util::ByteReader r{bytes, "in-flight file"};
    HPCRL_CHECK(r.get<uint32_t>() == magic, "in-flight file of another kind or version");
    auto out = read(r);
    r.finish();
    return out;
  } catch (const RuntimeError& e) {  // a failed read check: keep its hint, not the source line
    const std::string what = e.what();
    const size_t hint = what.find("hint: ");
    throw InputError(where + ": " + (hint == std::string::npos ? what : what.substr(hint + 6)) + fix);
  }
}

std::string numbered(const char* pattern, int n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, pattern, n);
  return buf;
}
}  // namespace

std::vector<uint8_t> encode_generator(const GeneratorSnapshot& g) {
  util::ByteWriter w;
  w.put(kGeneratorMagic);
  w.put(g.cursor);
  w.put<uint64_t>(g.groups.size());
  for (const auto& group : g.groups) put_group(w, group);
  return w.out;
}

GeneratorSnapshot decode_generator(const std::vector<uint8_t>& bytes, const std::string& where) {
  return decode_file(bytes, kGeneratorMagic, where, [](util::ByteReader& r) {
    GeneratorSnapshot g;
    g.cursor = r.get<io::DataCursor>();
    const auto n = r.get<uint64_t>();
    for (uint64_t i = 0; i < n; ++i) g.groups.push_back(get_group(r));
    return g;
  });
}

std::vector<uint8_t> encode_inbox(const std::map<int64_t, SampleMessage>& inbox) {
  util::ByteWriter w;
  w.put(kInboxMagic);
  w.put<uint64_t>(inbox.size());
  for (const auto& [it, msg] : inbox) {
    w.put(it);
    w.list(encode_samples(msg));
  }
  return w.out;
}

std::map<int64_t, SampleMessage> decode_inbox(const std::vector<uint8_t>& bytes, const std::string& where) {
  return decode_file(bytes, kInboxMagic, where, [](util::ByteReader& r) {
    std::map<int64_t, SampleMessage> inbox;
    const auto n = r.get<uint64_t>();
    for (uint64_t i = 0; i < n; ++i) {
      const auto it = r.get<int64_t>();
      inbox.emplace(it, decode_samples(r.list<uint8_t>()));
    }
    return inbox;
  });
}

std::string inbox_file(int world_rank) { return numbered("in-flight/trainer-rank-%05d.bin", world_rank); }
std::string generator_file(int world_rank) { return numbered("in-flight/generator-rank-%05d.bin", world_rank); }

nlohmann::json InFlightPoint::to_json() const {
  return {{"plan_start", plan_start}, {"plan_staleness", plan_staleness}, {"sync_iteration", sync_iteration},
          {"world", world},           {"trainer_dp", trainer_dp},         {"generator_dp", generator_dp},
          {"generator_tp", generator_tp}};
}

InFlightPoint InFlightPoint::from_json(const nlohmann::json& j, const std::string& where) {
  auto field = [&](const char* key) {
    HPCRL_CHECK_INPUT(j.is_object() && j.contains(key) && j[key].is_number_integer(),
                      where << ": \"in_flight\" needs an integer \"" << key
                            << "\"; the checkpoint is damaged: resume from an earlier step directory or start over");
    return j[key].get<int64_t>();
  };
  InFlightPoint p;
  p.plan_start = field("plan_start");
  p.plan_staleness = field("plan_staleness");
  p.sync_iteration = field("sync_iteration");
  p.world = int(field("world"));
  p.trainer_dp = field("trainer_dp");
  p.generator_dp = field("generator_dp");
  p.generator_tp = field("generator_tp");
  return p;
}

}  // namespace hpcrl::algo
