// The stack hook of Python workers (stacks.hpp says what it is for): where it
// lies, which workers get it, and what it puts into their environment.
//
// Where: a sitecustomize.py in a directory of this user's kept across jobs,
// PythonHookDir() under the per-user directory (launcher/live/live.hpp's LiveDir, 0700), so
// that Python's cached bytecode of it is kept too. Compiling it cost every
// Python worker about a millisecond, most of it the first compile() of a
// process setting up every AST type (bench/profile/startup.md); a worker that
// finds the bytecode compiles nothing. The hook caches its bytecode itself
// when Python is told not to (PYTHONDONTWRITEBYTECODE, -B): the directory is
// dlaunch's, not the user's. Its dumps stay in the job's private directory.
//
// Which: only a worker whose command names Python or runs a shell script,
// which may start Python (CommandNamesPython, ShebangNamesPython); any other
// (`true`, a native program, `sh -c` text naming no Python) gets neither the
// hook nor a dump directory, and its stacks come from gdb.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "envmap/layout.hpp"
#include "base/status.hpp"

namespace dlaunch::launcher {

// The hook's source, as written into sitecustomize.py.
std::string_view PythonHookSource();

// "USER_DIR/hook-HASH": HASH (16 hex digits) names the hook's source, so that a
// dlaunch with another hook never imports this one or its cached bytecode.
std::string PythonHookDir(const std::string& user_dir);

// Makes `hook_dir` (0700, or accepted only as this user's alone: EnsureOwnDir)
// and leaves the hook in it as sitecustomize.py (0600). The file is written, to
// a temporary name and then renamed, only when it is missing or differs, so
// that jobs running at once each see a whole file and the bytecode Python
// cached beside it stays valid. Fails naming the directory or file.
Status WritePythonHook(const std::string& hook_dir);

// Puts the hook into a worker's environment: `hook_dir` first on PYTHONPATH,
// DLAUNCH_STACKS_DIR (`dumps_dir`) and DLAUNCH_STACKS_SIGNAL (StackSignal()).
void AddPythonHook(envmap::EnvMap& env, const std::string& hook_dir, const std::string& dumps_dir);

// Turns on the hook's sampler (launcher/straggler/samples.hpp) in an
// environment AddPythonHook filled: DLAUNCH_SAMPLE_PERIOD_MS and
// DLAUNCH_SAMPLE_FLUSH_MS, whole milliseconds. The hook starts nothing for a
// value that is not a positive whole number of milliseconds up to a day; a
// period well above Python's GIL switch interval (5 ms) keeps a busy worker's
// samples on time. A period of 0 turns it off: removes both, also where the
// launcher's own environment had them.
void AddSampler(envmap::EnvMap& env, std::chrono::milliseconds period, std::chrono::milliseconds flush);

// Whether a command names Python: the program it runs (`exe`, resolved) or one
// of its arguments (argv[0] as typed included) holds "python" or "pypy",
// whatever the case: `python3 train.py`, `env python3 ...`, `numactl ...
// python ...`, `sh -c 'python3 ...'`; or a shell (sh, bash, dash, zsh, ksh)
// given a script file rather than -c: `bash run.sh`. A false positive costs only
// the hook.
bool CommandNamesPython(std::string_view exe, const std::vector<std::string>& argv);
// Whether `head`, the first bytes of the program (ReadHead), is a script whose
// "#!" lines name Python: `#!/usr/bin/env python3`, torchrun's entry point,
// pip's `#!/bin/sh` trampoline that execs a long-named python; or whose "#!"
// names a shell (`#!/bin/bash`, `#!/usr/bin/env sh`), which may start Python.
bool ShebangNamesPython(std::string_view head);
// The first 512 bytes of `path`; empty when it cannot be read.
std::string ReadHead(const std::string& path);

}  // namespace dlaunch::launcher
