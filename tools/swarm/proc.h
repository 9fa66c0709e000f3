// Reading /proc/PID/* of processes that may end at any moment (the daemon's
// scan for a crashed run's leftover processes, the client's look at a silent
// daemon). A process can exit between the open and the read; the kernel then
// fails the read with ESRCH, and a std::ifstream read through
// istreambuf_iterator turns that into an exception nobody expects (it had
// taken a restarted daemon down while it scanned every process on a busy
// machine). These read with plain system calls: a process that is gone
// reads as "".
#pragma once

#include <string>
#include <vector>

namespace standin::swarm {

// All of `fd` from its current position to its end; "" when a read fails.
// Does not close it.
std::string read_all_or_empty(int fd);

// /proc/PID/NAME ("stat", "environ"), "" when it cannot be read.
std::string proc_file(long pid, const char * name);

// Fields of /proc/PID/stat after the command name (which may hold spaces and
// parentheses): [0] is field 3 (state), [1] field 4 (ppid), [2] field 5
// (pgrp), [19] field 22 (starttime). Empty when the process is gone.
std::vector<std::string> proc_stat_fields(long pid);

} // namespace standin::swarm
