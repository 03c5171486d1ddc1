#include "sim/faults.h"

#include <cmath>
#include <map>
#include <sstream>

namespace collie::sim {

namespace {

std::string ordinal(std::uint64_t n) {
  const char* suf = "th";
  if (n % 100 < 11 || n % 100 > 13) {
    if (n % 10 == 1) suf = "st";
    if (n % 10 == 2) suf = "nd";
    if (n % 10 == 3) suf = "rd";
  }
  return std::to_string(n) + suf;
}

std::string ranks_text(const std::vector<int>& r) {
  if (r.empty()) return "everyone else";
  std::string s = "{";
  for (std::size_t i = 0; i < r.size(); ++i) s += (i ? "," : "") + std::to_string(r[i]);
  return s + "}";
}

std::string window_text(const TimeWindow& w) {
  if (w.from_ns == 0 && w.until_ns == std::numeric_limits<Nanos>::max()) return "";
  std::ostringstream os;
  os << " during [" << w.from_ns / 1000.0 << " us, ";
  if (w.until_ns == std::numeric_limits<Nanos>::max()) os << "end)";
  else os << w.until_ns / 1000.0 << " us)";
  return os.str();
}

std::string channel_text(int src, int dst) {
  return (src < 0 ? std::string("*") : std::to_string(src)) + "->" + (dst < 0 ? std::string("*") : std::to_string(dst));
}

std::string describe(const MessageFault& f) {
  std::ostringstream os;
  static const char* names[] = {"drop", "delay", "duplicate", "reorder"};
  os << names[static_cast<int>(f.kind)];
  if (f.nth) os << " the " << ordinal(f.nth) << " message " << channel_text(f.src, f.dst);
  else os << " frames " << channel_text(f.src, f.dst) << " with p=" << f.probability;
  if (f.kind == MessageFault::Kind::kDelay || f.kind == MessageFault::Kind::kReorder) {
    switch (f.distribution) {
      case MessageFault::Distribution::kFixed: os << " by " << f.delay_us << " us"; break;
      case MessageFault::Distribution::kUniform: os << " by U[" << f.delay_us << ", " << f.delay_max_us << "] us"; break;
      case MessageFault::Distribution::kExponential: os << " by Exp(mean " << f.delay_us << " us)"; break;
    }
  }
  os << window_text(f.window);
  return os.str();
}

}  // namespace

void FaultPlan::append(const FaultPlan& o) {
  messages.insert(messages.end(), o.messages.begin(), o.messages.end());
  partitions.insert(partitions.end(), o.partitions.begin(), o.partitions.end());
  degradations.insert(degradations.end(), o.degradations.begin(), o.degradations.end());
  crashes.insert(crashes.end(), o.crashes.begin(), o.crashes.end());
  slow.insert(slow.end(), o.slow.begin(), o.slow.end());
  skews.insert(skews.end(), o.skews.begin(), o.skews.end());
}

std::vector<std::string> FaultPlan::describe() const {
  std::vector<std::string> out;
  for (const auto& m : messages) out.push_back(sim::describe(m));
  for (const auto& p : partitions)
    out.push_back("partition " + ranks_text(p.a) + (p.one_way ? " -> " : " | ") + ranks_text(p.b) +
                  window_text(p.window));
  for (const auto& d : degradations) {
    std::ostringstream os;
    os << "degrade ";
    if (d.scope == LinkDegradation::Scope::kPair) os << "link " << d.a << "<->" << d.b;
    else if (d.scope == LinkDegradation::Scope::kNode) os << "node " << d.a << "'s links";
    else os << "inter-node links";
    os << ": bandwidth x" << d.bandwidth_factor << ", +" << d.added_latency_us << " us" << window_text(d.window);
    out.push_back(os.str());
  }
  for (const auto& c : crashes) {
    std::ostringstream os;
    os << "crash rank " << c.rank;
    if (c.at_ns) os << " at " << *c.at_ns / 1000.0 << " us";
    if (c.at_op) os << " at its " << ordinal(c.at_op) << " op";
    if (!c.at_step.empty()) os << " at step '" << c.at_step << "'";
    if (c.detect_ns) os << ", detected by its peers after " << *c.detect_ns / 1000.0 << " us";
    out.push_back(os.str());
  }
  for (const auto& s : slow) {
    std::ostringstream os;
    os << "slow rank " << s.rank << " x" << s.factor;
    out.push_back(os.str());
  }
  for (const auto& s : skews) {
    std::ostringstream os;
    os << "clock of rank " << s.rank << " runs x" << s.rate << " offset " << s.offset_us << " us";
    out.push_back(os.str());
  }
  return out;
}

std::string FaultRecord::describe() const {
  std::ostringstream os;
  os << "t=" << time << "ns: ";
  switch (kind) {
    case Kind::kCrash: os << "rank " << rank << " crashed"; break;
    case Kind::kDeadDestination: os << "frame " << rank << "->" << dst << " lost: rank " << dst << " had crashed"; break;
    default: {
      static const char* verbs[] = {"dropped", "delayed", "duplicated", "reordered", "lost to a partition"};
      os << (header.kind == FrameKind::kRts ? "rendezvous request " : header.kind == FrameKind::kCts ? "clear-to-send " :
             header.kind == FrameKind::kData ? "rendezvous data " : "message ")
         << rank << "->" << dst << " (tag " << header.tag;
      if (header.fp.op != CollectiveKind::kNone) os << ", " << describe_call(header.fp);
      os << ") " << verbs[static_cast<int>(kind)];
      break;
    }
  }
  if (!fault.empty()) os << " by fault '" << fault << "'";
  return os.str();
}

FaultPlan random_fault_plan(std::uint64_t seed, int world, bool destructive) {
  Prng p(seed ^ 0xfa017fa017ull);
  FaultPlan plan;
  auto rank = [&] { return static_cast<int>(p.below(static_cast<std::uint64_t>(world))); };
  const int n = 1 + static_cast<int>(p.below(4));
  for (int i = 0; i < n; ++i) {
    int kind = static_cast<int>(p.below(destructive ? 9 : 5));
    if (!destructive && kind >= 1) ++kind;  // benign: no duplicates (1), a transport contract violation
    switch (kind) {
      case 0: {
        MessageFault f;
        f.kind = MessageFault::Kind::kDelay;
        f.probability = 0.1 + 0.8 * p.uniform();
        f.distribution = static_cast<MessageFault::Distribution>(p.below(3));
        f.delay_us = 1 + 50 * p.uniform();
        f.delay_max_us = f.delay_us * 4;
        plan.messages.push_back(f);
        break;
      }
      case 1: {
        MessageFault f;
        f.kind = MessageFault::Kind::kDuplicate;
        f.probability = 0.05 + 0.5 * p.uniform();
        plan.messages.push_back(f);
        break;
      }
      case 2: {
        MessageFault f;
        f.kind = MessageFault::Kind::kReorder;
        f.probability = 0.1 + 0.6 * p.uniform();
        f.distribution = MessageFault::Distribution::kUniform;
        f.delay_us = 0;
        f.delay_max_us = 5 + 40 * p.uniform();
        plan.messages.push_back(f);
        break;
      }
      case 3: plan.slow.push_back(SlowRank{rank(), 1.5 + 8 * p.uniform()}); break;
      case 4: plan.skews.push_back(ClockSkew{rank(), 0.5 + p.uniform(), 0}); break;
      case 5: {
        LinkDegradation d;
        d.scope = LinkDegradation::Scope::kInterNode;
        d.bandwidth_factor = 0.05 + 0.9 * p.uniform();
        d.added_latency_us = 20 * p.uniform();
        plan.degradations.push_back(d);
        break;
      }
      case 6: {
        MessageFault f;
        f.kind = MessageFault::Kind::kDrop;
        f.src = world > 1 ? rank() : 0;
        f.dst = world > 1 ? (f.src + 1 + static_cast<int>(p.below(static_cast<std::uint64_t>(world - 1)))) % world : 0;
        f.nth = 1 + p.below(4);
        plan.messages.push_back(f);
        break;
      }
      case 7: {
        Partition q;
        for (int r = 0; r < world; ++r)
          if (p.below(2)) q.a.push_back(r);
        if (q.a.empty()) q.a.push_back(rank());
        q.window.from_ns = static_cast<Nanos>(p.below(20000));
        q.window.until_ns = q.window.from_ns + 1000 + static_cast<Nanos>(p.below(50000));
        plan.partitions.push_back(q);
        break;
      }
      default: {
        Crash c;
        c.rank = rank();
        if (p.below(2)) c.at_ns = static_cast<Nanos>(p.below(20000));
        else c.at_op = 1 + p.below(3);
        plan.crashes.push_back(c);
        break;
      }
    }
  }
  return plan;
}

namespace {

std::vector<int> parse_rank_set(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, '+')) out.push_back(std::stoi(part));
  return out;
}

}  // namespace

namespace {
std::string num(double v) {
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}
std::string window_args(const TimeWindow& w) {
  std::string s;
  if (w.from_ns != 0) s += ",from_us=" + num(static_cast<double>(w.from_ns) / 1000.0);
  if (w.until_ns != std::numeric_limits<Nanos>::max()) s += ",until_us=" + num(static_cast<double>(w.until_ns) / 1000.0);
  return s;
}
std::string rank_set(const std::vector<int>& r) {
  std::string s;
  for (std::size_t i = 0; i < r.size(); ++i) s += (i ? "+" : "") + std::to_string(r[i]);
  return s;
}
}  // namespace

std::vector<std::string> fault_args(const FaultPlan& plan) {
  std::vector<std::string> out;
  static const char* names[] = {"drop", "delay", "duplicate", "reorder"};
  for (const auto& f : plan.messages) {
    // Defaults (p=1, us=0) are left out: "drop:src=0,dst=1,nth=5", as a user writes it.
    std::string s;
    if (f.probability != 1.0) s += ",p=" + num(f.probability);
    if (f.src >= 0) s += ",src=" + std::to_string(f.src);
    if (f.dst >= 0) s += ",dst=" + std::to_string(f.dst);
    if (f.nth) s += ",nth=" + std::to_string(f.nth);
    switch (f.distribution) {
      case MessageFault::Distribution::kFixed:
        if (f.delay_us != 0) s += ",us=" + num(f.delay_us);
        break;
      case MessageFault::Distribution::kUniform: s += ",us=" + num(f.delay_us) + ",max_us=" + num(f.delay_max_us); break;
      case MessageFault::Distribution::kExponential: s += ",mean_us=" + num(f.delay_us); break;
    }
    s += window_args(f.window);
    if (!s.empty()) s[0] = ':';
    out.push_back(std::string(names[static_cast<int>(f.kind)]) + s);
  }
  for (const auto& p : plan.partitions) {
    std::string s = "partition:a=" + rank_set(p.a);
    if (!p.b.empty()) s += ",b=" + rank_set(p.b);
    if (p.one_way) s += ",one_way=1";
    out.push_back(s + window_args(p.window));
  }
  for (const auto& d : plan.degradations) {
    static const char* scopes[] = {"pair", "node", "inter"};
    std::string s = std::string("degrade:scope=") + scopes[static_cast<int>(d.scope)];
    if (d.a >= 0) s += ",a=" + std::to_string(d.a);
    if (d.b >= 0) s += ",b=" + std::to_string(d.b);
    s += ",bw=" + num(d.bandwidth_factor) + ",lat_us=" + num(d.added_latency_us);
    out.push_back(s + window_args(d.window));
  }
  for (const auto& c : plan.crashes) {
    std::string s = "crash:rank=" + std::to_string(c.rank);
    if (c.at_ns) s += ",at_us=" + num(static_cast<double>(*c.at_ns) / 1000.0);
    if (c.at_op) s += ",op=" + std::to_string(c.at_op);
    if (!c.at_step.empty()) s += ",step=" + c.at_step;
    if (c.detect_ns) s += ",detect_us=" + num(static_cast<double>(*c.detect_ns) / 1000.0);
    out.push_back(s);
  }
  for (const auto& s : plan.slow) out.push_back("slow:rank=" + std::to_string(s.rank) + ",factor=" + num(s.factor));
  for (const auto& s : plan.skews)
    out.push_back("skew:rank=" + std::to_string(s.rank) + ",rate=" + num(s.rate) + ",offset_us=" + num(s.offset_us));
  return out;
}

std::optional<std::string> parse_fault(const std::string& text, FaultPlan& plan) {
  const auto colon = text.find(':');
  const std::string kind = text.substr(0, colon);
  std::map<std::string, std::string> kv;
  if (colon != std::string::npos) {
    std::stringstream ss(text.substr(colon + 1));
    std::string item;
    while (std::getline(ss, item, ',')) {
      const auto eq = item.find('=');
      if (eq == std::string::npos) return "fault '" + text + "': '" + item + "' is not key=value";
      kv[item.substr(0, eq)] = item.substr(eq + 1);
    }
  }
  auto take = [&](const char* k) -> std::optional<std::string> {
    auto it = kv.find(k);
    if (it == kv.end()) return std::nullopt;
    std::string v = it->second;
    kv.erase(it);
    return v;
  };
  auto window = [&](TimeWindow& w) {
    if (auto v = take("from_us")) w.from_ns = static_cast<Nanos>(std::stod(*v) * 1000);
    if (auto v = take("until_us")) w.until_ns = static_cast<Nanos>(std::stod(*v) * 1000);
  };
  try {
    if (kind == "drop" || kind == "delay" || kind == "duplicate" || kind == "reorder") {
      MessageFault f;
      f.kind = kind == "drop" ? MessageFault::Kind::kDrop
               : kind == "delay" ? MessageFault::Kind::kDelay
               : kind == "duplicate" ? MessageFault::Kind::kDuplicate
                                     : MessageFault::Kind::kReorder;
      if (auto v = take("src")) f.src = std::stoi(*v);
      if (auto v = take("dst")) f.dst = std::stoi(*v);
      if (auto v = take("nth")) f.nth = std::stoull(*v);
      if (auto v = take("p")) f.probability = std::stod(*v);
      if (auto v = take("us")) f.delay_us = std::stod(*v);
      if (auto v = take("max_us")) {
        f.delay_max_us = std::stod(*v);
        f.distribution = MessageFault::Distribution::kUniform;
      }
      if (auto v = take("mean_us")) {
        f.delay_us = std::stod(*v);
        f.distribution = MessageFault::Distribution::kExponential;
      }
      if (f.kind == MessageFault::Kind::kReorder && f.delay_us == 0 && f.delay_max_us == 0) {
        f.distribution = MessageFault::Distribution::kUniform;
        f.delay_max_us = 20;
      }
      window(f.window);
      if (f.probability < 0 || f.probability > 1) return "fault '" + text + "': p must be in [0, 1]";
      plan.messages.push_back(f);
    } else if (kind == "partition") {
      Partition p;
      if (auto v = take("a")) p.a = parse_rank_set(*v);
      if (auto v = take("b")) p.b = parse_rank_set(*v);
      if (auto v = take("one_way")) p.one_way = *v == "1" || *v == "true";
      window(p.window);
      if (p.a.empty()) return "fault '" + text + "': a partition needs a=RANK+RANK...";
      plan.partitions.push_back(p);
    } else if (kind == "degrade") {
      LinkDegradation d;
      const std::string scope = take("scope").value_or("inter");
      if (scope == "pair") d.scope = LinkDegradation::Scope::kPair;
      else if (scope == "node") d.scope = LinkDegradation::Scope::kNode;
      else if (scope == "inter") d.scope = LinkDegradation::Scope::kInterNode;
      else return "fault '" + text + "': scope is pair, node or inter";
      if (auto v = take("a")) d.a = std::stoi(*v);
      if (auto v = take("b")) d.b = std::stoi(*v);
      if (auto v = take("bw")) d.bandwidth_factor = std::stod(*v);
      if (auto v = take("lat_us")) d.added_latency_us = std::stod(*v);
      window(d.window);
      if (!(d.bandwidth_factor > 0)) return "fault '" + text + "': bw must be > 0";
      plan.degradations.push_back(d);
    } else if (kind == "crash") {
      Crash c;
      auto r = take("rank");
      if (!r) return "fault '" + text + "': crash needs rank=N";
      c.rank = std::stoi(*r);
      if (auto v = take("at_us")) c.at_ns = static_cast<Nanos>(std::stod(*v) * 1000);
      if (auto v = take("op")) c.at_op = std::stoull(*v);
      if (auto v = take("step")) c.at_step = *v;
      if (auto v = take("detect_us")) {
        const double us = std::stod(*v);
        if (!(us >= 0)) return "fault '" + text + "': detect_us must be >= 0";
        c.detect_ns = static_cast<Nanos>(us * 1000);
      }
      if (!c.at_ns && !c.at_op && c.at_step.empty()) c.at_ns = 0;
      plan.crashes.push_back(c);
    } else if (kind == "slow") {
      SlowRank s;
      auto r = take("rank");
      if (!r) return "fault '" + text + "': slow needs rank=N";
      s.rank = std::stoi(*r);
      s.factor = std::stod(take("factor").value_or("2"));
      if (!(s.factor > 0)) return "fault '" + text + "': factor must be > 0";
      plan.slow.push_back(s);
    } else if (kind == "skew") {
      ClockSkew s;
      auto r = take("rank");
      if (!r) return "fault '" + text + "': skew needs rank=N";
      s.rank = std::stoi(*r);
      s.rate = std::stod(take("rate").value_or("1"));
      s.offset_us = std::stod(take("offset_us").value_or("0"));
      if (!(s.rate > 0)) return "fault '" + text + "': rate must be > 0";
      plan.skews.push_back(s);
    } else {
      return "unknown fault '" + kind + "' (drop, delay, duplicate, reorder, partition, degrade, crash, slow, skew)";
    }
  } catch (const std::exception&) {
    return "fault '" + text + "': a value is not a number";
  }
  if (!kv.empty()) return "fault '" + text + "': unknown key '" + kv.begin()->first + "'";
  return std::nullopt;
}

std::optional<std::string> fault_outside_world(const FaultPlan& plan, int world) {
  const std::vector<std::string> args = fault_args(plan);
  std::size_t k = 0;  // fault_args is in plan order: messages, partitions, degradations, crashes, slow, skews
  auto out = [&](int rank) { return rank >= world || rank < -1; };
  auto say = [&](int rank) {
    return std::optional<std::string>((k < args.size() ? args[k] : std::string("a fault")) + " names rank " +
                                      std::to_string(rank) + ", outside a world of " + std::to_string(world));
  };
  for (const auto& f : plan.messages) {
    if (out(f.src)) return say(f.src);
    if (out(f.dst)) return say(f.dst);
    ++k;
  }
  for (const auto& p : plan.partitions) {
    for (int r : p.a)
      if (out(r)) return say(r);
    for (int r : p.b)
      if (out(r)) return say(r);
    ++k;
  }
  for (const auto& d : plan.degradations) {
    if (d.scope == LinkDegradation::Scope::kPair && (out(d.a) || out(d.b))) return say(out(d.a) ? d.a : d.b);
    ++k;
  }
  for (const auto& c : plan.crashes) {
    if (out(c.rank)) return say(c.rank);
    ++k;
  }
  for (const auto& r : plan.slow) {
    if (out(r.rank)) return say(r.rank);
    ++k;
  }
  for (const auto& r : plan.skews) {
    if (out(r.rank)) return say(r.rank);
    ++k;
  }
  return std::nullopt;
}

std::vector<std::string> unfired_faults(const FaultPlan& plan, const std::vector<std::string>& injected) {
  const std::vector<std::string> names = plan.describe();
  const std::vector<std::string> args = fault_args(plan);
  auto fired = [&](std::size_t k) {
    const std::string by = "by fault '" + names[k] + "'";
    for (const auto& t : injected)
      if (t.find(by) != std::string::npos) return true;
    return false;
  };
  std::vector<std::string> out;
  auto say = [&](std::size_t k, const std::string& why) { out.push_back(args[k] + " did not fire: " + why); };
  std::size_t k = 0;  // plan order: messages, partitions, degradations, crashes, slow, skews
  for (const auto& f : plan.messages) {
    const bool lost = f.kind == MessageFault::Kind::kDrop;
    if (lost && !fired(k)) {
      const std::string channel = (f.src < 0 ? std::string("any rank") : "rank " + std::to_string(f.src)) + " to " +
                                  (f.dst < 0 ? std::string("any rank") : "rank " + std::to_string(f.dst));
      say(k, f.nth ? "there was no " + ordinal(f.nth) + " message from " + channel + (f.window.from_ns > 0 || f.window.until_ns != std::numeric_limits<Nanos>::max() ? " in its window" : "")
                   : "no frame from " + channel + " was dropped");
    }
    ++k;
  }
  for (std::size_t i = 0; i < plan.partitions.size(); ++i, ++k)
    if (!fired(k)) say(k, "no frame crossed it while it held");
  k += plan.degradations.size();
  for (const auto& c : plan.crashes) {
    if (!fired(k)) {
      const std::string r = "rank " + std::to_string(c.rank);
      say(k, c.at_op ? r + " never started its " + ordinal(c.at_op) + " op (or had crashed before)"
             : !c.at_step.empty() ? r + " never entered a step '" + c.at_step + "' (or had crashed before)"
                                  : r + " had finished or crashed before that time");
    }
    ++k;
  }
  return out;
}

}  // namespace collie::sim
