// AscendingMap: a map whose keys are inserted in increasing order (ids
// handed out by a counter), kept as one vector of (key, value) sorted by
// key.
//
// Guarantees: find() is a binary search; iteration runs in key order (the
// order of insertion); erase() keeps that order. insert_last() requires a
// key above every key present (checked: throws std::logic_error otherwise).
//
// Why: the message engine's pending sends are few per rank (one or two in
// a butterfly) and looked up on every CTS and send completion; a node-based
// hash map cost a bucket array and a node per send, each a cache miss when
// a simulation holds every rank's engine at once. Here a rank's pending
// sends are one small array. Erasing from the middle moves the later
// entries (O(n)); the keys present at once are expected to be few.
#pragma once

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace collie {

template <typename T>
class AscendingMap {
 public:
  using value_type = std::pair<std::uint64_t, T>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  // Adds `key` with a default value and returns the value.
  T& insert_last(std::uint64_t key) {
    if (!items_.empty() && items_.back().first >= key)
      throw std::logic_error("AscendingMap: key " + std::to_string(key) + " is not above the last key " +
                             std::to_string(items_.back().first));
    return items_.emplace_back(key, T{}).second;
  }
  iterator find(std::uint64_t key) {
    auto it = lower(key);
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  const_iterator find(std::uint64_t key) const {
    auto it = std::lower_bound(items_.begin(), items_.end(), key,
                               [](const value_type& v, std::uint64_t k) { return v.first < k; });
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  iterator erase(iterator it) { return items_.erase(it); }
  void clear() { items_.clear(); }
  bool empty() const { return items_.empty(); }
  std::size_t size() const { return items_.size(); }

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }

 private:
  iterator lower(std::uint64_t key) {
    return std::lower_bound(items_.begin(), items_.end(), key,
                            [](const value_type& v, std::uint64_t k) { return v.first < k; });
  }
  std::vector<value_type> items_;
};

}  // namespace collie
