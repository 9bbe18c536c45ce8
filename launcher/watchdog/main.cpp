// dlaunch-watch GROUP DIR FILE PROGRAM: the first stage of the watchdog that
// dlaunch starts for each job (launcher/watchdog/watch.hpp). Not for people:
// dlaunch starts it with the job mark and then its orders on stdin, and its
// stdout and stderr on a pipe of its own, where kWatchAck and the challenge it
// read say that it is watching, and anything else (this program's complaint,
// or a foreign program's output) that it is not.
//
// It lives as long as the job, and every job, every node agent among them,
// pays its start. So it is written against the kernel alone, with no C or C++
// library: a glibc program's start probes the processor and its caches (each
// `cpuid` a trap to the hypervisor on a virtual machine) and relocates itself,
// 0.5 ms of CPU here against 0.1 ms for this one (bench/profile/agent.md). What
// it does is small enough for that: it reads the mark record, opens PROGRAM and
// /dev/null, answers, and keeps the orders that follow in two tables. A kStop
// ends it. At EOF, when the launcher is gone, it writes the record and the
// tables, as orders, into a memfd and executes PROGRAM (the launcher's own
// binary, which the launcher opened and handed down as /proc/self/fd/N) as kWatchProgramName
// GROUP DIR FILE with that on stdin: dlaunch's WatchMain, which reads /proc and
// kills with all of RunWatch. If it cannot, it kills the registered groups
// itself.
//
// Linux on x86-64 and AArch64. Its stack protector's guard is set up here from
// the kernel's AT_RANDOM bytes, as glibc would.
#include <asm/unistd.h>
#include <linux/auxvec.h>
#include <linux/close_range.h>
#include <linux/fcntl.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/watchdog/watch_wire.hpp"

using dlaunch::launcher::kMaxMarkEntry;
using dlaunch::launcher::kWatchAck;
using dlaunch::launcher::kWatchChallengeSize;
using dlaunch::launcher::kWatchProgramName;
using dlaunch::launcher::WatchMessage;
using dlaunch::launcher::WatchOp;

namespace {

// The kernel's numbers that no header of its own gives to a program without a C library.
constexpr long kSigHup = 1, kSigInt = 2, kSigQuit = 3, kSigKill = 9, kSigUsr1 = 10, kSigUsr2 = 12, kSigPipe = 13,
               kSigTerm = 15;
constexpr long kSeekSet = 0;

long Sys(long n, long a = 0, long b = 0, long c = 0, long d = 0, long e = 0) {
  long ret;
#if defined(__x86_64__)
  register long r10 __asm__("r10") = d;
  register long r8 __asm__("r8") = e;
  __asm__ volatile("syscall" : "=a"(ret) : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8) : "rcx", "r11", "memory");
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  register long x3 __asm__("x3") = d;
  register long x4 __asm__("x4") = e;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory");
  ret = x0;
#else
#error "dlaunch-watch's first stage is written for Linux on x86-64 and AArch64"
#endif
  return ret;
}

[[noreturn]] void Exit(int code) {
  for (;;) Sys(__NR_exit_group, code);
}

size_t Length(const char* s) {
  size_t n = 0;
  while (s[n] != '\0') ++n;
  return n;
}

// `size` bytes by read(2) or write(2), `call`, whole: false on EOF or an error first.
bool Whole(long call, int fd, uintptr_t at, size_t size) {
  while (size > 0) {
    long n = Sys(call, fd, static_cast<long>(at), static_cast<long>(size));
    if (n == -4) continue;  // EINTR
    if (n <= 0) return false;
    at += static_cast<uintptr_t>(n);
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool WriteAll(int fd, const void* from, size_t size) {
  return Whole(__NR_write, fd, reinterpret_cast<uintptr_t>(from), size);
}

bool ReadAll(int fd, void* to, size_t size) { return Whole(__NR_read, fd, reinterpret_cast<uintptr_t>(to), size); }

// One line on stderr, which dlaunch quotes when this program does not answer.
void Say(const char* what, const char* detail = "") {
  const char* parts[] = {kWatchProgramName, ": ", what, detail, "\n"};
  for (const char* part : parts) WriteAll(2, part, Length(part));
}

// The tables of what is registered. A job registers its workers' groups and
// its processes a few at a time; what would pass these bounds is left out, so
// that the tables never grow past a few MiB of untouched memory.
constexpr int kMaxEntries = 1 << 16;
int32_t groups[kMaxEntries];
int group_count = 0;
struct Process {
  int32_t pid;
  uint64_t start_time;
};
Process processes[kMaxEntries];
int process_count = 0;

void Apply(const WatchMessage& m) {
  switch (m.op) {
    case WatchOp::kAddGroup:
    case WatchOp::kRemoveGroup: {
      if (m.id <= 1) break;  // kill(-1) would be every process this user may signal; 0 our own group
      int i = 0;
      while (i < group_count && groups[i] != m.id) ++i;
      if (m.op == WatchOp::kRemoveGroup) {
        if (i < group_count) groups[i] = groups[--group_count];
      } else if (i == group_count && group_count < kMaxEntries) {
        groups[group_count++] = m.id;
      }
      break;
    }
    case WatchOp::kAddProcess:
    case WatchOp::kRemoveProcess: {
      int i = 0;
      while (i < process_count && processes[i].pid != m.id) ++i;
      if (m.op == WatchOp::kRemoveProcess) {
        if (i < process_count) processes[i] = processes[--process_count];
      } else if (i < process_count) {
        processes[i].start_time = m.start_time;
      } else if (process_count < kMaxEntries) {
        processes[process_count++] = Process{m.id, m.start_time};
      }
      break;
    }
    case WatchOp::kStop:
      break;
  }
}

// The mark record as read: its 4-byte length, the challenge and the mark.
char record[4 + kWatchChallengeSize + kMaxMarkEntry];
size_t record_size = 0;

// The launcher is gone: the second stage gets the record and the tables on
// stdin, then EOF. Returns only if it could not be started.
void HandOver(int program, char** argv, char** envp) {
  long orders = Sys(__NR_memfd_create, reinterpret_cast<long>("dlaunch-watch-orders"), 0);
  if (orders < 0) return;
  bool ok = WriteAll(static_cast<int>(orders), record, record_size);
  for (int i = 0; ok && i < group_count; ++i) {
    WatchMessage m{WatchOp::kAddGroup, groups[i], 0};
    ok = WriteAll(static_cast<int>(orders), &m, sizeof m);
  }
  for (int i = 0; ok && i < process_count; ++i) {
    WatchMessage m{WatchOp::kAddProcess, processes[i].pid, processes[i].start_time};
    ok = WriteAll(static_cast<int>(orders), &m, sizeof m);
  }
  if (!ok || Sys(__NR_lseek, orders, 0, kSeekSet) != 0 || Sys(__NR_dup3, orders, 0, 0) != 0) return;
  char* args[] = {const_cast<char*>(kWatchProgramName), argv[1], argv[2], argv[3], nullptr};
  Sys(__NR_execveat, program, reinterpret_cast<long>(""), reinterpret_cast<long>(args), reinterpret_cast<long>(envp),
      AT_EMPTY_PATH);
}

__attribute__((noinline)) int Main(int argc, char** argv, char** envp) {
  if (argc != 5) {
    Say("expected 4 arguments (GROUP DIR FILE PROGRAM; dlaunch starts it)");
    return 2;
  }
  uint32_t size = 0;
  if (!ReadAll(0, &size, sizeof size)) {
    Say("orders on stdin: no job mark");
    return 2;
  }
  if (size < kWatchChallengeSize || size - kWatchChallengeSize > kMaxMarkEntry) {
    Say("orders on stdin: a record of the wrong size (dlaunch starts it)");
    return 2;
  }
  const char* length = reinterpret_cast<const char*>(&size);
  for (size_t i = 0; i < sizeof size; ++i) record[i] = length[i];
  if (!ReadAll(0, record + sizeof size, size)) {
    Say("orders on stdin: the job mark cut short");
    return 2;
  }
  record_size = sizeof size + size;
  long program = Sys(__NR_openat, AT_FDCWD, reinterpret_cast<long>(argv[4]), O_RDONLY | O_CLOEXEC);
  if (program < 0) {
    Say("cannot open the second stage ", argv[4]);
    return 2;
  }
  long null = Sys(__NR_openat, AT_FDCWD, reinterpret_cast<long>("/dev/null"), O_RDWR | O_CLOEXEC);
  if (null < 0) {
    Say("cannot open /dev/null");
    return 2;
  }
  // What dlaunch handed down to be opened (PROGRAM as /proc/self/fd/N) is open
  // again as `program`: the second stage gets nothing of ours but 0-2.
  Sys(__NR_close_range, 3, ~0U, CLOSE_RANGE_CLOEXEC);
  // Its own process group: a SIGKILL to the launcher's group (a head-node
  // launch stopping a local agent) must leave the watchdog to clean up after
  // it. The terminal's signals are the launcher's.
  Sys(__NR_setpgid, 0, 0);
  const long terminal[] = {kSigInt, kSigTerm, kSigHup, kSigQuit, kSigUsr1, kSigUsr2, kSigPipe};
  for (long sig : terminal) {
    unsigned long ignore[4] = {1 /* SIG_IGN */, 0, 0, 0};  // the kernel's sigaction: handler, flags, restorer, mask
    Sys(__NR_rt_sigaction, sig, reinterpret_cast<long>(ignore), 0, 8);
  }
  char answer[1 + kWatchChallengeSize];
  answer[0] = kWatchAck;
  for (size_t i = 0; i < kWatchChallengeSize; ++i) answer[1 + i] = record[sizeof size + i];
  WriteAll(1, answer, sizeof answer);  // < PIPE_BUF: whole or not at all
  // So that a reader of the launcher's output sees EOF when the launcher goes.
  Sys(__NR_dup3, null, 1, 0);
  Sys(__NR_dup3, null, 2, 0);

  WatchMessage m{};
  for (;;) {
    long n = Sys(__NR_read, 0, reinterpret_cast<long>(&m), sizeof m);
    if (n == -4) continue;                        // EINTR
    if (n != static_cast<long>(sizeof m)) break;  // EOF: the launcher is gone
    if (m.op == WatchOp::kStop) return 0;         // orderly exit
    Apply(m);
  }
  HandOver(static_cast<int>(program), argv, envp);
  for (int i = 0; i < group_count; ++i) Sys(__NR_kill, -groups[i], kSigKill);
  return 1;
}

}  // namespace

// What the compiler calls: the stack protector's guard and its failure, and
// the memory functions it may emit for copies (written with volatile, so that
// they are not themselves turned back into calls to them).
extern "C" {
#if defined(__x86_64__)
// The thread control block that %fs points to; the guard is read at 0x28, as glibc lays it out.
uintptr_t dlaunch_watch_tcb[8];
#else
uintptr_t __stack_chk_guard;
#endif

[[noreturn]] void __stack_chk_fail() {
  Say("stack smashing detected");
  Exit(127);
}

void* memcpy(void* to, const void* from, size_t n) {
  volatile char* t = static_cast<volatile char*>(to);
  const volatile char* f = static_cast<const volatile char*>(from);
  for (size_t i = 0; i < n; ++i) t[i] = f[i];
  return to;
}

void* memset(void* to, int c, size_t n) {
  volatile char* t = static_cast<volatile char*>(to);
  for (size_t i = 0; i < n; ++i) t[i] = static_cast<char>(c);
  return to;
}

// Called from _start with the initial stack: argc, argv, NULL, envp, NULL, auxv.
[[noreturn]] __attribute__((no_stack_protector, used)) void dlaunch_watch_start(long* stack) {
  int argc = static_cast<int>(stack[0]);
  char** argv = reinterpret_cast<char**>(stack + 1);
  char** envp = argv + argc + 1;
  char** end = envp;
  while (*end != nullptr) ++end;
  uintptr_t guard = 0;
  for (unsigned long* aux = reinterpret_cast<unsigned long*>(end + 1); aux[0] != AT_NULL; aux += 2)
    if (aux[0] == AT_RANDOM) guard = *reinterpret_cast<const uintptr_t*>(aux[1]);
  guard &= ~static_cast<uintptr_t>(0xff);  // a zero byte first stops a string overrun, as glibc's does
#if defined(__x86_64__)
  dlaunch_watch_tcb[0] = reinterpret_cast<uintptr_t>(dlaunch_watch_tcb);
  dlaunch_watch_tcb[5] = guard;
  constexpr long kArchSetFs = 0x1002;
  if (Sys(__NR_arch_prctl, kArchSetFs, reinterpret_cast<long>(dlaunch_watch_tcb)) != 0) Exit(127);
#else
  __stack_chk_guard = guard;
#endif
  Exit(Main(argc, argv, envp));
}
}  // extern "C"

#if defined(__x86_64__)
__asm__(
    ".text\n.globl _start\n.type _start,@function\n_start:\n endbr64\n xor %ebp, %ebp\n mov %rsp, %rdi\n"
    " and $-16, %rsp\n call dlaunch_watch_start\n hlt\n");
#elif defined(__aarch64__)
__asm__(
    ".text\n.globl _start\n.type _start,%function\n_start:\n mov x29, #0\n mov x30, #0\n mov x0, sp\n"
    " bl dlaunch_watch_start\n brk #0\n");
#endif
