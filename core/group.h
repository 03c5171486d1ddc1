// Process groups.
//
// A Group is a cheap handle to a sorted list of global ranks, as seen by one
// rank. The group rank of a member is its index in that list. Each group owns
// two contexts (one for point-to-point, one for collectives), so no message of
// one group can ever match a receive of another. Contexts are allocated by
// counting new_group() calls, which is why every rank of the world must call
// new_group() for every group, in the same order, member or not (as in torch).
// The membership digest travels in every frame, so ranks that disagree on a
// group get a group_mismatch error rather than silently mixing traffic.
//
// A default-constructed Group means "the world" wherever an op takes one.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace collie {

// The source of a receive from any rank (recv/irecv); Work::source_rank()
// says who sent.
inline constexpr int kAnySource = -1;

struct GroupState {
  int id = 0;                   // 0 is the world; k is the k-th new_group()
  // Sorted global ranks, immutable and shared: every communicator of one
  // process with the same world size shares one world list, and collective
  // calls hold it without copying (memory stays O(ranks) at any scale).
  std::shared_ptr<const std::vector<int>> members;
  int my_rank = -1;             // the owner's group rank, -1 if not a member
  std::uint32_t p2p_context = 0;
  std::uint32_t coll_context = 0;
  std::uint64_t digest = 0;
  std::uint64_t coll_seq = 0;   // collectives issued so far
  std::uint64_t p2p_seq = 0;    // point-to-point ops issued so far
  std::string name;             // "world" or "group 1 {0,1}"
  std::int64_t timeout_ns = 0;  // ops on this group time out after this; 0: the communicator's
  // destroy_group() was called: no op may use the group again (every copy of
  // its handle shares this state). Its id and contexts are never reused.
  bool destroyed = false;

  const std::vector<int>& ranks() const { return *members; }
};

class Group {
 public:
  Group() = default;  // the world
  explicit Group(std::shared_ptr<GroupState> s) : s_(std::move(s)) {}

  bool is_world_default() const { return !s_; }
  // Only valid on a resolved group (one returned by new_group() or world()).
  int size() const { return static_cast<int>(s_->ranks().size()); }
  int rank() const { return s_->my_rank; }  // -1 for a non-member
  bool is_member() const { return s_->my_rank >= 0; }
  const std::vector<int>& ranks() const { return s_->ranks(); }
  const std::string& name() const { return s_->name; }
  // Group rank of a global rank, -1 if it is not a member.
  int group_rank_of(int global_rank) const;
  // Global rank of a group rank; requires 0 <= group_rank < size().
  int global_rank_of(int group_rank) const { return s_->ranks()[static_cast<std::size_t>(group_rank)]; }

  GroupState* state() const { return s_.get(); }

 private:
  std::shared_ptr<GroupState> s_;
};

// Order-sensitive FNV-1a over the sorted member list.
std::uint64_t group_digest(const std::vector<int>& sorted_ranks);

// The one rule every Dist applies to new_group(ranks): at least one rank,
// each in [0, world_size), none twice, in any order. Returns them sorted;
// throws Error(kInvalidArgument) from `caller_rank`'s new_group naming the
// rule broken ("rank 5 is out of range for world size 4").
std::vector<int> new_group_members(std::vector<int> ranks, int world_size, int caller_rank);
// The one rule every Dist applies to destroy_group(g): g is a group that
// new_group() made -- not the world, not a default handle -- and not
// destroyed already. Marks it destroyed; throws Error(kInvalidArgument) from
// `caller_rank`'s destroy_group naming the rule broken.
void mark_group_destroyed(const Group& g, int caller_rank);
// Throws Error(kInvalidArgument) from `caller_rank`'s `op` on g if g was
// destroyed ("group 'pair' was destroyed (destroy_group); ...").
void check_group_alive(const Group& g, int caller_rank, std::string_view op);

// How errors and reports name a group created without a name: "group 2 {0,3}"
// (`id`: the group's number in creation order, the world being 0).
std::string default_group_name(int id, const std::vector<int>& sorted_ranks);

// The world's member list {0, ..., world_size-1}, shared by every caller
// with the same size, and its digest (stored in *digest). Thread-safe.
std::shared_ptr<const std::vector<int>> world_members(int world_size, std::uint64_t* digest);

// What a group is, as frames are checked against it: the same for every
// rank that made the group, so it can be shared by them (the world's is,
// by every rank of a process with that world size: world_identity()).
struct GroupIdentity {
  std::uint64_t digest = 0;
  std::string name;  // as GroupState::name
  std::shared_ptr<const std::vector<int>> members;  // sorted global ranks
};
// The world of `world_size` ranks ("world", world_members()), one per world
// size for the whole process. Thread-safe.
std::shared_ptr<const GroupIdentity> world_identity(int world_size);

// The state of a group as a Dist over a library keeps it (no contexts):
// the world (id 0, "world") of `world_size` ranks seen from `rank`, and
// group `id` of `sorted_ranks` (new_group_members()'s result) named `name`
// or default_group_name().
std::shared_ptr<GroupState> world_group_state(int world_size, int rank);
std::shared_ptr<GroupState> new_group_state(int id, std::vector<int> sorted_ranks, int rank, std::int64_t timeout_ns,
                                            std::string name);

}  // namespace collie
