// What a process leaves behind when it dies of a fault: the signal, the
// faulting address and a symbolized stack trace of the faulting thread on
// stderr, so that a shard or trainer that crashes where only its log
// survives (CI, a spot node gone a minute later) says where it crashed.
#ifndef SPOTPS_COMMON_CRASH_REPORT_H_
#define SPOTPS_COMMON_CRASH_REPORT_H_

namespace spotps {

// Installs the report for SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT and
// SIGTRAP; after it the signal's default action runs (the exit status of a
// death by that signal, and a core file where `ulimit -c` allows one).
// SIGTERM and SIGINT are left alone: they ask a process to stop, they are
// not faults. main() calls it with argv[0] before it starts any thread.
void InstallCrashReport(const char* argv0);

}  // namespace spotps

#endif  // SPOTPS_COMMON_CRASH_REPORT_H_
