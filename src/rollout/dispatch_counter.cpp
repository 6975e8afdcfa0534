// The operator-call counter (dispatch_counter.h): a thread-local RecordFunction
// callback that counts the calls entered at depth 0 on the counting thread.
#include "hpcrl/rollout/dispatch_counter.h"

#include <ATen/record_function.h>

#include "hpcrl/util/check.h"

namespace hpcrl::rollout {

namespace {

struct CountingState {
  bool on = false;
  int64_t count = 0;
  int64_t depth = 0;  // operator calls entered and not yet left: a call at depth > 0 is inside another
  at::CallbackHandle handle = 0;
};
thread_local CountingState counting;  // another thread's calls (LibTorch's workers) are never counted

std::unique_ptr<at::ObserverContext> on_enter(const at::RecordFunction&) {
  if (counting.on && counting.depth++ == 0) ++counting.count;
  return nullptr;
}

void on_leave(const at::RecordFunction&, at::ObserverContext*) {
  if (counting.on && counting.depth > 0) --counting.depth;
}

}  // namespace

DispatchCounter::DispatchCounter() {
  HPCRL_CHECK(!counting.on, "a DispatchCounter already counts on this thread");
  counting = CountingState{true, 0, 0, 0};
  counting.handle = at::addThreadLocalCallback(
      at::RecordFunctionCallback(on_enter, on_leave).scopes({at::RecordScope::FUNCTION}));
}

DispatchCounter::~DispatchCounter() {
  at::removeCallback(counting.handle);
  counting.on = false;
}

int64_t DispatchCounter::count() const { return counting.count; }

int64_t DispatchCounter::now() { return counting.on ? counting.count : 0; }

}  // namespace hpcrl::rollout
