// What the core checks of a frame's header beyond what a transport may
// legitimately change (nothing): its check words, and the fields the
// rendezvous protocol implies.
//
// Check words (FrameHeader::check). The sender's core seals every frame as
// it leaves; the receiver's core inspects it on arrival. The words are a
// single-error-correcting code over GF(2^64) on the header's 18 values
// (the fingerprint's seven members counted one by one): `sum` is their XOR,
// `weighted` their polynomial in x (Horner's rule, value 0 first). A
// transport that changes one value by XOR e changes `sum` by e and
// `weighted` by x^k * e, where k is that value's place -- distinct for
// every place -- so the core names the field and what the sender wrote.
// Changes to more than one value, or to the words themselves, are caught
// without a name.
//
// Echoes. A CTS, a NACK and a rendezvous data frame answer an RTS and carry
// its context, group_digest, channel_seq, rendezvous_id, dtype, count and
// fingerprint unchanged, and its tag (a NACK's tag is the ErrorKind of the
// refusal instead); echo_mismatch() names the first field that differs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/frame.h"

namespace collie {

// Writes h.check from every other field.
void seal(FrameHeader& h);

struct HeaderDamage {
  int field = -1;       // which value changed: 0 .. kCheckedFields - 1; -1: not one alone
  std::string name;     // "tag", "fingerprint.seq", ...
  std::string is, was;  // the frame's value and the sender's, as text
};
inline constexpr int kCheckedFields = 18;

// Empty when h.check matches h's fields; else what changed.
std::optional<HeaderDamage> inspect(const FrameHeader& h);

// A frame whose header's enumerations hold values no sender writes (a
// kind, dtype, collective or reduce op code out of range): which field, or
// empty. What is read of such a header before this check is integers.
std::optional<std::string> out_of_range_field(const FrameHeader& h);

// The first member in which `fp` differs from the empty fingerprint, as
// "fingerprint.seq is 1", or empty.
std::optional<std::string> fingerprint_difference(const Fingerprint& fp);

// `answer` (CTS, NACK or data) against the `rts` it answers: the first
// echoed field that differs, as "tag is 7 but the RTS's is 5", or empty.
std::optional<std::string> echo_mismatch(const FrameHeader& answer, const FrameHeader& rts);

}  // namespace collie
