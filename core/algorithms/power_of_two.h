// Folding an arbitrary group size onto a power of two, as MPICH's
// recursive-doubling and Rabenseifner algorithms do: with p the largest
// power of two <= n and rem = n - p, ranks 0..2*rem-1 pair up (2i, 2i+1); the
// even one hands its data to the odd one and sits out, the odd one takes new
// rank i. Ranks >= 2*rem take new rank r - rem.
#pragma once

namespace collie::algorithms {

struct Fold {
  enum Role { kNone, kSender, kReceiver };
  int pof2 = 1;
  int rem = 0;
  Role role = kNone;   // kSender: sits out; kReceiver: absorbs the partner
  int partner = -1;    // group rank of the pair's other member
  int new_rank = -1;   // rank among the p participants, -1 when sitting out
  // Group rank of the participant with new rank v.
  int real_rank(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
};

inline Fold fold_to_power_of_two(int n, int r) {
  Fold f;
  while (f.pof2 * 2 <= n) f.pof2 *= 2;
  f.rem = n - f.pof2;
  if (r < 2 * f.rem) {
    if (r % 2 == 0) {
      f.role = Fold::kSender;
      f.partner = r + 1;
    } else {
      f.role = Fold::kReceiver;
      f.partner = r - 1;
      f.new_rank = r / 2;
    }
  } else {
    f.new_rank = r - f.rem;
  }
  return f;
}

}  // namespace collie::algorithms
