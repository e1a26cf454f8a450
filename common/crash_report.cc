#include "common/crash_report.h"

#include <execinfo.h>
#include <signal.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "absl/debugging/symbolize.h"

namespace spotps {
namespace {

// Everything below runs inside a signal handler: only write(2), no stdio,
// no allocation. backtrace() unwinds with the binaries' unwind tables (they
// work without frame pointers, which Abseil's own failure handler needs and
// an optimised build omits); absl::Symbolize reads the symbol tables and is
// safe to call there.

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};

void Write(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

void WriteHex(uintptr_t value) {
  char digits[2 + 2 * sizeof(value) + 1];
  char* p = digits + sizeof(digits) - 1;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value != 0);
  *--p = 'x';
  *--p = '0';
  Write(p);
}

const char* SignalName(int signal) {
  switch (signal) {
    case SIGSEGV:
      return "SIGSEGV";
    case SIGBUS:
      return "SIGBUS";
    case SIGILL:
      return "SIGILL";
    case SIGFPE:
      return "SIGFPE";
    case SIGABRT:
      return "SIGABRT";
    case SIGTRAP:
      return "SIGTRAP";
  }
  return "a fatal signal";
}

// The instruction the signal interrupted, or null where unknown.
const void* InterruptedInstruction(const void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
#if defined(__x86_64__)
  return reinterpret_cast<const void*>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return reinterpret_cast<const void*>(uc->uc_mcontext.pc);
#else
  (void)uc;
  return nullptr;
#endif
}

void ReportAndDie(int signal, siginfo_t* info, void* context) {
  Write("*** ");
  Write(SignalName(signal));
  Write(" (fault address ");
  WriteHex(reinterpret_cast<uintptr_t>(info->si_addr));
  Write("), stack of the thread that received it:\n");
  void* frames[64];
  const int depth = ::backtrace(frames, 64);
  const void* interrupted = InterruptedInstruction(context);
  for (int i = 0; i < depth; ++i) {
    char name[512];
    Write("    @ ");
    WriteHex(reinterpret_cast<uintptr_t>(frames[i]));
    Write("  ");
    // A return address points after its call: look up the byte before it.
    // The interrupted instruction is no return address.
    const bool exact = i == 0 || frames[i] == interrupted;
    const void* lookup = static_cast<const char*>(frames[i]) - (exact ? 0 : 1);
    Write(absl::Symbolize(lookup, name, sizeof(name)) ? name : "(unknown)");
    Write("\n");
  }
  // SA_RESETHAND restored the default action; a fault re-raises as the
  // faulting instruction runs again, a sent signal needs raising again.
  ::raise(signal);
}

}  // namespace

void InstallCrashReport(const char* argv0) {
  absl::InitializeSymbolizer(argv0);
  // The first backtrace() loads the unwinder (libgcc_s): do it now, not in
  // the handler where loading a library may deadlock.
  void* warm_up[1];
  ::backtrace(warm_up, 1);
  // A stack overflow of the main thread still gets its report.
  static char alternate_stack[64 * 1024];
  stack_t stack{};
  stack.ss_sp = alternate_stack;
  stack.ss_size = sizeof(alternate_stack);
  ::sigaltstack(&stack, nullptr);
  struct sigaction action {};
  action.sa_sigaction = ReportAndDie;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (int signal : kFatalSignals) ::sigaction(signal, &action, nullptr);
}

}  // namespace spotps
