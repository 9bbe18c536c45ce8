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
}

TEST_CASE("a proof verifies only with the same token, nonces and run id", "[auth]") {
  std::string na(kNonceSize, 'a'), nc(kNonceSize, 'c');
  std::string proof = ProofFor("s3cret", na, nc, "job42");
  CHECK(proof.size() == kProofSize);
  CHECK(proof == ProofFor("s3cret", na, nc, "job42"));  // deterministic
  CHECK(Verify("s3cret", na, nc, "job42", proof));

  CHECK_FALSE(Verify("s3cret!", na, nc, "job42", proof));
  CHECK_FALSE(Verify("s3cret", nc, na, "job42", proof));  // nonces swapped
  CHECK_FALSE(Verify("s3cret", na, std::string(kNonceSize, 'd'), "job42", proof));
  CHECK_FALSE(Verify("s3cret", na, nc, "job43", proof));
  CHECK_FALSE(Verify("s3cret", na, nc, "job42", proof.substr(0, 31)));
  CHECK_FALSE(Verify("s3cret", na, nc, "job42", ""));
  std::string flipped = proof;
  flipped[31] = static_cast<char>(flipped[31] ^ 1);
  CHECK_FALSE(Verify("s3cret", na, nc, "job42", flipped));
  // Length prefixes keep field boundaries apart: "ab"+"c" is not "a"+"bc".
  CHECK(ProofFor("t", "ab", "c", "r") != ProofFor("t", "a", "bc", "r"));
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
      {"file of newlines", {std::nullopt, std::nullopt, TokenFile{"/x/tok", "\n\n", 0600}},
       "token file /x/tok: empty token"},
      {"group-readable", {std::nullopt, std::nullopt, TokenFile{"/x/tok", "s3cret\n", 0640}},
       "token file /x/tok: mode 0640 lets group or others read it (chmod 600 /x/tok)"},
      {"world-readable", {std::nullopt, std::nullopt, TokenFile{"/x/tok", "s3cret\n", 0644}},
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

TEST_CASE("ReadTokenFile names a missing file", "[auth]") {
  Result<TokenFile> read = ReadTokenFile("/nonexistent/dlaunch/token");
  REQUIRE_FALSE(read.ok());
  CHECK(read.status().code() == Code::kNotFound);
  CHECK(read.status().message() == "token file /nonexistent/dlaunch/token: No such file or directory");
}

}  // namespace dlaunch::rendezvous
