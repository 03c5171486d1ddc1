// The header's check words (core/frame_check.h): whatever one field of
// whatever kind of frame a transport changes, the receiving core names that
// field and the value the sender wrote; two changed fields are always
// caught. A transport that changed a tag, a context or a group digest on
// the way used to pass for a program error, or deliver to the wrong receive.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <string>

#include "core/frame_check.h"
#include "core/testing/random_header.h"

namespace collie {
namespace {

using testing::random_header;

struct Change {
  const char* name;
  std::string was;  // the sender's value as a number, as the report starts it
};

// XORs `e` (within the field's width) into field `f`, in the order
// core/frame_check.cpp covers them.
Change change(FrameHeader& h, int f, std::uint64_t e) {
  auto u8 = [e](auto& v) {
    using T = std::remove_reference_t<decltype(v)>;
    const auto was = static_cast<std::uint8_t>(v);
    v = static_cast<T>(static_cast<std::uint8_t>(was ^ (e & 0xff)));
    return std::to_string(was);
  };
  auto i32 = [e](std::int32_t& v) {
    const std::int32_t was = v;
    v = static_cast<std::int32_t>(static_cast<std::uint32_t>(v) ^ static_cast<std::uint32_t>(e));
    return std::to_string(was);
  };
  auto u32 = [e](std::uint32_t& v) {
    const std::uint32_t was = v;
    v ^= static_cast<std::uint32_t>(e);
    return std::to_string(was);
  };
  auto u64 = [e](std::uint64_t& v) {
    const std::uint64_t was = v;
    v ^= e;
    return std::to_string(was);
  };
  switch (f) {
    case 0: return {"kind", u8(h.kind)};
    case 1: return {"src", i32(h.src)};
    case 2: return {"dst", i32(h.dst)};
    case 3: return {"context", u32(h.context)};
    case 4: return {"group_digest", u64(h.group_digest)};
    case 5: return {"tag", i32(h.tag)};
    case 6: return {"channel_seq", u64(h.channel_seq)};
    case 7: return {"rendezvous_id", u64(h.rendezvous_id)};
    case 8: return {"dtype", u8(h.dtype)};
    case 9: return {"count", u64(h.count)};
    case 10: return {"bytes", u64(h.bytes)};
    case 11: return {"fingerprint.op", u8(h.fp.op)};
    case 12: return {"fingerprint.reduce_op", u8(h.fp.reduce_op)};
    case 13: return {"fingerprint.algorithm", u8(h.fp.algorithm)};
    case 14: return {"fingerprint.dtype", u8(h.fp.dtype)};
    case 15: return {"fingerprint.root", i32(h.fp.root)};
    case 16: return {"fingerprint.seq", u64(h.fp.seq)};
    default: return {"fingerprint.count", u64(h.fp.count)};
  }
}

constexpr int kWidth[kCheckedFields] = {8, 32, 32, 32, 64, 32, 64, 64, 8, 64, 64, 8, 8, 8, 8, 32, 64, 64};

// A change that fits field f: one flipped bit half the time, any bits else.
std::uint64_t change_for(int f) {
  const int width = kWidth[f];
  const std::uint64_t mask = width == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
  const std::uint64_t e = *rc::gen::oneOf(rc::gen::map(rc::gen::inRange(0, width), [](int b) { return std::uint64_t{1} << b; }),
                                          rc::gen::arbitrary<std::uint64_t>()) &
                          mask;
  return e ? e : 1;
}

RC_GTEST_PROP(FrameCheck, ASealedHeaderIsIntact, ()) {
  FrameHeader h = random_header();
  seal(h);
  RC_ASSERT(!inspect(h));
}

RC_GTEST_PROP(FrameCheck, OneChangedFieldOfAnyKindIsNamedWithWhatTheSenderWrote, ()) {
  FrameHeader h = random_header();
  seal(h);
  const int f = *rc::gen::inRange(0, kCheckedFields);
  const Change c = change(h, f, change_for(f));
  const auto d = inspect(h);
  RC_ASSERT(d.has_value());
  RC_ASSERT(d->field == f);
  RC_ASSERT(d->name == std::string(c.name));
  RC_ASSERT(d->was.rfind(c.was, 0) == 0);  // the number first, then its name for codes
  RC_ASSERT(d->was != d->is);
}

RC_GTEST_PROP(FrameCheck, TwoChangedFieldsAreAlwaysCaught, ()) {
  FrameHeader h = random_header();
  seal(h);
  const int f = *rc::gen::inRange(0, kCheckedFields);
  const int g = (f + *rc::gen::inRange(1, kCheckedFields)) % kCheckedFields;
  change(h, f, change_for(f));
  change(h, g, change_for(g));
  RC_ASSERT(inspect(h).has_value());
}

RC_GTEST_PROP(FrameCheck, ChangedCheckWordsAreCaughtWithoutBlamingAField, ()) {
  FrameHeader h = random_header();
  seal(h);
  const std::uint64_t e = *rc::gen::suchThat<std::uint64_t>([](std::uint64_t x) { return x != 0; });
  if (*rc::gen::arbitrary<bool>()) h.check.sum ^= e;
  else h.check.weighted ^= e;
  const auto d = inspect(h);
  RC_ASSERT(d.has_value());
  // A change of `sum` alone looks like no single field's (its x^k multiple
  // is not 0), and one of `weighted` alone like none at all.
  RC_ASSERT(d->field == -1);
}

TEST(FrameCheck, EchoMismatchNamesTheFirstFieldThatDiffersFromTheRts) {
  FrameHeader rts;
  rts.kind = FrameKind::kRts;
  rts.src = 1;
  rts.dst = 0;
  rts.tag = 5;
  rts.rendezvous_id = 9;
  rts.count = 100;
  FrameHeader cts = rts;
  cts.kind = FrameKind::kCts;
  std::swap(cts.src, cts.dst);
  EXPECT_FALSE(echo_mismatch(cts, rts));
  cts.tag = 7;
  EXPECT_EQ(echo_mismatch(cts, rts).value_or(""), "tag is 7 but the RTS's is 5");
  FrameHeader nack = cts;
  nack.kind = FrameKind::kNack;  // a NACK's tag says why it refuses
  EXPECT_FALSE(echo_mismatch(nack, rts));
  cts.tag = 5;
  cts.count = 101;
  EXPECT_EQ(echo_mismatch(cts, rts).value_or(""), "count is 101 but the RTS's is 100");
}

}  // namespace
}  // namespace collie
