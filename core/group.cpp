#include "core/group.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "core/error.h"

namespace collie {

std::uint64_t group_digest(const std::vector<int>& sorted_ranks) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix(sorted_ranks.size());
  for (int r : sorted_ranks) mix(static_cast<std::uint64_t>(r));
  return h;
}

std::shared_ptr<const std::vector<int>> world_members(int world_size, std::uint64_t* digest) {
  // Interned per world size: a simulated job of n ranks holds one list of n
  // ranks, not n of them. Guarded because in-process TCP ranks are threads.
  static std::mutex mu;
  static std::map<int, std::pair<std::weak_ptr<const std::vector<int>>, std::uint64_t>> interned;
  std::lock_guard<std::mutex> lock(mu);
  auto& [weak, d] = interned[world_size];
  auto list = weak.lock();
  if (!list) {
    auto fresh = std::make_shared<std::vector<int>>(static_cast<std::size_t>(world_size));
    for (int i = 0; i < world_size; ++i) (*fresh)[static_cast<std::size_t>(i)] = i;
    d = group_digest(*fresh);
    list = std::move(fresh);
    weak = list;
  }
  *digest = d;
  return list;
}

std::shared_ptr<const GroupIdentity> world_identity(int world_size) {
  static std::mutex mu;
  static std::map<int, std::weak_ptr<const GroupIdentity>> interned;
  std::lock_guard<std::mutex> lock(mu);
  auto& weak = interned[world_size];
  auto id = weak.lock();
  if (!id) {
    auto fresh = std::make_shared<GroupIdentity>();
    fresh->name = "world";
    fresh->members = world_members(world_size, &fresh->digest);
    id = std::move(fresh);
    weak = id;
  }
  return id;
}

int Group::group_rank_of(int global_rank) const {
  const std::vector<int>& r = s_->ranks();
  auto it = std::lower_bound(r.begin(), r.end(), global_rank);
  return it != r.end() && *it == global_rank ? static_cast<int>(it - r.begin()) : -1;
}

std::vector<int> new_group_members(std::vector<int> ranks, int world_size, int caller_rank) {
  auto refuse = [&](const std::string& why) {
    throw Error(ErrorKind::kInvalidArgument, OpContext{caller_rank, "new_group", "world", -1, {}}, why);
  };
  if (ranks.empty()) refuse("a group needs at least one rank");
  for (int r : ranks)
    if (r < 0 || r >= world_size)
      refuse("rank " + std::to_string(r) + " is out of range for world size " + std::to_string(world_size));
  std::sort(ranks.begin(), ranks.end());
  if (auto dup = std::adjacent_find(ranks.begin(), ranks.end()); dup != ranks.end())
    refuse("rank " + std::to_string(*dup) + " is listed twice");
  return ranks;
}

void mark_group_destroyed(const Group& g, int caller_rank) {
  const std::string name = g.is_world_default() ? "world" : g.name();
  auto refuse = [&](const std::string& why) {
    throw Error(ErrorKind::kInvalidArgument, OpContext{caller_rank, "destroy_group", name, -1, {}}, why);
  };
  if (g.is_world_default() || g.state()->id == 0)
    refuse("the world cannot be destroyed as a group (torch's destroy_process_group() without a group ends the job)");
  if (g.state()->destroyed) refuse(name + " was destroyed already");
  g.state()->destroyed = true;
}

void check_group_alive(const Group& g, int caller_rank, std::string_view op) {
  if (g.is_world_default() || !g.state()->destroyed) return;
  throw Error(ErrorKind::kInvalidArgument, OpContext{caller_rank, std::string(op), g.name(), -1, {}},
              g.name() + " was destroyed (destroy_group); no op may use it after that");
}

std::string default_group_name(int id, const std::vector<int>& sorted_ranks) {
  std::string name = "group " + std::to_string(id) + " {";
  for (std::size_t i = 0; i < sorted_ranks.size(); ++i) name += (i ? "," : "") + std::to_string(sorted_ranks[i]);
  return name + "}";
}

std::shared_ptr<GroupState> world_group_state(int world_size, int rank) {
  auto w = std::make_shared<GroupState>();
  w->id = 0;
  w->members = world_members(world_size, &w->digest);
  w->my_rank = rank;
  w->name = "world";
  return w;
}

std::shared_ptr<GroupState> new_group_state(int id, std::vector<int> sorted_ranks, int rank, std::int64_t timeout_ns,
                                            std::string name) {
  auto g = std::make_shared<GroupState>();
  g->id = id;
  g->digest = group_digest(sorted_ranks);
  const auto at = std::find(sorted_ranks.begin(), sorted_ranks.end(), rank);
  g->my_rank = at == sorted_ranks.end() ? -1 : static_cast<int>(at - sorted_ranks.begin());
  g->name = name.empty() ? default_group_name(id, sorted_ranks) : std::move(name);
  g->members = std::make_shared<const std::vector<int>>(std::move(sorted_ranks));
  g->timeout_ns = timeout_ns;
  return g;
}

}  // namespace collie
