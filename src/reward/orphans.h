// What an outside program (a reward program, a tool) leaves behind in a session of its
// own (`setsid`, a daemon's double fork) escapes its process group, so killing the group
// does not end it. hpcrl makes itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER):
// such a process, once its parent exits, is re-parented to hpcrl instead of init, and
// every Subprocess::stop ends the children of hpcrl that no live Subprocess started.
#pragma once

#include <sys/types.h>

#include <functional>
#include <vector>

namespace hpcrl::reward {

// Once per process: become a child subreaper (Linux; elsewhere nothing happens).
void adopt_orphans();
// A Subprocess's leader, alive from spawn to reaping (never counted as an orphan).
void register_leader(pid_t pid);
// Runs `spawn` (starts a child; returns 0 and sets *pid, or an error number)
// and registers the child as a leader with no orphan check in between, so
// end_orphans() on another thread (a tool's stop beside a reward's spawn)
// never takes the new child for an orphan.
int spawn_leader(pid_t* pid, const std::function<int(pid_t*)>& spawn);
void unregister_leader(pid_t pid);
// Children of this process that are not registered leaders and that it did not already have
// when it first adopted orphans (a library's own helper, such as MPI's singleton daemon).
std::vector<pid_t> orphaned_children();
// SIGKILLs and reaps every orphaned child; returns how many there were.
size_t end_orphans();

}  // namespace hpcrl::reward
