// The α–β costs of collectives (comm_cost.h).
#include "hpcrl/cost/comm_cost.h"

#include <cmath>

namespace hpcrl::cost {

bool crosses_nodes(int64_t size, int64_t stride, int gpus_per_node) {
  return size > 1 && size * stride > gpus_per_node;
}

double all_reduce_seconds(double bytes, int64_t size, const Link& link) {
  if (size <= 1) return 0;
  const double n = double(size);
  return 2.0 * (n - 1) / n * bytes / link.bandwidth + 2.0 * (n - 1) * link.latency_s;
}

double all_gather_seconds(double bytes, int64_t size, const Link& link) {
  if (size <= 1) return 0;
  const double n = double(size);
  return (n - 1) / n * bytes / link.bandwidth + (n - 1) * link.latency_s;
}

double reduce_scatter_seconds(double bytes, int64_t size, const Link& link) {
  return all_gather_seconds(bytes, size, link);
}

double all_to_all_seconds(double bytes, int64_t size, const Link& link) { return all_gather_seconds(bytes, size, link); }

double send_seconds(double bytes, const Link& link) { return bytes / link.bandwidth + link.latency_s; }

double broadcast_seconds(double bytes, int64_t size, const Link& link) {
  if (size <= 1) return 0;
  return bytes / link.bandwidth + std::ceil(std::log2(double(size))) * link.latency_s;
}

}  // namespace hpcrl::cost
