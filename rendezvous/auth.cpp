#include "rendezvous/auth.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

namespace dlaunch::rendezvous {
namespace {

// Changing these labels (or the layout below) is a protocol change: bump
// kProtocolVersion with it. They differ per direction so that a coordinator's proof
// sent back to it (or an agent's to an agent) never verifies.
constexpr std::string_view kAgentLabel = "dlaunch-rdzv-v3 agent proof";
constexpr std::string_view kCoordinatorLabel = "dlaunch-rdzv-v3 coordinator proof";
constexpr std::size_t kMaxTokenFile = 64 * 1024;

void AppendField(std::string& out, std::string_view field) {
  std::uint32_t n = static_cast<std::uint32_t>(field.size());
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>(n >> shift & 0xff);
  out.append(field);
}

// SHA-256 of the concatenation of `parts`, with OpenSSL's SHA-256 itself. Not
// through EVP: in OpenSSL 3 the first EVP fetch of a process (HMAC(), EVP_Digest)
// reads openssl.cnf, loads the default provider and builds the name map of
// every algorithm, which was about a tenth of an agent's CPU, once per node
// (bench/profile/agent.md). SHA256_Init and friends are deprecated in 3.0 for
// that EVP layer, but remain, and need no set-up.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
void Sha256(std::initializer_list<std::string_view> parts, unsigned char (&out)[SHA256_DIGEST_LENGTH]) {
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  for (std::string_view part : parts) SHA256_Update(&ctx, part.data(), part.size());
  SHA256_Final(out, &ctx);
}
#pragma GCC diagnostic pop

}  // namespace

// HMAC as RFC 2104 defines it, over Sha256 above (HMAC() would go through EVP).
// The RFC 4231 vectors in tests/rendezvous/auth_test.cpp check it.
std::string HmacSha256(std::string_view key, std::string_view data) {
  constexpr std::size_t kBlock = 64;  // SHA-256's block size
  unsigned char digest[SHA256_DIGEST_LENGTH];
  std::string k(key);
  if (k.size() > kBlock) {
    Sha256({key}, digest);
    k.assign(reinterpret_cast<const char*>(digest), sizeof digest);
  }
  k.resize(kBlock, '\0');
  std::string ipad(kBlock, '\0'), opad(kBlock, '\0');
  for (std::size_t i = 0; i < kBlock; ++i) {
    ipad[i] = static_cast<char>(k[i] ^ 0x36);
    opad[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  Sha256({ipad, data}, digest);
  Sha256({opad, std::string_view(reinterpret_cast<const char*>(digest), sizeof digest)}, digest);
  OPENSSL_cleanse(k.data(), k.size());
  OPENSSL_cleanse(ipad.data(), ipad.size());
  OPENSSL_cleanse(opad.data(), opad.size());
  return std::string(reinterpret_cast<const char*>(digest), sizeof digest);
}

std::string ProofFor(std::string_view token, Prover who, std::string_view nonce_agent,
                     std::string_view nonce_coordinator, std::string_view run_id) {
  std::string data(who == Prover::kAgent ? kAgentLabel : kCoordinatorLabel);
  AppendField(data, nonce_agent);
  AppendField(data, nonce_coordinator);
  AppendField(data, run_id);
  return HmacSha256(token, data);
}

bool Verify(std::string_view token, Prover who, std::string_view nonce_agent, std::string_view nonce_coordinator,
            std::string_view run_id, std::string_view proof) {
  if (proof.size() != kProofSize) return false;
  std::string expected = ProofFor(token, who, nonce_agent, nonce_coordinator, run_id);
  return CRYPTO_memcmp(expected.data(), proof.data(), kProofSize) == 0;
}

Status CheckCoordinatorProof(std::string_view token, std::string_view nonce_agent, std::string_view nonce_coordinator,
                             std::string_view run_id, std::string_view proof) {
  if (nonce_coordinator.empty() && proof.empty()) return Status::InvalidArgument("it sent no challenge");
  if (nonce_coordinator.size() != kNonceSize) {
    return Status::InvalidArgument(
        fmt::format("challenge nonce of {} bytes (expected {})", nonce_coordinator.size(), kNonceSize));
  }
  if (!Verify(token, Prover::kCoordinator, nonce_agent, nonce_coordinator, run_id, proof)) {
    return Status::InvalidArgument("its proof does not match this agent's token");
  }
  return Status::Ok();
}

Result<std::string> RandomNonce() {
  // The kernel's CSPRNG, which OpenSSL's own seeds from: RAND_bytes would set up
  // OpenSSL's providers first (see Sha256). getrandom blocks only until the pool
  // is first initialized at boot, and returns up to 256 bytes whole.
  std::string nonce(kNonceSize, '\0');
  std::size_t got = 0;
  while (got < nonce.size()) {
    ssize_t n = getrandom(nonce.data() + got, nonce.size() - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Status::Io(fmt::format("rendezvous: no random nonce (getrandom: {})", std::strerror(errno)));
    got += static_cast<std::size_t>(n);
  }
  return nonce;
}

Result<std::string> ChooseToken(const TokenSources& sources) {
  if (sources.flag) {
    if (sources.flag->empty()) return Status::InvalidArgument("--rdzv-token: empty token");
    return *sources.flag;
  }
  if (sources.env) {
    if (sources.env->empty()) {
      return Status::InvalidArgument(fmt::format("{}: empty token", kTokenEnvVar));
    }
    return *sources.env;
  }
  if (!sources.file) return std::string();
  const TokenFile& file = *sources.file;
  // Checked before the contents, so a leaked file is reported even when empty.
  if ((file.mode & 077) != 0) {
    return Status::InvalidArgument(fmt::format("token file {}: mode {:04o} lets group or others read it (chmod 600 {})",
                                               file.path, file.mode, file.path));
  }
  std::string token = file.contents;
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  if (token.empty()) return Status::InvalidArgument(fmt::format("token file {}: empty token", file.path));
  return token;
}

Result<TokenFile> ReadTokenFile(const std::string& path) {
  // O_NONBLOCK: opening a FIFO with no writer would block for ever; its type is
  // refused below before any read.
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    int err = errno;
    std::string msg = fmt::format("token file {}: {}", path, std::strerror(err));
    return err == ENOENT ? Status::NotFound(msg) : Status::Io(msg);
  }
  TokenFile file;
  file.path = path;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return Status::Io(fmt::format("token file {}: {}", path, std::strerror(err)));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    const char* kind = S_ISFIFO(st.st_mode)                         ? "a FIFO"
                       : S_ISDIR(st.st_mode)                        ? "a directory"
                       : S_ISSOCK(st.st_mode)                       ? "a socket"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
                                                                    : "not a file";
    return Status::InvalidArgument(fmt::format("token file {}: not a regular file ({})", path, kind));
  }
  file.mode = st.st_mode & 07777;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return Status::Io(fmt::format("token file {}: {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    file.contents.append(buf, static_cast<std::size_t>(n));
    if (file.contents.size() > kMaxTokenFile) {
      close(fd);
      return Status::InvalidArgument(
          fmt::format("token file {}: over {} bytes (is this the right file?)", path, kMaxTokenFile));
    }
  }
  close(fd);
  return file;
}

}  // namespace dlaunch::rendezvous
