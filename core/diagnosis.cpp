#include "core/diagnosis.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace collie {

namespace {

std::string op_text(const std::shared_ptr<const OpInfo>& info) {
  if (!info) return "an internal op";
  std::string s = info->op;
  if (info->seq >= 0) s += " #" + std::to_string(info->seq);
  s += " on " + info->group;
  if (info->step_phase) s += ", step '" + info->step() + "'";
  return s;
}

std::string wait_text(const MessageEngine::Wait& w) {
  std::ostringstream os;
  if (w.is_send) {
    os << "waits for rank " << w.peer << " to post a matching receive (rendezvous send, tag " << w.tag << ", "
       << describe_elements(w.dtype, w.count) << ")";
  } else {
    os << "waits for a message from "
       << (w.peer == kAnySource ? std::string("any rank") : "rank " + std::to_string(w.peer)) << " (tag " << w.tag
       << ", " << describe_elements(w.dtype, w.count) << ")";
  }
  os << " since t=" << w.since << "ns";
  return os.str();
}

// The collective a wait belongs to, as "all_reduce #3 on world", or "".
std::string collective_of(const MessageEngine::Wait& w) {
  if (!w.info || w.info->fp.op == CollectiveKind::kNone) return "";
  return w.info->op + " #" + std::to_string(w.info->seq) + " on " + w.info->group;
}

bool frame_explains(const InjectedFault& f, int r, const MessageEngine::Wait& w) {
  if (f.kind != InjectedFault::Kind::kLostFrame) return false;
  const FrameHeader& h = f.header;
  if (h.context != w.context || h.fp.seq != w.seq) return false;
  if (!w.is_send) {
    // A lost message, rendezvous request or rendezvous data from the peer.
    return f.src == (w.peer == kAnySource ? f.src : w.peer) && f.dst == r && h.tag == w.tag &&
           (h.kind == FrameKind::kEager || h.kind == FrameKind::kRts || h.kind == FrameKind::kData);
  }
  // A rendezvous send: its request to the peer, or the peer's clear-to-send, was lost.
  return (f.src == r && f.dst == w.peer && h.kind == FrameKind::kRts && h.tag == w.tag) ||
         (f.src == w.peer && f.dst == r && h.kind == FrameKind::kCts && h.tag == w.tag);
}

}  // namespace

Diagnosis diagnose(const DiagnosisInput& in) {
  Diagnosis d;
  const int n = static_cast<int>(in.ranks.size());
  std::ostringstream os;
  for (int r = 0; r < n; ++r)
    if (!in.ranks[static_cast<std::size_t>(r)].finished) d.blocked.push_back(r);
  std::set<int> crashed;
  for (int r = 0; r < n; ++r)
    if (in.ranks[static_cast<std::size_t>(r)].crashed) crashed.insert(r);

  os << "deadlock: at t=" << in.now << "ns nothing can move and " << d.blocked.size() << " of " << n
     << " ranks are blocked" << (in.label.empty() ? "" : " (" + in.label + ")") << "\n";

  // Per blocked rank: what it waits for.
  os << "blocked ranks:\n";
  std::map<int, std::set<int>> edges;  // r -> peers it waits for
  for (int r : d.blocked) {
    const RankSnapshot& s = in.ranks[static_cast<std::size_t>(r)];
    if (s.crashed) {
      os << "  rank " << r << ": crashed\n";
      continue;
    }
    if (s.waits.empty() && !s.owed.empty()) {
      os << "  rank " << r << ": waits for its transport to complete a send: " << s.owed.front()
         << (s.owed.size() > 1 ? " (and " + std::to_string(s.owed.size() - 1) + " more)" : std::string()) << "\n";
      continue;
    }
    if (s.waits.empty()) {
      os << "  rank " << r << ": blocked outside any communication (waiting on something else)\n";
      continue;
    }
    os << "  rank " << r << ":\n";
    for (const auto& w : s.waits) {
      os << "    " << op_text(w.info) << ": " << wait_text(w) << "\n";
      if (w.peer != kAnySource) edges[r].insert(w.peer);
    }
  }

  // Root causes.
  std::set<std::string> causes;
  auto blocked_in = [&](int p) -> std::string {
    const RankSnapshot& s = in.ranks[static_cast<std::size_t>(p)];
    if (s.waits.empty()) return "blocked outside any communication";
    return "blocked in " + op_text(s.waits.front().info);
  };
  for (int r : d.blocked) {
    const RankSnapshot& s = in.ranks[static_cast<std::size_t>(r)];
    if (s.crashed) continue;
    for (const auto& w : s.waits) {
      bool explained = false;
      for (const InjectedFault& f : in.faults) {
        if (frame_explains(f, r, w)) {
          causes.insert(f.text + "; rank " + std::to_string(r) + " still waits for it in " + op_text(w.info));
          explained = true;
        }
      }
      if (explained || w.peer == kAnySource) continue;
      const RankSnapshot& p = in.ranks[static_cast<std::size_t>(w.peer)];
      const std::string coll = collective_of(w);
      if (p.crashed) {
        std::string when;
        for (const InjectedFault& f : in.faults)
          if (f.kind == InjectedFault::Kind::kCrash && f.src == w.peer) when = f.text;
        causes.insert("rank " + std::to_string(w.peer) + " crashed" + (when.empty() ? "" : " (" + when + ")") +
                      "; rank " + std::to_string(r) + " waits for it in " + op_text(w.info));
        continue;
      }
      if (p.finished) {
        if (!coll.empty()) {
          causes.insert("rank " + std::to_string(w.peer) + " " +
                        (p.error.empty() ? std::string("finished") : "failed (" + p.error + ")") +
                        " without taking part in " + coll + ", which rank " + std::to_string(r) + " waits in");
        } else {
          std::string hint;
          for (const auto& u : s.unmatched)
            if (u.header.src == w.peer && u.header.context == w.context && u.header.fp.seq == w.seq)
              hint = " (it did send tag " + std::to_string(u.header.tag) + " here, which nobody received: a tag mismatch?)";
          causes.insert("rank " + std::to_string(w.peer) + " " +
                        (p.error.empty() ? std::string("finished") : "failed (" + p.error + ")") + " without " +
                        (w.is_send ? "receiving" : "sending") + " what rank " + std::to_string(r) + " waits for in " +
                        op_text(w.info) + hint);
        }
        continue;
      }
      if (!coll.empty()) {
        bool in_it = false;
        for (const auto& c : p.collectives) in_it = in_it || (c.context == w.context && c.fp.seq == w.seq);
        if (!in_it)
          causes.insert("rank " + std::to_string(w.peer) + " never called " + coll + ": it is " + blocked_in(w.peer) +
                        "; rank " + std::to_string(r) + " waits for it");
      }
    }
  }

  // Completions a transport owes when nothing can move will never come
  // (the first three named).
  std::size_t owed = 0;
  for (int r = 0; r < n; ++r)
    for (const std::string& o : in.ranks[static_cast<std::size_t>(r)].owed)
      if (++owed <= 3)
        causes.insert("the transport never completed " + o +
                      " (no on_send_complete(); core/transport.h: every send posted with a cookie is completed "
                      "exactly once)");
  if (owed > 3) causes.insert("the transport never completed " + std::to_string(owed - 3) + " more sends");

  // Waits on a rank that is itself stuck behind a crash, a finished rank or
  // a lost message: say so, following the chain.
  for (int r : d.blocked) {
    const RankSnapshot& s = in.ranks[static_cast<std::size_t>(r)];
    if (s.crashed) continue;
    for (const auto& w : s.waits) {
      if (w.peer == kAnySource || w.peer == r) continue;
      std::vector<int> chain = {r, w.peer};
      std::set<int> seen = {r, w.peer};
      int at = w.peer;
      while (true) {
        const RankSnapshot& p = in.ranks[static_cast<std::size_t>(at)];
        if (p.crashed || p.finished || p.waits.empty()) break;
        const int next = p.waits.front().peer;
        if (next == kAnySource || seen.count(next)) {
          at = -1;
          break;
        }
        chain.push_back(next);
        seen.insert(next);
        at = next;
      }
      if (at < 0 || chain.size() < 3) continue;
      const RankSnapshot& end = in.ranks[static_cast<std::size_t>(at)];
      std::string s2 = "rank " + std::to_string(r) + " waits for rank " + std::to_string(w.peer) + ", which waits";
      for (std::size_t i = 2; i < chain.size(); ++i) s2 += (i > 2 ? ", which waits" : "") + std::string(" for rank ") + std::to_string(chain[i]);
      s2 += end.crashed ? ", which crashed" : end.finished ? ", which finished" : ", which is stuck";
      causes.insert(s2);
    }
  }

  // Cycles among blocked, non-crashed ranks (each reported once, from its smallest rank).
  {
    std::set<std::vector<int>> seen;
    std::vector<int> path;
    std::set<int> on_path;
    std::function<void(int, int)> dfs = [&](int start, int u) {
      if (d.cycles.size() >= 16) return;
      for (int v : edges[u]) {
        if (v == start && path.size() >= 2) {
          if (seen.insert(path).second) d.cycles.push_back(path);
          continue;
        }
        if (v < start || on_path.count(v) || !edges.count(v) || crashed.count(v)) continue;
        path.push_back(v);
        on_path.insert(v);
        dfs(start, v);
        on_path.erase(v);
        path.pop_back();
      }
    };
    for (int r : d.blocked) {
      if (crashed.count(r)) continue;
      path = {r};
      on_path = {r};
      dfs(r, r);
    }
    // Self-waits (a blocking receive from oneself) are cycles of one.
    for (int r : d.blocked)
      if (edges[r].count(r)) d.cycles.push_back({r});
  }
  for (const auto& c : d.cycles) {
    std::string s = "wait-for cycle: ";
    for (int r : c) s += std::to_string(r) + " -> ";
    s += std::to_string(c.front());
    bool all_sends = true;
    for (std::size_t i = 0; i < c.size(); ++i) {
      const int r = c[i], next = c[(i + 1) % c.size()];
      bool sends = false;
      for (const auto& w : in.ranks[static_cast<std::size_t>(r)].waits) sends = sends || (w.is_send && w.peer == next);
      all_sends = all_sends && sends;
    }
    if (all_sends)
      s += " (each rank is blocked in a send the next one never receives: sends above the eager threshold wait "
           "for their receiver; post the receives first, or use isend)";
    else
      s += " (each rank waits for the next one)";
    causes.insert(s);
  }
  d.causes.assign(causes.begin(), causes.end());

  os << "wait-for graph:";
  if (edges.empty()) os << " (no edges)";
  for (const auto& [r, ps] : edges)
    for (int p : ps) os << " " << r << "->" << p;
  os << "\n";
  os << "root cause" << (d.causes.size() == 1 ? "" : "s") << ":\n";
  if (d.causes.empty()) os << "  none identified (see the waits above)\n";
  for (const auto& c : d.causes) os << "  " << c << "\n";

  // The group of each context some op waits on: an unmatched send names
  // its group by it (a send on one of two groups with the same members,
  // waited for on the other, reads as such).
  std::map<std::uint32_t, std::string> group_of_context;
  for (const RankSnapshot& rs : in.ranks)
    for (const auto& w : rs.waits)
      if (w.info && !w.info->group.empty()) group_of_context.emplace(w.context, w.info->group);
  bool any_unmatched = false;
  for (int r = 0; r < n; ++r) {
    for (const auto& u : in.ranks[static_cast<std::size_t>(r)].unmatched) {
      if (!any_unmatched) os << "unmatched sends:\n";
      any_unmatched = true;
      const FrameHeader& h = u.header;
      os << "  at rank " << r << ": " << (h.kind == FrameKind::kRts ? "rendezvous request" : "message") << " from rank "
         << h.src << " (tag " << h.tag << ", " << describe_elements(h.dtype, h.count);
      if (h.fp.op != CollectiveKind::kNone) {
        os << ", part of " << describe_call(h.fp);
      } else if (auto g = group_of_context.find(h.context); g != group_of_context.end()) {
        os << ", on " << g->second;
      } else {
        os << ", on a group no blocked op waits on (context " << h.context << ")";
      }
      os << ") was never received\n";
    }
  }
  bool any_held = false;
  for (int r = 0; r < n; ++r) {
    for (const auto& h : in.ranks[static_cast<std::size_t>(r)].held) {
      if (!any_held)
        os << "frames the transport delivered but the core could not use (a frame before them never arrived: "
              "lost or misnumbered by the transport):\n";
      any_held = true;
      os << "  at rank " << r << ": " << h.held.size() << " frame" << (h.held.size() == 1 ? "" : "s") << " from rank "
         << h.src << " held waiting for channel_seq " << h.missing_seq << " (held:";
      for (std::size_t k = 0; k < h.held.size() && k < 8; ++k) os << " " << h.held[k].channel_seq;
      if (h.held.size() > 8) os << " ...";
      os << ")\n";
    }
  }
  std::vector<std::string> injected;
  for (const auto& f : in.faults) injected.push_back(f.text);
  if (!injected.empty()) {
    os << "faults injected:\n";
    for (const auto& t : injected) os << "  " << t << "\n";
  }
  if (!in.replay.empty()) os << "replay: " << in.replay << "\n";
  d.report = os.str();

  // Graphviz.
  std::ostringstream g;
  g << "digraph waits_for {\n  rankdir=LR;\n  node [shape=box, style=filled, fontname=\"monospace\"];\n";
  for (int r = 0; r < n; ++r) {
    const RankSnapshot& s = in.ranks[static_cast<std::size_t>(r)];
    std::string label = "rank " + std::to_string(r), color = "palegreen";
    if (s.crashed) {
      label += "\\ncrashed";
      color = "tomato";
    } else if (!s.error.empty()) {
      label += "\\nfailed";
      color = "plum";
    } else if (s.finished) {
      label += "\\nfinished";
      color = "lightgray";
    } else if (!s.waits.empty()) {
      label += "\\n" + op_text(s.waits.front().info);
      color = "orange";
    }
    std::string esc;
    for (char c : label) esc += c == '"' ? std::string("\\\"") : std::string(1, c);
    g << "  r" << r << " [label=\"" << esc << "\", fillcolor=" << color << "];\n";
  }
  for (int r : d.blocked) {
    for (const auto& w : in.ranks[static_cast<std::size_t>(r)].waits) {
      if (w.peer == kAnySource) continue;
      g << "  r" << r << " -> r" << w.peer << " [label=\"" << (w.is_send ? "send" : "recv") << " tag " << w.tag
        << "\"];\n";
    }
  }
  g << "}\n";
  d.dot = g.str();
  return d;
}

}  // namespace collie
