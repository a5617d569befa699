// zstd: `mode = "compress"` turns each message (each chunk of a large one) into one zstd frame
// and flags it HOPRELAY_MSG_ZSTD, when that makes it smaller; `mode = "decompress"` turns a
// flagged payload back into what was compressed and clears the flag. Compressed at the head and
// decompressed at the leaves, it shrinks what crosses the relays.
//
// Chunk by chunk (HOPRELAY_STAGE_CHUNKS): a chunk is compressed alone, into a frame of its own
// with its own flag, so a decompressing node gets every chunk back within the one slot it came
// in, whatever its size once decompressed. A whole message is decompressed the same way (it may
// hold several frames one after another). Nothing allocates per message: one compression or
// decompression context per instance, and one scratch buffer that grows to the largest
// `capacity` seen (a slot, or a reassembled message's slots), once.
#include <zstd.h>
#include <zstd_errors.h>  // ZSTD_getErrorCode: a payload that does not shrink is not an error

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "builtin.h"

namespace hoprelay::stages {
namespace {

int parse_level(const char* text) {
  const int lo = ZSTD_minCLevel();
  const int hi = ZSTD_maxCLevel();
  std::string why = std::string("level = ") + text + " is not a zstd level: use an integer from " +
                    std::to_string(lo) + " (fastest) to " + std::to_string(hi) +
                    " (smallest); 3 is the default";
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (!*text || *end || v < lo || v > hi) throw std::invalid_argument(why);
  return static_cast<int>(v);
}

class ZstdStage {
 public:
  explicit ZstdStage(const StageArgs& args) {
    const char* mode = args.get("mode");
    const char* level = args.get("level");
    if (!mode) {
      throw std::invalid_argument(
          "zstd needs a mode: mode = \"compress\" (at the head) or mode = \"decompress\" (at "
          "the leaves)");
    }
    if (std::strcmp(mode, "compress") == 0) {
      compress_ = true;
    } else if (std::strcmp(mode, "decompress") != 0) {
      throw std::invalid_argument(
          std::string("mode must be \"compress\" or \"decompress\", not \"") + mode + "\"");
    }
    if (compress_) {
      cctx_.reset(ZSTD_createCCtx());
      if (!cctx_) throw std::runtime_error("cannot create a zstd compression context");
      const int lvl = level ? parse_level(level) : ZSTD_CLEVEL_DEFAULT;
      // The checksum (4 bytes a frame) is what makes a damaged frame an error at the leaf
      // rather than wrong bytes delivered: a flipped bit in a literal decodes without it.
      if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_compressionLevel, lvl)) ||
          ZSTD_isError(ZSTD_CCtx_setParameter(cctx_.get(), ZSTD_c_checksumFlag, 1))) {
        throw std::runtime_error("cannot set the zstd compression level");
      }
    } else {
      if (level) {
        throw std::invalid_argument(
            "level applies to mode = \"compress\" only: a decompressing stage reads any level");
      }
      dctx_.reset(ZSTD_createDCtx());
      if (!dctx_) throw std::runtime_error("cannot create a zstd decompression context");
    }
  }

  hoprelay_verdict process(hoprelay_msg& m) { return compress_ ? compress(m) : decompress(m); }
  void flush() {}
  const char* last_error() const { return why_; }

 private:
  hoprelay_verdict compress(hoprelay_msg& m) {
    if (m.flags & HOPRELAY_MSG_ZSTD) return HOPRELAY_FORWARD;  // compressed upstream
    // Only a frame smaller than the payload is worth sending: the room it may take is one byte
    // less, and a payload that does not compress (zstd says dstSize_tooSmall) goes on as it is.
    if (m.length < 2) return HOPRELAY_FORWARD;
    uint8_t* out = scratch(m.capacity);
    size_t n = ZSTD_compress2(cctx_.get(), out, m.length - 1, m.data, m.length);
    if (ZSTD_isError(n)) {
      if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall) return HOPRELAY_FORWARD;
      return fail("zstd cannot compress it: %s", ZSTD_getErrorName(n));
    }
    std::memcpy(m.data, out, n);
    m.length = static_cast<uint32_t>(n);
    m.flags |= HOPRELAY_MSG_ZSTD;
    return HOPRELAY_FORWARD;
  }

  hoprelay_verdict decompress(hoprelay_msg& m) {
    if (!(m.flags & HOPRELAY_MSG_ZSTD)) return HOPRELAY_FORWARD;  // sent as it was
    if (m.length == 0) return fail("payload flagged zstd is empty");
    // Every frame states its size (the compressing stage writes it): the total must fit the
    // slot before anything is written there.
    size_t total = 0;
    for (size_t at = 0; at < m.length;) {
      const uint8_t* frame = m.data + at;
      const size_t left = m.length - at;
      unsigned long long size = ZSTD_getFrameContentSize(frame, left);
      if (size == ZSTD_CONTENTSIZE_ERROR) {
        return fail("payload flagged zstd is not a zstd frame at byte %zu (corrupt?)", at);
      }
      if (size == ZSTD_CONTENTSIZE_UNKNOWN) {
        return fail("zstd frame at byte %zu does not state its size", at);
      }
      size_t csize = ZSTD_findFrameCompressedSize(frame, left);
      if (ZSTD_isError(csize)) {
        return fail("zstd frame at byte %zu is cut short or corrupt: %s", at,
                    ZSTD_getErrorName(csize));
      }
      if (size > m.capacity - total) {  // total <= capacity here: no overflow, whatever size
        return fail("zstd frame decompresses to %llu bytes, more than the %u the slot holds",
                    size + total < size ? size : size + total, m.capacity);
      }
      total += size;
      at += csize;
    }
    uint8_t* out = scratch(m.capacity);
    size_t n = ZSTD_decompressDCtx(dctx_.get(), out, m.capacity, m.data, m.length);
    if (ZSTD_isError(n)) return fail("corrupt zstd frame: %s", ZSTD_getErrorName(n));
    if (n != total) return fail("corrupt zstd frame: %zu bytes, not the %zu it states", n, total);
    std::memcpy(m.data, out, n);
    m.length = static_cast<uint32_t>(n);
    m.flags &= ~HOPRELAY_MSG_ZSTD;
    return HOPRELAY_FORWARD;
  }

  // Grows to the largest capacity seen, once: a slot, or the slots of a reassembled message.
  uint8_t* scratch(uint32_t capacity) {
    if (scratch_.size() < capacity) scratch_.resize(capacity);
    return scratch_.data();
  }

  __attribute__((format(printf, 2, 3))) hoprelay_verdict fail(const char* format, ...) {
    va_list args;
    va_start(args, format);
    std::vsnprintf(why_buf_, sizeof(why_buf_), format, args);
    va_end(args);
    why_ = why_buf_;
    return HOPRELAY_ERROR;
  }

  struct FreeCCtx {
    void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
  };
  struct FreeDCtx {
    void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
  };

  bool compress_ = false;
  std::unique_ptr<ZSTD_CCtx, FreeCCtx> cctx_;
  std::unique_ptr<ZSTD_DCtx, FreeDCtx> dctx_;
  std::vector<uint8_t> scratch_;
  char why_buf_[160] = {};
  const char* why_ = nullptr;
};

constexpr const char* kKeys[] = {"mode", "level", nullptr};
// One instance per worker thread: each has its own (de)compression context and scratch.
constexpr auto kDescriptor = BuiltinAdaptor<ZstdStage>::make(
    "zstd", kKeys, HOPRELAY_STAGE_CHUNKS | HOPRELAY_STAGE_PER_THREAD | HOPRELAY_STAGE_TRANSFORM);

}  // namespace

const hoprelay_stage_descriptor* zstd_descriptor() {
  return &kDescriptor;
}

}  // namespace hoprelay::stages
