#include "rendezvous/auth.hpp"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace dlaunch::rendezvous {
namespace {

std::string ToHex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// A file in a fresh temporary directory, removed at the end of the test.
class TempFile {
 public:
  TempFile(const std::string& contents, mode_t mode) {
    char dir[] = "/tmp/dlaunch_auth_XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    dir_ = dir;
    path_ = dir_ + "/token";
    std::ofstream(path_) << contents;
    REQUIRE(chmod(path_.c_str(), mode) == 0);
  }
  ~TempFile() {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string dir_;
  std::string path_;
};

}  // namespace

TEST_CASE("HMAC-SHA256 matches RFC 4231", "[auth]") {
  // Test case 2.
  CHECK(ToHex(HmacSha256("Jefe", "what do ya want for nothing?")) ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  // Test case 1.
  CHECK(ToHex(HmacSha256(std::string(20, '\x0b'), "Hi There")) ==
        "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  // The keyed context is reused for the same key and re-keyed for another, in
  // any order (auth.cpp keeps one per thread).
  for (int round = 0; round < 3; ++round) {
    CHECK(ToHex(HmacSha256("Jefe", "what do ya want for nothing?")) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    CHECK(ToHex(HmacSha256("Jefe", "what do ya want for nothing?")) ==
          "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    CHECK(ToHex(HmacSha256(std::string(20, '\x0b'), "Hi There")) ==
          "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  }
  // Test case 6: a key longer than the block, hashed first.
  CHECK(ToHex(HmacSha256(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")) ==
        "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST_CASE("a proof verifies only with the same token, direction, nonces and run id", "[auth]") {
  std::string na(kNonceSize, 'a'), nc(kNonceSize, 'c');
  for (Prover who : {Prover::kAgent, Prover::kCoordinator}) {
    std::string proof = ProofFor("s3cret", who, na, nc, "job42");
    CHECK(proof.size() == kProofSize);
    CHECK(proof == ProofFor("s3cret", who, na, nc, "job42"));  // deterministic
    CHECK(Verify("s3cret", who, na, nc, "job42", proof));

    CHECK_FALSE(Verify("s3cret!", who, na, nc, "job42", proof));
    CHECK_FALSE(Verify("s3cret", who, nc, na, "job42", proof));  // nonces swapped
    CHECK_FALSE(Verify("s3cret", who, na, std::string(kNonceSize, 'd'), "job42", proof));
    CHECK_FALSE(Verify("s3cret", who, na, nc, "job43", proof));  // another run id
    CHECK_FALSE(Verify("s3cret", who, na, nc, "job42", proof.substr(0, 31)));
    CHECK_FALSE(Verify("s3cret", who, na, nc, "job42", ""));
    std::string flipped = proof;
    flipped[31] = static_cast<char>(flipped[31] ^ 1);
    CHECK_FALSE(Verify("s3cret", who, na, nc, "job42", flipped));
  }
  // Length prefixes keep field boundaries apart: "ab"+"c" is not "a"+"bc".
  CHECK(ProofFor("t", Prover::kAgent, "ab", "c", "r") != ProofFor("t", Prover::kAgent, "a", "bc", "r"));
}

TEST_CASE("a proof is bound to its direction: reflected to the other side it fails", "[auth]") {
  std::string na(kNonceSize, 'a'), nc(kNonceSize, 'c');
  std::string by_coordinator = ProofFor("s3cret", Prover::kCoordinator, na, nc, "job42");
  std::string by_agent = ProofFor("s3cret", Prover::kAgent, na, nc, "job42");
  CHECK(by_coordinator != by_agent);
  // A fake agent that echoes the coordinator's proof back as its own fails ...
  CHECK_FALSE(Verify("s3cret", Prover::kAgent, na, nc, "job42", by_coordinator));
  // ... and so does a fake coordinator that replays an agent's proof.
  CHECK_FALSE(Verify("s3cret", Prover::kCoordinator, na, nc, "job42", by_agent));
}

TEST_CASE("CheckCoordinatorProof says why a coordinator did not prove the token", "[auth]") {
  std::string na(kNonceSize, 'a'), nc(kNonceSize, 'c');
  std::string good = ProofFor("s3cret", Prover::kCoordinator, na, nc, "job42");
  CHECK(CheckCoordinatorProof("s3cret", na, nc, "job42", good).ok());
  static const struct {
    const char* what;
    std::string nonce, proof;
    const char* cause;
  } kCases[] = {
      {"empty challenge", "", "", "it sent no challenge"},
      {"short nonce", "short", "", "challenge nonce of 5 bytes (expected 32)"},
      {"nonce without a proof", std::string(kNonceSize, 'c'), "", "its proof does not match this agent's token"},
      {"the agent's own proof reflected", std::string(kNonceSize, 'c'),
       ProofFor("s3cret", Prover::kAgent, std::string(kNonceSize, 'a'), std::string(kNonceSize, 'c'), "job42"),
       "its proof does not match this agent's token"},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    Status s = CheckCoordinatorProof("s3cret", na, c.nonce, "job42", c.proof);
    CHECK(s.code() == Code::kInvalidArgument);
    CHECK(s.message() == c.cause);
  }
  CHECK(CheckCoordinatorProof("s3cret", na, nc, "job43", good).message() ==
        "its proof does not match this agent's token");  // another job's proof
  CHECK(CheckCoordinatorProof("guess", na, nc, "job42", good).message() ==
        "its proof does not match this agent's token");
}

TEST_CASE("RandomNonce gives fresh nonces of kNonceSize bytes", "[auth]") {
  Result<std::string> a = RandomNonce(), b = RandomNonce();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->size() == kNonceSize);
  CHECK(*a != *b);
}

TEST_CASE("ChooseToken: flag, then environment, then file", "[auth]") {
  TokenFile file{"/etc/dlaunch/token", "from-file\n", 0600};
  static const struct {
    const char* what;
    std::optional<std::string> flag, env;
    bool with_file;
    const char* token;
  } kCases[] = {
      {"nothing set: no authentication", std::nullopt, std::nullopt, false, ""},
      {"flag wins", "from-flag", "from-env", true, "from-flag"},
      {"environment before file", std::nullopt, "from-env", true, "from-env"},
      {"file alone, newline trimmed", std::nullopt, std::nullopt, true, "from-file"},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    TokenSources sources{c.flag, c.env, c.with_file ? std::optional<TokenFile>(file) : std::nullopt};
    Result<std::string> token = ChooseToken(sources);
    REQUIRE(token.ok());
    CHECK(*token == c.token);
  }
  TokenSources crlf{std::nullopt, std::nullopt, TokenFile{"t", "tok en\r\n\n", 0400}};
  CHECK(*ChooseToken(crlf) == "tok en");
}

TEST_CASE("ChooseToken refuses empty tokens and a file open to others", "[auth]") {
  static const struct {
    const char* what;
    TokenSources sources;
    const char* error;
  } kCases[] = {
      {"empty flag", {"", std::nullopt, std::nullopt}, "--rdzv-token: empty token"},
      {"empty env", {std::nullopt, "", std::nullopt}, "DLAUNCH_RDZV_TOKEN: empty token"},
      {"file of newlines",
       {std::nullopt, std::nullopt, TokenFile{"/x/tok", "\n\n", 0600}},
       "token file /x/tok: empty token"},
      {"group-readable",
       {std::nullopt, std::nullopt, TokenFile{"/x/tok", "s3cret\n", 0640}},
       "token file /x/tok: mode 0640 lets group or others read it (chmod 600 /x/tok)"},
      {"world-readable",
       {std::nullopt, std::nullopt, TokenFile{"/x/tok", "s3cret\n", 0644}},
       "token file /x/tok: mode 0644 lets group or others read it (chmod 600 /x/tok)"},
  };
  for (const auto& c : kCases) {
    INFO(c.what);
    Result<std::string> token = ChooseToken(c.sources);
    REQUIRE_FALSE(token.ok());
    CHECK(token.status().code() == Code::kInvalidArgument);
    CHECK(token.status().message() == c.error);
  }
}

TEST_CASE("ReadTokenFile reads the contents and the mode", "[auth]") {
  TempFile file("s3cret\n", 0600);
  Result<TokenFile> read = ReadTokenFile(file.path());
  REQUIRE(read.ok());
  CHECK(read->path == file.path());
  CHECK(read->contents == "s3cret\n");
  CHECK(read->mode == 0600);
  CHECK(*ChooseToken({std::nullopt, std::nullopt, *read}) == "s3cret");

  TempFile loose("s3cret\n", 0644);
  Result<TokenFile> open = ReadTokenFile(loose.path());
  REQUIRE(open.ok());
  CHECK(open->mode == 0644);
  CHECK_FALSE(ChooseToken({std::nullopt, std::nullopt, *open}).ok());
}

TEST_CASE("ReadTokenFile refuses a FIFO at once instead of hanging on it", "[auth]") {
  char dir[] = "/tmp/dlaunch_auth_XXXXXX";
  REQUIRE(mkdtemp(dir) != nullptr);
  std::string fifo = std::string(dir) + "/token";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  Result<TokenFile> read = ReadTokenFile(fifo);  // with no writer, a blocking open never returns
  unlink(fifo.c_str());
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().code() == Code::kInvalidArgument);
  CHECK(read.status().message() == "token file " + fifo + ": not a regular file (a FIFO)");
  Result<TokenFile> directory = ReadTokenFile(dir);
  rmdir(dir);
  CHECK(directory.status().message() == std::string("token file ") + dir + ": not a regular file (a directory)");
}

TEST_CASE("ReadTokenFile names a missing file", "[auth]") {
  Result<TokenFile> read = ReadTokenFile("/nonexistent/dlaunch/token");
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().code() == Code::kNotFound);
  CHECK(read.status().message() == "token file /nonexistent/dlaunch/token: No such file or directory");
}

}  // namespace dlaunch::rendezvous
