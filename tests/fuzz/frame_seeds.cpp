// Writes the seed corpus of fuzz_frames (tests/fuzz/corpus/frames) with the real encoders, so
// every seed is a valid frame or body of the current wire version:
//   build-fuzz/tests/fuzz/frame_seeds tests/fuzz/corpus/frames
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "hoprelay/transport/outcome.h"
#include "hoprelay/transport/wire.h"

namespace {

using namespace hoprelay::transport;
using Bytes = std::vector<std::byte>;

Bytes header(FrameHeader h) {
  Bytes b(kFrameHeaderSize);
  encode_header(h, b.data());
  return b;
}

Bytes frame(FrameHeader h, const Bytes& body) {
  h.length = static_cast<uint32_t>(body.size());
  Bytes b = header(h);
  b.insert(b.end(), body.begin(), body.end());
  return b;
}

HelloBody hello(PeerRole role, const char* name, uint32_t origin) {
  HelloBody h;
  h.role = role;
  std::strncpy(h.name, name, kMaxNodeName);
  h.topology_hash = 0x0123456789abcdefull;
  h.origin = origin;
  return h;
}

Bytes hello_body(const HelloBody& h) {
  Bytes b(kHelloSize);
  encode_hello(h, b.data());
  return b;
}

Bytes welcome_body(uint32_t slots, uint32_t slot_size) {
  Bytes b(kWelcomeSize);
  encode_welcome({slots, slot_size, 0x0123456789abcdefull, 0}, b.data());
  return b;
}

Bytes cm_hello_body(const HelloBody& h) {
  Bytes b(kCmHelloSize);
  encode_cm_hello(h, b.data());
  return b;
}

Bytes cm_welcome_body(uint32_t slots, uint32_t slot_size) {
  Bytes b(kCmWelcomeSize);
  encode_cm_welcome({slots, slot_size, 0x1234, 0x7f0000001000ull, 0x0123456789abcdefull}, b.data());
  return b;
}

// The accept of a link with auth_key_file: no ring yet, a nonce to answer.
Bytes cm_challenge_body(uint32_t slots, uint32_t slot_size) {
  CmWelcome w{slots, slot_size, 0, 0, 0x0123456789abcdefull};
  w.auth = true;
  for (size_t i = 0; i < w.nonce.size(); ++i) w.nonce[i] = std::byte(i * 7 + 1);
  Bytes b(kCmChallengeSize);
  encode_cm_welcome(w, b.data());
  return b;
}

// What a relay reports for a message it gave up: its own drop, or merged from its branches.
Bytes outcome_body(int records) {
  Outcome o;
  o.add(DropReason::kStageError, "b", "crc32c: message leaves no room for the 4-byte trailer");
  if (records > 1) o.add(DropReason::kPeerDown, "relay-2.eu", "downstream c2 down longer than 2s");
  if (records > 2) o.add(DropReason::kIncomplete, std::string(kMaxNodeName, 'n'), "");
  o.partial = records == 2;
  Bytes b(kMaxOutcomePayload);
  b.resize(encode_outcome(o, b.data()));
  return b;
}

Bytes text(const std::string& s) {
  Bytes b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::string dir = argv[1];
  auto put = [&](const std::string& name, const Bytes& b) {
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!out) {
      std::fprintf(stderr, "cannot write %s/%s\n", dir.c_str(), name.c_str());
      std::exit(1);
    }
  };

  HelloBody node = hello(PeerRole::kNode, "relay-b.eu_1", 0);
  HelloBody producer = hello(PeerRole::kProducer, "a", 7);
  HelloBody longest = hello(PeerRole::kNode, std::string(kMaxNodeName, 'n').c_str(), 0);
  Bytes payload = text("0123456789abcdef0123456789abcdef");

  put("header-credit", header({FrameType::kCredit, 0, 0, 0, 0, 3, 0}));
  put("header-bye", header({FrameType::kBye}));
  put("header-data-empty", header({FrameType::kData, 0, 0, 1, 1, 0, 0}));
  put("frame-data", frame({FrameType::kData, 1, 0, 7, 42, 0, 5}, payload));
  // A message in chunks: the first (MORE), a middle one, an abort in place of a chunk.
  FrameHeader chunk{FrameType::kData, kFlagMore, 0, 7, 43, 0, 6};
  put("frame-chunk-first", frame(chunk, payload));
  chunk.chunk = 2;
  put("frame-chunk-middle", frame(chunk, payload));
  FrameHeader abort{FrameType::kData, kFlagAbort, 0, 7, 43, 0, 7};
  abort.chunk = 3;
  put("header-chunk-abort", header(abort));
  // A producer's end of stream (wire version 3): after its messages 0-43.
  put("header-end", header({FrameType::kData, kFlagEnd, 0, 7, 44, 0, 8}));
  // The same, stamped by its head (wire version 6).
  FrameHeader stamped{FrameType::kData, kFlagEnd, 0, 7, 44, 0, 8};
  stamped.chunk = 0x9e3779b9;
  put("header-end-stamped", header(stamped));
  // A zstd-compressed chunk (wire version 5): the stage's flag beside MORE.
  put("header-chunk-zstd", header({FrameType::kData, kFlagZstd | kFlagMore, 0, 7, 45, 0, 9}));
  // Outcomes (wire version 4): a drop of message 42 in slot 5, one of chunk 2 in slot 6.
  FrameHeader outcome{FrameType::kOutcome, 0, 0, 7, 42, 0, 5};
  put("frame-outcome", frame(outcome, outcome_body(1)));
  outcome.chunk = 2;
  outcome.slot = 6;
  put("frame-outcome-chunk", frame(outcome, outcome_body(3)));
  put("body-outcome-merged", outcome_body(2));
  put("frame-hello-node", frame({FrameType::kHello}, hello_body(node)));
  put("frame-hello-producer", frame({FrameType::kHello}, hello_body(producer)));
  put("frame-welcome", frame({FrameType::kWelcome}, welcome_body(64, 65536)));
  put("frame-reject", frame({FrameType::kReject}, text("topology differs")));
  put("body-hello", hello_body(longest));
  put("body-welcome", welcome_body(4096, 16u << 20));
  put("body-cm-hello", cm_hello_body(node));
  put("body-cm-hello-producer", cm_hello_body(producer));
  put("body-cm-welcome", cm_welcome_body(64, 65536));
  put("body-cm-welcome-max", cm_welcome_body(4096, 16u << 20));
  put("body-cm-challenge", cm_challenge_body(64, 65536));
  put("frame-challenge", frame({FrameType::kChallenge}, text(std::string(32, 'n'))));
  put("frame-auth", frame({FrameType::kAuth}, text(std::string(64, 'a'))));
  // A producer's session: hello, welcome back, data, credit, bye.
  put("stream-session",
      cat({frame({FrameType::kHello}, hello_body(producer)),
           frame({FrameType::kWelcome}, welcome_body(2, 256)),
           frame({FrameType::kData, 0, 0, 7, 1, 0, 0}, payload),
           frame({FrameType::kData, 1, 0, 7, 2, 0, 1}, payload),
           header({FrameType::kCredit, 0, 0, 0, 0, 2, 0}), header({FrameType::kBye})}));
  // A relay's answer: the second message was given up, then both credited.
  put("stream-outcome-then-credit",
      cat({frame({FrameType::kWelcome}, welcome_body(2, 256)),
           frame({FrameType::kOutcome, 0, 0, 7, 2, 0, 1}, outcome_body(1)),
           header({FrameType::kCredit, 0, 0, 0, 0, 2, 0})}));
  return 0;
}
