// stress/json.hpp — a minimal JSON writer and reader for the stress report (no dependency).
//
// JsonWriter writes one document to an ostream, objects and arrays nested by begin/end calls, keys
// in the order given, two-space indentation. Strings are escaped per RFC 8259 (quote, backslash and
// every control character); doubles use the shortest round-trip form (std::to_chars), and a NaN or
// an infinity, which JSON cannot hold, is written as null. Misuse (a key inside an array, an
// unbalanced end) is not diagnosed: the writer is for this program's own report, whose shape is
// fixed in code.
//
// JsonValue / parse_json() read a document back, for --svg-from: the plot is drawn from the JSON
// report, so that a fixed JSON file can be rendered by a test through the same code the run uses.
// It accepts RFC 8259 JSON (numbers are read as doubles, \u escapes outside ASCII become UTF-8) and
// throws std::runtime_error naming the offset of the first thing it cannot read.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tickwheel::stress {

class JsonWriter {
 public:
  explicit JsonWriter(std::ostream& out) : out_(out) {}

  void begin_object(std::string_view key = {}) { open(key, '{'); }
  void end_object() { close('}'); }
  void begin_array(std::string_view key = {}) { open(key, '['); }
  void end_array() { close(']'); }

  void field(std::string_view key, std::string_view value) {
    prefix(key);
    string(value);
  }
  void field(std::string_view key, const char* value) { field(key, std::string_view(value)); }
  void field(std::string_view key, bool value) {
    prefix(key);
    out_ << (value ? "true" : "false");
  }
  void field(std::string_view key, std::uint64_t value) {
    prefix(key);
    out_ << value;
  }
  void field(std::string_view key, std::int64_t value) {
    prefix(key);
    out_ << value;
  }
  void field(std::string_view key, double value) {
    prefix(key);
    if (!std::isfinite(value)) {
      out_ << "null";
      return;
    }
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf, value);
    out_ << std::string_view(buf, static_cast<std::size_t>(res.ptr - buf));
  }
  // An array element: the same calls with an empty key.
  template <class T>
  void value(T v) {
    field({}, v);
  }

  // Ends the document with a newline. Call after the outermost end_object().
  void finish() { out_ << '\n'; }

 private:
  void open(std::string_view key, char bracket) {
    prefix(key);
    out_ << bracket;
    first_.push_back(true);
  }
  void close(char bracket) {
    const bool empty = first_.back();
    first_.pop_back();
    if (!empty) newline();
    out_ << bracket;
  }
  // Separator, indentation and key for the next member (no key at top level or in an array).
  void prefix(std::string_view key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ << ',';
      first_.back() = false;
      newline();
    }
    if (!key.empty()) {
      string(key);
      out_ << ": ";
    }
  }
  void newline() {
    out_ << '\n';
    for (std::size_t i = 0; i < first_.size(); ++i) out_ << "  ";
  }
  void string(std::string_view s) {
    static constexpr char kHex[] = "0123456789abcdef";
    out_ << '"';
    for (const char c : s) {
      const auto u = static_cast<unsigned char>(c);
      switch (c) {
        case '"': out_ << "\\\""; break;
        case '\\': out_ << "\\\\"; break;
        case '\n': out_ << "\\n"; break;
        case '\r': out_ << "\\r"; break;
        case '\t': out_ << "\\t"; break;
        default:
          if (u < 0x20) {
            out_ << "\\u00" << kHex[u >> 4] << kHex[u & 0xf];
          } else {
            out_ << c;
          }
      }
    }
    out_ << '"';
  }

  std::ostream& out_;
  std::vector<bool> first_;  // per open container: no member written yet
};

// A parsed JSON value. Accessors of the wrong kind, and a missing key, throw std::runtime_error
// naming what was wanted, so a reader states its expectations by reading.
class JsonValue {
 public:
  enum class Kind { null, boolean, number, string, array, object };

  Kind kind() const noexcept { return kind_; }
  bool boolean() const;
  double number() const;
  const std::string& string() const;
  const std::vector<JsonValue>& array() const;
  // The member `key` of an object; throws if this is not an object or has no such member.
  const JsonValue& at(std::string_view key) const;
  // The member `key`, or nullptr if there is none (still throws if this is not an object).
  const JsonValue* find(std::string_view key) const;
  // Every member of an object, in document order; throws if this is not an object.
  const std::vector<std::pair<std::string, JsonValue>>& members() const;

 private:
  friend class JsonParser;
  Kind kind_ = Kind::null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<JsonValue> array_;
  std::vector<std::pair<std::string, JsonValue>> object_;
};

JsonValue parse_json(std::string_view text);

}  // namespace tickwheel::stress
