// The rendezvous token of a user's loopback jobs. Every local user can reach a
// loopback endpoint, so without a token any of them could join. When none is
// given (--rdzv-token, DLAUNCH_RDZV_TOKEN, --rdzv-token-file) and the endpoint is
// loopback, agents and a stand-alone coordinator use this user's loopback token,
// which only this user (and root) can read.
//
// Where: DIR/rdzv-token, DIR being /dev/shm/dlaunch-UID (/tmp/dlaunch-UID where
// /dev/shm is not a trusted tmpfs: DefaultTempParent), created and checked by the
// live view's code (OpenLiveDir: mode 0700, refused when a symlink, another
// user's, or open to group or others). Not $XDG_RUNTIME_DIR: the agents of one
// job may be started from sessions with different environments (cron, ssh, a
// service, a test), and all of them must find the same file; DIR is one per
// user and machine. Across a private /dev/shm or /tmp (containers, systemd's
// PrivateTmp) give a token.
//
// One token per user, not per job: a stand-alone coordinator serves many run ids,
// agents spell one endpoint differently (localhost, 127.0.0.1), and every proof
// is bound to the run id and fresh nonces (auth.hpp), so one secret shared by a
// user's own jobs gives nobody else anything. It is never removed (a job that is
// starting may be reading it); it lasts as long as the directory.
//
// The first caller creates it: the token goes to a fresh mkstemp file (0600) in
// DIR, which is then published under its name with link(2). link fails when the
// name exists, so of several agents starting at once exactly one publishes and the
// others read its token; and a reader never sees a half-written file, so nobody
// waits or retries.
#pragma once

#include <sys/types.h>

#include <string>

#include <boost/asio/io_context.hpp>

#include "base/status.hpp"
#include "launcher/core/loopback.hpp"  // IsLoopbackHost: whether this token applies

namespace dlaunch::launcher {

inline constexpr const char* kLoopbackTokenFile = "rdzv-token";

// The directory of `uid`'s loopback token: /dev/shm/dlaunch-UID (or /tmp/dlaunch-UID).
std::string LoopbackTokenDir(uid_t uid);

// `uid`'s loopback token (64 hex digits) from DIR/rdzv-token, creating `dir`
// (0700) and the token (0600) when missing. InvalidArgument naming the directory
// or the file when either is refused: the directory as OpenLiveDir refuses it;
// the file when it is a symlink, not a regular file, not `uid`'s, open to group
// or others, or not a token dlaunch wrote. Io naming the path when it cannot be
// created or read.
Result<std::string> LoopbackToken(const std::string& dir, uid_t uid);

// This user's own loopback token, for a rendezvous at `endpoint` on loopback
// that was given no token (every local user reaches loopback, so its token
// keeps the others out). Fails with one line naming `endpoint`, why the token
// cannot be used, and how to give one.
Result<std::string> OwnLoopbackToken(const std::string& endpoint);

}  // namespace dlaunch::launcher
