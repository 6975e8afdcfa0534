// Pipeline layout (pipeline_layout.h): validation of explicit per-chunk layer
// lists and the parameter-balanced split. All decoder layers of one model have
// the same parameter count, so balancing is about where the embedding and the
// heads sit: a small dynamic program over contiguous splits minimises the
// largest chunk (ties: the smaller sum of squares, i.e. the more even split).
#include "hpcrl/model/pipeline_layout.h"

#include <limits>
#include <sstream>
#include <utility>

#include "hpcrl/util/check.h"
#include "hpcrl/util/strings.h"

namespace hpcrl::model {

namespace {

std::string list_str(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(std::to_string(x));
  return "[" + str::join(parts, ", ") + "]";
}

std::vector<int64_t> balanced_split(const ModelArch& arch, int chunks, bool lm_head, bool value_head) {
  const int64_t L = arch.num_layers, C = arch.hidden_size, V = arch.vocab_size;
  const double embed = double(V) * double(C);
  const double per_layer =
      (double(arch.num_parameters()) - embed * (arch.tie_word_embeddings ? 1 : 2) - double(C)) / double(L);
  const double first_extra = embed;
  const double last_extra = double(C) + (lm_head ? embed : 0.0) + (value_head ? double(C) : 0.0);
  auto load = [&](int chunk, int64_t layers) {
    double x = double(layers) * per_layer;
    if (chunk == 0) x += first_extra;
    if (chunk == chunks - 1) x += last_extra;
    return x;
  };
  // best[c][l]: (largest load, sum of squared loads) of chunks 0..c holding layers [0, l).
  using Cost = std::pair<double, double>;
  const Cost inf{std::numeric_limits<double>::infinity(), 0.0};
  std::vector<std::vector<Cost>> best(chunks, std::vector<Cost>(L + 1, inf));
  std::vector<std::vector<int64_t>> split(chunks, std::vector<int64_t>(L + 1, -1));
  for (int64_t l = 1; l <= L; ++l) {
    double x = load(0, l);
    best[0][l] = {x, x * x};
  }
  for (int c = 1; c < chunks; ++c) {
    for (int64_t l = c + 1; l <= L; ++l) {
      for (int64_t k = c; k < l; ++k) {  // chunks 0..c-1 hold [0, k), chunk c holds [k, l)
        if (best[c - 1][k].first == inf.first) continue;
        double x = load(c, l - k);
        Cost cost{std::max(best[c - 1][k].first, x), best[c - 1][k].second + x * x};
        if (cost < best[c][l]) {
          best[c][l] = cost;
          split[c][l] = k;
        }
      }
    }
  }
  std::vector<int64_t> layers(chunks);
  int64_t end = L;
  for (int c = chunks - 1; c > 0; --c) {
    int64_t k = split[c][end];
    layers[c] = end - k;
    end = k;
  }
  layers[0] = end;
  return layers;
}

}  // namespace

int64_t PipelineLayout::first_layer(int chunk) const {
  HPCRL_CHECK(chunk >= 0 && chunk < num_chunks(), "chunk " << chunk << " of " << num_chunks());
  int64_t first = 0;
  for (int c = 0; c < chunk; ++c) first += chunk_layers[c];
  return first;
}

int64_t PipelineLayout::end_layer(int chunk) const { return first_layer(chunk) + chunk_layers[chunk]; }

std::vector<int> PipelineLayout::chunks_of_rank(int pp_rank) const {
  std::vector<int> out;
  for (int c = pp_rank; c < num_chunks(); c += pp) out.push_back(c);
  return out;
}

int PipelineLayout::chunk_of_layer(int64_t layer) const {
  int64_t end = 0;
  for (int c = 0; c < num_chunks(); ++c) {
    end += chunk_layers[c];
    if (layer < end) return c;
  }
  throw RuntimeError("pipeline layout: layer " + std::to_string(layer) + " is past the last chunk (" +
                     std::to_string(end) + " layers)");
}

std::string PipelineLayout::describe() const {
  std::ostringstream os;
  os << "pp=" << pp << " × " << virtual_stages << " chunk" << (virtual_stages > 1 ? "s" : "") << ": layers ";
  int64_t first = 0;
  for (int c = 0; c < num_chunks(); ++c) {
    os << (c ? " | " : "") << "[" << first << ", " << first + chunk_layers[c] << ")";
    first += chunk_layers[c];
  }
  return os.str();
}

PipelineLayout partition_layers(const ModelArch& arch, int pp, int virtual_stages,
                                const std::vector<int64_t>& layers_per_chunk, bool lm_head, bool value_head) {
  HPCRL_CHECK_INPUT(pp >= 1, "pipeline layout: pp must be at least 1, got " << pp);
  HPCRL_CHECK_INPUT(virtual_stages >= 1, "pipeline layout: virtual stages must be at least 1, got " << virtual_stages);
  HPCRL_CHECK_INPUT(virtual_stages == 1 || pp > 1, "pipeline layout: " << virtual_stages
                                                   << " virtual stages need pp > 1 (interleaving chunks on a single "
                                                      "rank only adds overhead); use virtual stages 1");
  const int chunks = pp * virtual_stages;
  const int64_t L = arch.num_layers;
  const std::string what =
      virtual_stages == 1 ? "pp=" + std::to_string(pp)
                          : "pp=" + std::to_string(pp) + " × " + std::to_string(virtual_stages) + " virtual stages";
  HPCRL_CHECK_INPUT(chunks <= L, "pipeline layout: " << what << " needs " << chunks << " stages of at least one layer, "
                                                     << "but the model has " << L << " layers; use at most " << L
                                                     << " pipeline stages");
  PipelineLayout layout;
  layout.pp = pp;
  layout.virtual_stages = virtual_stages;
  if (layers_per_chunk.empty()) {
    layout.chunk_layers = balanced_split(arch, chunks, lm_head, value_head);
    return layout;
  }
  const std::string list = list_str(layers_per_chunk);
  HPCRL_CHECK_INPUT(static_cast<int>(layers_per_chunk.size()) == chunks,
                    "pipeline layout: the per-stage layer list " << list << " has " << layers_per_chunk.size()
                                                                 << " entries but " << what << " has " << chunks
                                                                 << " stages; give one layer count per stage");
  int64_t sum = 0;
  for (size_t c = 0; c < layers_per_chunk.size(); ++c) {
    HPCRL_CHECK_INPUT(layers_per_chunk[c] >= 1, "pipeline layout: stage " << c << " of the per-stage layer list "
                                                                          << list << " has " << layers_per_chunk[c]
                                                                          << " layers; every stage needs at least one");
    sum += layers_per_chunk[c];
  }
  HPCRL_CHECK_INPUT(sum == L, "pipeline layout: the per-stage layer list " << list << " adds up to " << sum
                                                                           << " layers but the model has " << L
                                                                           << "; make the counts add up to " << L);
  layout.chunk_layers = layers_per_chunk;
  return layout;
}

}  // namespace hpcrl::model
