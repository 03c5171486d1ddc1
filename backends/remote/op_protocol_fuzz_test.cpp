// Fuzzing the op protocol's framing (built with AddressSanitizer and
// UndefinedBehaviorSanitizer, see cmake/FuzzTests.cmake): a stream of
// messages cut into random chunks gives back exactly those messages; a
// mutated stream gives messages or a std::runtime_error -- never another
// exception, a read out of bounds, or an allocation beyond the reader's
// limits (the fuzz test runs with ASan's allocation cap).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstddef>
#include <vector>

#include "backends/remote/op_protocol.h"

namespace collie::remote {
namespace {

constexpr std::size_t kMaxHeader = 4096;
constexpr std::size_t kMaxMessage = 1 << 20;

struct Sent {
  nlohmann::json head;
  std::vector<std::vector<std::byte>> blobs;
};

Sent gen_message() {
  Sent m;
  m.head["t"] = *rc::gen::element<std::string>("op", "done", "failed", "hello", "begin", "\xff\xfe");
  m.head["id"] = *rc::gen::inRange(0, 1 << 20);
  if (*rc::gen::arbitrary<bool>()) m.head["tensors"] = nlohmann::json::array({{{"dtype", "float32"}, {"count", 3}}});
  for (int k = *rc::gen::inRange(0, 4); k > 0; --k) {
    std::vector<std::byte> b(*rc::gen::element<std::size_t>(0, 1, 7, 1000, 70000));
    for (std::size_t i = 0; i < b.size(); i += 97) b[i] = static_cast<std::byte>(i);
    m.blobs.push_back(std::move(b));
  }
  return m;
}

std::vector<std::byte> stream_of(const std::vector<Sent>& msgs) {
  std::vector<std::byte> out;
  for (const Sent& m : msgs) {
    std::vector<std::span<const std::byte>> spans(m.blobs.begin(), m.blobs.end());
    const auto e = encode(m.head, spans);
    out.insert(out.end(), e.begin(), e.end());
  }
  return out;
}

// Feeds `stream` in random chunks; every complete message, until an error.
std::vector<Message> read_all(const std::vector<std::byte>& stream, std::string* error) {
  MessageReader reader(kMaxHeader, kMaxMessage);
  std::vector<Message> got;
  std::size_t at = 0;
  try {
    while (at < stream.size()) {
      const std::size_t n = std::min(stream.size() - at, *rc::gen::element<std::size_t>(1, 3, 4, 100, 5000, 1 << 20));
      reader.feed(stream.data() + at, n);
      at += n;
      while (auto m = reader.next()) got.push_back(std::move(*m));
    }
  } catch (const std::runtime_error& e) {
    *error = e.what();
  }
  return got;
}

RC_GTEST_PROP(OpProtocolFuzz, ChunkedStreamsGiveBackEveryMessage, ()) {
  std::vector<Sent> msgs;
  for (int k = *rc::gen::inRange(1, 6); k > 0; --k) msgs.push_back(gen_message());
  std::string error;
  const auto got = read_all(stream_of(msgs), &error);
  RC_ASSERT(error.empty());
  RC_ASSERT(got.size() == msgs.size());
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    RC_ASSERT(got[i].head["id"] == msgs[i].head["id"]);
    RC_ASSERT(got[i].blobs == msgs[i].blobs);
  }
}

RC_GTEST_PROP(OpProtocolFuzz, MutatedStreamsGiveMessagesOrAnError, ()) {
  std::vector<Sent> msgs;
  for (int k = *rc::gen::inRange(1, 4); k > 0; --k) msgs.push_back(gen_message());
  std::vector<std::byte> stream = stream_of(msgs);
  for (int k = *rc::gen::inRange(1, 5); k > 0; --k) {
    const std::size_t at = *rc::gen::inRange<std::size_t>(0, stream.size());
    switch (*rc::gen::inRange(0, 4)) {
      case 0: stream[at] = static_cast<std::byte>(*rc::gen::arbitrary<std::uint8_t>()); break;
      case 1: stream[at] ^= std::byte{0x80}; break;
      case 2: stream.erase(stream.begin() + static_cast<long>(at)); break;
      default: {  // a length field that lies
        const std::uint32_t v = *rc::gen::element<std::uint32_t>(0, 1, kMaxHeader, kMaxHeader + 1, 0xffffffffu);
        for (int b = 0; b < 4 && at + static_cast<std::size_t>(b) < stream.size(); ++b)
          stream[at + static_cast<std::size_t>(b)] = static_cast<std::byte>(v >> (8 * b));
      }
    }
  }
  std::string error;
  const auto got = read_all(stream, &error);
  for (const Message& m : got) {
    RC_ASSERT(m.head.is_object());
    std::size_t total = 0;
    for (const auto& b : m.blobs) total += b.size();
    RC_ASSERT(total <= kMaxMessage);
  }
}

}  // namespace
}  // namespace collie::remote
