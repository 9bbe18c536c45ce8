#include "rendezvous/auth.hpp"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rand.h>

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

std::string OpenSslError() {
  unsigned long err = ERR_get_error();
  if (err == 0) return "no OpenSSL error queued";
  char buf[256];
  ERR_error_string_n(err, buf, sizeof buf);
  return buf;
}

}  // namespace

std::string HmacSha256(std::string_view key, std::string_view data) {
  // OpenSSL 3's one-shot HMAC() fetches the MAC and the digest by name on every
  // call (locks, hash lookups, string compares): over a third of a coordinator's
  // handshake (bench/profile/coordinator.md). One context per thread, keyed once
  // for each new key and re-initialised with that key for each MAC, skips that.
  struct KeyedMac {
    EVP_MAC_CTX* ctx = nullptr;
    std::string key;
    ~KeyedMac() {
      EVP_MAC_CTX_free(ctx);
      OPENSSL_cleanse(key.data(), key.size());
    }
  };
  thread_local KeyedMac keyed;
  auto* in = reinterpret_cast<const unsigned char*>(data.data());
  bool ok = true;
  if (keyed.ctx == nullptr || keyed.key != key) {
    static EVP_MAC* const kHmac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
    EVP_MAC_CTX_free(keyed.ctx);
    OPENSSL_cleanse(keyed.key.data(), keyed.key.size());
    keyed.key.clear();
    keyed.ctx = kHmac != nullptr ? EVP_MAC_CTX_new(kHmac) : nullptr;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0), OSSL_PARAM_construct_end()};
    ok = keyed.ctx != nullptr &&
         EVP_MAC_init(keyed.ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) == 1;
    if (ok) keyed.key.assign(key);
  } else {
    ok = EVP_MAC_init(keyed.ctx, nullptr, 0, nullptr) == 1;  // the same key again
  }
  unsigned char mac[EVP_MAX_MD_SIZE];
  std::size_t len = 0;
  ok = ok && EVP_MAC_update(keyed.ctx, in, data.size()) == 1 && EVP_MAC_final(keyed.ctx, mac, &len, sizeof mac) == 1;
  // HMAC with SHA-256 fails only when OpenSSL cannot allocate; that is not
  // something a caller can handle, so it is treated like any other out-of-memory.
  if (!ok) {
    EVP_MAC_CTX_free(std::exchange(keyed.ctx, nullptr));
    throw std::bad_alloc();
  }
  return std::string(reinterpret_cast<const char*>(mac), len);
}

std::string ProofFor(std::string_view token, Prover who, std::string_view nonce_agent,
                     std::string_view nonce_coordinator, std::string_view run_id) {
  std::string data(who == Prover::kAgent ? kAgentLabel : kCoordinatorLabel);
  AppendField(data, nonce_agent);
  AppendField(data, nonce_coordinator);
  AppendField(data, run_id);
  return HmacSha256(token, data);
}

bool Verify(std::string_view token, Prover who, std::string_view nonce_agent,
            std::string_view nonce_coordinator, std::string_view run_id, std::string_view proof) {
  if (proof.size() != kProofSize) return false;
  std::string expected = ProofFor(token, who, nonce_agent, nonce_coordinator, run_id);
  return CRYPTO_memcmp(expected.data(), proof.data(), kProofSize) == 0;
}

Status CheckCoordinatorProof(std::string_view token, std::string_view nonce_agent,
                             std::string_view nonce_coordinator, std::string_view run_id,
                             std::string_view proof) {
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
  std::string nonce(kNonceSize, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(nonce.data()), static_cast<int>(nonce.size())) != 1) {
    return Status::Io(fmt::format("rendezvous: no random nonce (RAND_bytes: {})", OpenSslError()));
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
    return Status::InvalidArgument(
        fmt::format("token file {}: mode {:04o} lets group or others read it (chmod 600 {})",
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
    const char* kind = S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISDIR(st.st_mode) ? "a directory"
                       : S_ISSOCK(st.st_mode) ? "a socket" : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? "a device"
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
