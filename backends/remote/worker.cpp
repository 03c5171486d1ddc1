#include "backends/remote/worker.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>

#include "backends/remote/op_protocol.h"
#include "core/error.h"

namespace collie::remote {

namespace {

using json = nlohmann::json;

// An op this rank was asked to run: its own copies of the buffers.
struct Op {
  std::string name;
  Work work;
  std::vector<Tensor> tensors;
  int list = 0;
  int peer = -1;
  std::vector<std::size_t> out_splits, in_splits;  // all_to_all_single
};

[[noreturn]] void protocol_error(const std::string& what) { throw std::runtime_error("the controller sent " + what); }

std::vector<int> outputs_of(const Op& op, int rank) {
  const std::string& n = op.name;
  if (n == "recv" || n == "irecv" || n == "broadcast" || n == "reduce" || n == "all_reduce" || n == "scatter")
    return {0};
  if (n == "all_gather_into_tensor" || n == "reduce_scatter_tensor" || n == "all_to_all_single") return {1};
  if (n == "reduce_scatter") return {0};
  if (n == "all_to_all") {
    std::vector<int> out;
    for (int k = 0; k < op.list; ++k) out.push_back(k);
    return out;
  }
  if (n == "all_gather" || (n == "gather" && op.peer == rank)) {
    std::vector<int> out;
    for (int k = 1; k <= op.list; ++k) out.push_back(k);
    return out;
  }
  return {};
}

class Server {
 public:
  Server(Dist& dist, int fd, const WorkerHooks& hooks) : d_(dist), fd_(fd), hooks_(hooks) {}

  int serve() {
    MessageReader reader;
    for (;;) {
      Message m = read_message(fd_, reader);
      const std::string t = m.head.value("t", "");
      if (t == "end") return 0;
      if (t == "begin") {
        begin(m.head);
      } else if (t == "group") {
        const auto ranks = m.head.at("ranks").get<std::vector<int>>();
        const Nanos timeout = m.head.value("timeout_ms", std::int64_t{0}) * 1'000'000;
        const int id = m.head.at("group").get<int>();
        try {
          groups_[id] = make_group(ranks, timeout, m.head.value("name", ""));
        } catch (const std::exception& e) {
          group_errors_[id] = e.what();
        }
      } else if (t == "op") {
        op(std::move(m));
      } else if (t == "wait") {
        const auto id = m.head.at("id").get<std::uint64_t>();
        auto it = async_.find(id);
        if (it == async_.end()) protocol_error("a wait for op " + std::to_string(id) + ", which is not in flight");
        Op o = std::move(it->second);
        async_.erase(it);
        complete(id, o);
      } else if (t == "sync") {
        write_message(fd_, json{{"t", "synced"}, {"id", m.head.value("id", std::uint64_t{0})}});
      } else if (t == "bench") {
        bench(m.head);
      } else {
        protocol_error("a message of type '" + t + "'");
      }
    }
  }

 private:
  // Named as the controller names it ("world" for a run's base group).
  Group make_group(const std::vector<int>& ranks, Nanos timeout, const std::string& name) {
    return d_.new_group(ranks, timeout, name);
  }

  void begin(const json& head) {
    if (hooks_.begin_run) hooks_.begin_run();
    groups_.clear();
    group_errors_.clear();
    async_.clear();
    timeout_ns_ = head.value("timeout_ms", std::int64_t{0}) * 1'000'000;
    std::vector<int> all;
    for (int r = 0; r < d_.world_size(); ++r) all.push_back(r);
    try {
      groups_[0] = make_group(all, timeout_ns_, "world");
    } catch (const std::exception& e) {
      group_errors_[0] = e.what();
    }
  }

  void reply_error(std::uint64_t id, const std::exception_ptr& e) {
    json h{{"t", "failed"}, {"id", id}};
    try {
      std::rethrow_exception(e);
    } catch (const Error& x) {
      h["kind"] = std::string(error_kind_name(x.kind()));
      h["error"] = x.detail();
      const OpContext& c = x.context();
      h["context"] = json{{"rank", c.rank}, {"op", c.op}, {"group", c.group}, {"seq", c.seq}, {"peers", c.peers}};
    } catch (const std::exception& x) {
      h["kind"] = "library";
      h["error"] = x.what();
    } catch (...) {
      h["kind"] = "library";
      h["error"] = "a non-standard exception";
    }
    write_message(fd_, h);
  }

  void complete(std::uint64_t id, Op& o) {
    try {
      o.work.wait();
    } catch (...) {
      reply_error(id, std::current_exception());
      return;
    }
    json h{{"t", "done"}, {"id", id}, {"source", o.work.source_rank()}, {"not_member", o.work.not_member()}};
    std::vector<std::span<const std::byte>> blobs;
    json outs = json::array();
    if (!o.work.not_member())
      for (int k : outputs_of(o, d_.rank())) {
        if (k >= static_cast<int>(o.tensors.size())) continue;
        outs.push_back(k);
        blobs.push_back(o.tensors[static_cast<std::size_t>(k)].byte_span());
      }
    h["outputs"] = std::move(outs);
    write_message(fd_, h, blobs);
  }

  void op(Message m) {
    const json& h = m.head;
    const auto id = h.at("id").get<std::uint64_t>();
    Op o;
    o.name = h.at("op").get<std::string>();
    o.list = h.value("list", 0);
    o.peer = h.value("peer", -1);
    const bool async = h.value("async", false);
    const auto& ts = h.at("tensors");
    if (ts.size() != m.blobs.size()) protocol_error("an op whose tensors and buffers differ in number");
    for (std::size_t k = 0; k < ts.size(); ++k) {
      const auto dt = parse_dtype(ts[k].at("dtype").get<std::string>());
      if (!dt) protocol_error("an unknown dtype");
      const auto count = ts[k].at("count").get<std::int64_t>();
      Tensor t(*dt, {count});
      if (t.bytes() != m.blobs[k].size()) protocol_error("a buffer whose size is not its tensor's");
      if (t.bytes()) std::memcpy(t.data(), m.blobs[k].data(), t.bytes());
      o.tensors.push_back(std::move(t));
    }
    try {
      o.work = issue(h, o);
    } catch (...) {
      reply_error(id, std::current_exception());
      return;
    }
    if (async) {
      async_.emplace(id, std::move(o));
      return;
    }
    complete(id, o);
  }

  Work issue(const json& h, Op& o) {
    const int gid = h.value("group", 0);
    if (auto e = group_errors_.find(gid); e != group_errors_.end())
      throw Error(ErrorKind::kInvalidArgument, OpContext{d_.rank(), o.name, "", -1, {}},
                  "its group could not be created: " + e->second);
    auto g = groups_.find(gid);
    if (g == groups_.end()) protocol_error("an op on group " + std::to_string(gid) + ", which does not exist");
    const Group& group = g->second;
    const std::string& n = o.name;
    const int tag = h.value("tag", 0);
    const int peer = h.value("any_source", false) ? kAnySource : h.value("peer", -1);
    CollectiveOptions co;
    co.async_op = h.value("async", false);
    co.timeout_ns = h.value("timeout_ms", std::int64_t{0}) * 1'000'000;
    if (h.contains("algorithm")) {
      const auto a = parse_algorithm(h["algorithm"].get<std::string>());
      if (!a) protocol_error("an unknown algorithm");
      co.algorithm = *a;
    }
    auto t = [&](std::size_t k) -> TensorView {
      if (k >= o.tensors.size()) protocol_error("an op with too few tensors");
      return o.tensors[k].view();
    };
    std::vector<TensorView> list;
    for (int k = 1; k <= o.list && static_cast<std::size_t>(k) < o.tensors.size(); ++k)
      list.push_back(o.tensors[static_cast<std::size_t>(k)].view());
    std::optional<ReduceOp> rop;
    if (h.contains("reduce_op")) {
      rop = parse_reduce_op(h["reduce_op"].get<std::string>());
      if (!rop) protocol_error("an unknown reduce op");
    }
    if (n == "send") return d_.send(t(0), peer, tag, group);
    if (n == "isend") return d_.isend(t(0), peer, tag, group);
    if (n == "recv") return d_.recv(t(0), peer, tag, group);
    if (n == "irecv") return d_.irecv(t(0), peer, tag, group);
    if (n == "broadcast") return d_.broadcast(t(0), peer, group, co);
    if (n == "reduce") return d_.reduce(t(0), peer, rop.value_or(ReduceOp::kSum), group, co);
    if (n == "all_reduce") return d_.all_reduce(t(0), rop.value_or(ReduceOp::kSum), group, co);
    if (n == "scatter") return d_.scatter(t(0), peer, list, group, co);
    if (n == "gather") return d_.gather(t(0), peer, list, group, co);
    if (n == "all_gather") return d_.all_gather(list, t(0), group, co);
    if (n == "all_gather_into_tensor") return d_.all_gather_into_tensor(t(1), t(0), group, co);
    if (n == "reduce_scatter") return d_.reduce_scatter(t(0), list, rop.value_or(ReduceOp::kSum), group, co);
    if (n == "reduce_scatter_tensor")
      return d_.reduce_scatter_tensor(t(1), t(0), rop.value_or(ReduceOp::kSum), group, co);
    if (n == "all_to_all") {
      // tensors: the output list, then the input list.
      if (o.tensors.size() != 2 * static_cast<std::size_t>(o.list)) protocol_error("an all_to_all with odd lists");
      std::vector<TensorView> out, in;
      for (int k = 0; k < o.list; ++k) out.push_back(t(static_cast<std::size_t>(k)));
      for (int k = 0; k < o.list; ++k) in.push_back(t(static_cast<std::size_t>(o.list + k)));
      return d_.all_to_all(out, in, group, co);
    }
    if (n == "all_to_all_single") {
      o.out_splits = h.value("output_split_sizes", std::vector<std::size_t>{});
      o.in_splits = h.value("input_split_sizes", std::vector<std::size_t>{});
      return d_.all_to_all_single(t(1), t(0), o.out_splits, o.in_splits, group, co);
    }
    if (n == "barrier") return d_.barrier(group, co);
    protocol_error("an unknown op '" + n + "'");
  }

  void bench(const json& h) {
    if (!hooks_.bench) {
      write_message(fd_, json{{"t", "bench_failed"}, {"error", "this worker has no bench"}});
      return;
    }
    try {
      json rows = hooks_.bench(d_, h.value("options", json::object()));
      write_message(fd_, json{{"t", "bench_rows"}, {"rows", std::move(rows)}});
    } catch (const std::exception& e) {
      write_message(fd_, json{{"t", "bench_failed"}, {"error", e.what()}});
    }
  }

  Dist& d_;
  int fd_;
  const WorkerHooks& hooks_;
  std::map<int, Group> groups_;
  std::map<int, std::string> group_errors_;
  std::map<std::uint64_t, Op> async_;
  Nanos timeout_ns_ = 0;
};

}  // namespace

int serve_ops(Dist& dist, const std::string& library, const WorkerHooks& hooks) {
  const char* controller = std::getenv("COLLIE_CONTROLLER");
  if (!controller || !*controller) {
    std::cerr << "collie worker: COLLIE_CONTROLLER is not set (a worker is started by collie, not by hand)\n";
    return 2;
  }
  const char* token = std::getenv("COLLIE_JOB_TOKEN");
  int fd = -1;
  try {
    fd = connect_to(controller);
    MessageReader reader(kMaxUnauthenticatedBytes, 0);
    const Message challenge = read_message(fd, reader);
    const std::string nonce = challenge.head.value("nonce", "");
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    write_message(fd, json{{"t", "hello"},
                           {"rank", dist.rank()},
                           {"world", dist.world_size()},
                           {"pid", static_cast<int>(::getpid())},
                           {"host", host},
                           {"library", library},
                           {"mac", hello_mac(token ? token : "", nonce, dist.rank())}});
    Server server(dist, fd, hooks);
    const int rc = server.serve();
    ::close(fd);
    return rc;
  } catch (const std::exception& e) {
    std::cerr << "collie worker (rank " << dist.rank() << "): " << e.what() << "\n";
    if (fd >= 0) ::close(fd);
    return 1;
  }
}

}  // namespace collie::remote
