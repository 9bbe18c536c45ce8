// libFuzzer target: the rendezvous frame codec (rendezvous/codec.hpp).
//
// Input: one byte that picks the size of the pieces the stream is fed in (1..64
// bytes, as a socket would hand them over), then the byte stream. Every message
// that decodes must survive Encode -> decode unchanged, re-encode to exactly the
// bytes it came from, and have PayloadSize equal to its encoded payload. The
// decoder must never buffer more than its contract allows.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "rendezvous/codec.hpp"
#include "tests/fuzz/fuzz_check.hpp"

using dlaunch::rendezvous::Encode;
using dlaunch::rendezvous::FrameDecoder;
using dlaunch::rendezvous::kHeaderSize;
using dlaunch::rendezvous::kMaxPayload;
using dlaunch::rendezvous::Message;
using dlaunch::rendezvous::PayloadSize;

namespace {

// Decodes one whole frame with a fresh decoder; it must be exactly one message.
Message DecodeOne(const std::string& frame) {
  FrameDecoder decoder;
  decoder.Feed(frame);
  auto next = decoder.Next();
  FUZZ_CHECK(next.ok(), "re-decoding an encoded message failed: " + next.status().message());
  FUZZ_CHECK(next->has_value(), "re-decoding an encoded message needs more bytes");
  FUZZ_CHECK(decoder.buffered() == 0, "bytes left after one encoded frame");
  return std::move(**next);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  std::string_view stream(reinterpret_cast<const char*>(data) + 1, size - 1);

  FrameDecoder decoder;
  std::size_t consumed = 0;  // bytes of `stream` in whole frames decoded so far
  for (std::size_t fed = 0; fed < stream.size();) {
    std::size_t n = std::min(piece, stream.size() - fed);
    decoder.Feed(stream.substr(fed, n));
    fed += n;
    for (;;) {
      auto next = decoder.Next();
      if (!next.ok()) return 0;  // garbage is refused; that is the decoder's job
      if (!next->has_value()) break;
      const Message& message = **next;
      std::string encoded = Encode(message);
      FUZZ_CHECK(encoded.size() - kHeaderSize == PayloadSize(message), "PayloadSize differs from Encode");
      // The wire format is canonical: the frame re-encodes to the bytes it came from.
      FUZZ_CHECK(encoded == stream.substr(consumed, encoded.size()), "re-encoding changed the frame's bytes");
      consumed += encoded.size();
      FUZZ_CHECK(DecodeOne(encoded) == message, "decode -> Encode -> decode changed the message");
    }
    // The FrameDecoder contract: at most one header, one payload under the cap and
    // the last piece fed are buffered.
    FUZZ_CHECK(decoder.buffered() <= kHeaderSize + kMaxPayload + piece, "the decoder buffers past its cap");
    FUZZ_CHECK(decoder.buffered() == fed - consumed, "buffered() disagrees with the bytes fed");
  }
  return 0;
}
