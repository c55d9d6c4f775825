// stress/hlog.cpp — HdrHistogram's V2 encoding, compressed by zlib, in base64, and the log.
#include "hlog.hpp"

#include <zlib.h>

#include <array>
#include <bit>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <vector>

#include "format.hpp"

namespace tickwheel::stress {
namespace {

// HdrHistogram's V2 cookies with the word-size nibble 0x10 that marks ZigZag LEB128 counts.
constexpr std::uint32_t kEncodingCookie = 0x1c849303U | 0x10U;
constexpr std::uint32_t kCompressedCookie = 0x1c849304U | 0x10U;
constexpr std::uint32_t kSignificantDigits = 2;  // 256 sub-buckets: Histogram's layout (see there)

// `v` as `bytes` bytes, big-endian (HdrHistogram's ByteBuffer order).
void put(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes) {
  for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8)
    out.push_back(static_cast<std::uint8_t>(v >> shift));
}

// HdrHistogram's ZigZagEncoding.putLong: ZigZag, then 7 bits per byte low first, at most 9 bytes
// (the ninth carries 8 bits).
void put_zigzag(std::vector<std::uint8_t>& out, std::int64_t value) {
  auto v = static_cast<std::uint64_t>((value << 1) ^ (value >> 63));
  for (int i = 0; i < 8; ++i) {
    if ((v >> 7) == 0) {
      out.push_back(static_cast<std::uint8_t>(v));
      return;
    }
    out.push_back(static_cast<std::uint8_t>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(v));
}

// The V2 encoding: header, then the counts up to the maximum's bucket.
std::vector<std::uint8_t> encode(const Histogram& h) {
  std::vector<std::uint8_t> counts;
  const std::size_t limit = h.count() == 0 ? 0 : Histogram::index_of(h.max()) + 1;
  for (std::size_t i = 0; i < limit;) {
    const std::uint64_t n = h.count_at(i++);
    if (n != 0) {
      put_zigzag(counts, static_cast<std::int64_t>(n));
      continue;
    }
    std::int64_t zeros = 1;
    while (i < limit && h.count_at(i) == 0) {
      ++zeros;
      ++i;
    }
    put_zigzag(counts, zeros > 1 ? -zeros : 0);
  }
  std::vector<std::uint8_t> out;
  put(out, kEncodingCookie, 4);
  put(out, counts.size(), 4);  // payload length
  put(out, 0, 4);              // normalizing index offset
  put(out, kSignificantDigits, 4);
  put(out, 1, 8);                                    // lowest discernible value
  put(out, std::max<std::uint64_t>(h.max(), 2), 8);  // highest trackable value
  put(out, std::bit_cast<std::uint64_t>(1.0), 8);    // integer to double conversion ratio
  out.insert(out.end(), counts.begin(), counts.end());
  return out;
}

// A zlib stream (RFC 1950) of `data`, as HdrHistogram's Deflater writes it.
std::vector<std::uint8_t> deflate(const std::vector<std::uint8_t>& data) {
  uLongf size = compressBound(static_cast<uLong>(data.size()));
  std::vector<std::uint8_t> out(size);
  if (compress2(out.data(), &size, data.data(), static_cast<uLong>(data.size()), Z_BEST_COMPRESSION) != Z_OK)
    throw std::runtime_error("zlib's compress2 failed on an HdrHistogram encoding");
  out.resize(size);
  return out;
}

std::string base64(const std::vector<std::uint8_t>& data) {
  static constexpr std::string_view kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (std::size_t i = 0; i < data.size(); i += 3) {
    const std::uint32_t n = std::uint32_t{data[i]} << 16 |
                            (i + 1 < data.size() ? std::uint32_t{data[i + 1]} << 8 : 0) |
                            (i + 2 < data.size() ? std::uint32_t{data[i + 2]} : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < data.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < data.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

// One histogram as HdrHistogram's compressed V2 encoding, in base64 (the log's last column).
std::string hdr_base64(const Histogram& h) {
  const std::vector<std::uint8_t> compressed = deflate(encode(h));
  std::vector<std::uint8_t> out;
  put(out, kCompressedCookie, 4);
  put(out, compressed.size(), 4);
  out.insert(out.end(), compressed.begin(), compressed.end());
  return base64(out);
}

}  // namespace

HlogWriter::HlogWriter(double start_epoch_s) {
  const auto seconds = static_cast<std::time_t>(start_epoch_s);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  std::array<char, 64> when{};
  std::strftime(when.data(), when.size(), "%a %b %d %H:%M:%S UTC %Y", &utc);
  text_ =
      "#[Logged with tickwheel-stress: values in ns; tags: none = lateness of every fire, past_tick, "
      "control, tick_probe]\n";
  text_ += "#[Histogram log format version 1.3]\n";
  text_ += format("#[StartTime: %.3f (seconds since epoch), %s]\n", start_epoch_s, when.data());
  text_ += "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n";
}

void HlogWriter::interval(std::string_view tag, double start_s, double length_s, const Histogram& h) {
  if (!tag.empty()) text_ += "Tag=" + std::string(tag) + ",";
  text_ +=
      format("%.3f,%.3f,%.3f,", start_s, length_s, static_cast<double>(h.max()) / 1e6) + hdr_base64(h) + "\n";
}

}  // namespace tickwheel::stress
