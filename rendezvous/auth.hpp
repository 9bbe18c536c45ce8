// Mutual authentication of agents and coordinator: a shared token and an
// HMAC-SHA256 challenge/response in both directions.
//
// The agent sends a nonce in Hello; the coordinator answers with its own nonce and
// its proof, ProofFor(token, kCoordinator, agent nonce, coordinator nonce, run id),
// in Challenge; the agent checks that proof before it sends anything else, then
// proves itself with ProofFor(token, kAgent, ...). Both nonces are fresh, so a
// recorded proof cannot be replayed; the run id is bound in, so a proof for one job
// is worthless for another; and each direction has its own label, so a proof
// reflected back to the side that made it does not verify. The token itself never
// crosses the wire.
//
// Everything here is thread-safe, and none of it sets up OpenSSL's EVP layer.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace dlaunch::rendezvous {

inline constexpr std::size_t kNonceSize = 32;
inline constexpr std::size_t kProofSize = 32;  // SHA-256
inline constexpr const char* kTokenEnvVar = "DLAUNCH_RDZV_TOKEN";

// HMAC-SHA256 of `data` under `key`: 32 raw bytes.
std::string HmacSha256(std::string_view key, std::string_view data);

// Who proves it holds the token. Each has its own label in the proof.
enum class Prover { kAgent, kCoordinator };

// The proof of `who`: HMAC-SHA256 under the token of `who`'s domain label and the
// three values, each length-prefixed so that no two inputs share an encoding.
std::string ProofFor(std::string_view token, Prover who, std::string_view nonce_agent,
                     std::string_view nonce_coordinator, std::string_view run_id);

// True when `proof` is ProofFor(token, who, ...) of the same values. Compares in
// constant time (CRYPTO_memcmp); a proof of the wrong length is simply false.
bool Verify(std::string_view token, Prover who, std::string_view nonce_agent, std::string_view nonce_coordinator,
            std::string_view run_id, std::string_view proof);

// The agent's check of a Challenge when it holds a token: Ok when the nonce is
// kNonceSize bytes and `proof` is the coordinator's proof for it. Else
// InvalidArgument with the cause alone, for "rendezvous HOST:PORT: the coordinator
// did not prove it holds the token (CAUSE)": "it sent no challenge", "challenge
// nonce of 5 bytes (expected 32)" or "its proof does not match this agent's token".
Status CheckCoordinatorProof(std::string_view token, std::string_view nonce_agent, std::string_view nonce_coordinator,
                             std::string_view run_id, std::string_view proof);

// kNonceSize bytes from the kernel's CSPRNG (getrandom), or Io when it fails.
Result<std::string> RandomNonce();

// A token file as read from disk, before any check.
struct TokenFile {
  std::string path;
  std::string contents;
  unsigned mode = 0600;  // permission bits (st_mode & 07777)
};

// Where a token may come from, read at the edge. Unset sources are nullopt.
struct TokenSources {
  std::optional<std::string> flag;  // --rdzv-token VALUE
  std::optional<std::string> env;   // DLAUNCH_RDZV_TOKEN
  std::optional<TokenFile> file;    // the token file
};

// The token to use: the flag, else the environment, else the file (with trailing
// newlines trimmed); "" when no source is set (no authentication). Fails with
// InvalidArgument for a source that gives an empty token, e.g.
// "DLAUNCH_RDZV_TOKEN: empty token", or for a file open to group or others:
// "token file /x/tok: mode 0644 lets group or others read it (chmod 600 /x/tok)".
Result<std::string> ChooseToken(const TokenSources& sources);

// Reads a token file (at most 64 KiB) and its permission bits. NotFound when it is
// missing, InvalidArgument when it is not a regular file (a FIFO, a directory, a
// device: "token file /x/tok: not a regular file (a FIFO)"), which is never read, so
// a FIFO with no writer cannot hang the caller; Io for any other failure. Each
// message names the file.
Result<TokenFile> ReadTokenFile(const std::string& path);

}  // namespace dlaunch::rendezvous
