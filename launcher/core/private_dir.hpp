// Directories and files that no other local user can plant, replace or write
// through: dlaunch's private directory (the stack hook, its dumps,
// the workers' error files), the run directory under a --log-dir that others
// may share (a 1777 scratch directory), and the files dlaunch writes in them.
//
// Every function is an outside effect on the file system and may be called
// from any thread. "This user" is the effective uid.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.hpp"
#include "launcher/core/dir_walk.hpp"

namespace dlaunch::launcher {

// Where dlaunch's own small files go when TMPDIR does not say: /dev/shm when
// it is a tmpfs that no other user can replace entries in (owned by root or
// this user; if its group or others may write it, sticky), else /tmp. Such
// files (error files, stack dumps, progress files, the live view's sockets)
// are made and removed by every job, and a tmpfs does that without touching a
// disk. Judged once per process.
const std::string& DefaultTempParent();

// The room MakePrivateDir wants in its fallback (a tmpfs: memory, often small
// in a container and shared with the job's own shared memory) before it puts
// a private directory there: a worker's error file or stack dump that cannot
// be written there loses why it failed or hung.
inline constexpr uint64_t kMinFreeBytes = uint64_t{16} << 20;
inline constexpr uint64_t kMinFreeInodes = 1024;

// A file system's size and what is free of it; 0 `bytes` or `inodes`: not
// limited (statfs's f_blocks or f_files).
struct FreeSpace {
  uint64_t bytes = 0;
  uint64_t bytes_free = 0;
  uint64_t inodes = 0;
  uint64_t inodes_free = 0;
};

// Why `dir`, on a file system with `space`, has too little room for
// dlaunch's own files ("/dev/shm: not used (only 12 KiB free; 16 MiB wanted)",
// or the same of inodes); empty when it has room.
std::string TooFull(const std::string& dir, const FreeSpace& space);

// A fresh directory of this user's, mode 0700, with an unpredictable name,
// made in a directory that no other user can replace it in (TrustedDir's
// rule): `path` is TMPDIR/dlaunch-XXXXXX when `tmpdir` is an absolute path
// that passes, else `fallback`/dlaunch-XXXXXX, else /tmp/dlaunch-XXXXXX, as
// Python's tempfile (torchrun) goes on to the next candidate. `fallback` is
// DefaultTempParent() for dlaunch's own files and /tmp for what may grow
// (logs); it is passed over silently when it fails the trust rule, and with a
// word when it has too little room (TooFull) or nothing can be made in it. A
// TMPDIR where nothing can be made gives way the same. Workers write files in
// it by name (TORCHELASTIC_ERROR_FILE, the stack hook's dumps): the check
// holds because the parent is trusted, not because it was checked just
// before. `note` is empty, or one line for the user saying why a TMPDIR that
// is set, or a fallback that could be, was not used ("TMPDIR /x: refused
// (owned by uid 65534, not 0); using /dev/shm", "/dev/shm: not used (only 12
// KiB free; 16 MiB wanted); using /tmp"): neither ever fails the job. Fails
// (Io) naming /tmp and the cause when /tmp fails too.
struct PrivateDir {
  std::string path;
  std::string note;
};
Result<PrivateDir> MakePrivateDir(const std::string& tmpdir, const std::string& fallback = DefaultTempParent());

// Where a temporary file of this user's may go by MakePrivateDir's rule: the
// real path of `tmpdir` when it is absolute and passes TrustedDir's rule, else
// /tmp, with `note` saying why (as MakePrivateDir's). Fails (Io) when /tmp
// fails too.
Result<PrivateDir> TrustedTempDir(const std::string& tmpdir);

// `path` as a directory only this user can write: made with mode 0700 when
// nothing is there (its parent must exist and MayMakeIn accept it), else
// accepted only when lstat shows a directory (a symbolic link is never
// followed) owned by this user that neither its group nor others can write.
// With `make` false nothing is made: a missing `path` passes when it could be
// made (--explain asks so). Fails (InvalidArgument) "PATH: refused (owned by
// uid 65534, not 0)", "PATH: refused (a symbolic link)", "PATH: refused (mode
// 0777 lets other users write; 0700 expected)", or (Io) "PATH: cannot create
// (...)".
Status EnsureOwnDir(const std::string& path, bool make = true);

// The real path of `dir`, a directory the user named (--log-dir, TMPDIR), when
// no other user can replace what this user makes in it: it is owned by this
// user or root, and if every user can write it, it has the sticky bit (as
// /tmp: then only an entry's owner may rename or remove it). A directory its
// group can write trusts that group; the directories above it are not checked.
// The path is walked with WalkToDir (dir_walk.hpp), which refuses a symbolic
// link another user planted in a directory others can write. `missing`: what
// to do with components that do not exist (Missing::kCheck: the path it would
// be, unchecked, since this user would make it). Fails (InvalidArgument)
// "DIR: refused (owned by uid 65534, not 0)", "DIR: refused (mode 0777 lets
// every user replace ...)" or WalkToDir's refusals, or (Io) when it cannot be
// resolved or made.
Result<std::string> TrustedDir(const std::string& dir, Missing missing = Missing::kFail);

// Opens `path` write-only (O_CLOEXEC), never through a symbolic link at its
// last component (O_NOFOLLOW). `fresh`: creates it, failing when anything is
// there (O_EXCL); else creates it or truncates the regular file there. Anything
// but a regular file is refused (a FIFO without waiting for a reader). Returns
// the descriptor (the caller closes it), or fails (Io) "PATH: cannot open
// (...)" with errno as open(2) set it (EINVAL: not a regular file).
Result<int> OpenToWrite(const std::string& path, bool fresh, mode_t mode = 0644);

// Writes `text` into `path` (OpenToWrite, not fresh; mode 0600 when new): no
// symbolic link is followed. Fails naming the path and the cause.
Status WriteFile(const std::string& path, std::string_view text);

// Writes `text` into the first of `dir`/`stem`-1`ext`, `stem`-2`ext`, ... that
// does not exist yet, created exclusively (OpenToWrite fresh), so that what a
// directory already holds stays. Returns its path, or fails naming it; a file
// it made and could not write whole is removed.
Result<std::string> WriteNumberedFile(const std::string& dir, std::string_view stem, std::string_view ext,
                                      std::string_view text);

// Writes `text` into a new file `dir`/`prefix`XXXXXX`suffix` (mkstemps: an
// unpredictable name, created exclusively, mode 0600) and returns its path.
// Fails (Io) naming the template and the cause; nothing is left behind.
Result<std::string> WriteTempFile(const std::string& dir, std::string_view prefix, std::string_view suffix,
                                  std::string_view text);

}  // namespace dlaunch::launcher
