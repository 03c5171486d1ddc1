// How a process backend's worker lays out the tensors it hands its library
// (JobOptions::views; the op protocol's "views"). Each non-contiguous view
// holds the same values as the tensor, each row in a buffer twice as wide.
#pragma once

namespace collie {

enum class ViewLayout {
  kContiguous,
  kStrided,  // every other element of the row: wide[..., ::2] (stride(-1) is 2)
  kPitched,  // the row's first half: wide[..., :k] (stride(-1) is 1, rows 2k apart)
};

// "strided", "pitched"; "" for kContiguous.
constexpr const char* view_layout_name(ViewLayout v) {
  switch (v) {
    case ViewLayout::kStrided: return "strided";
    case ViewLayout::kPitched: return "pitched";
    case ViewLayout::kContiguous: break;
  }
  return "";
}

}  // namespace collie
