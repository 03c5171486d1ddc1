#include "backends/tcp/rendezvous.h"

#include <charconv>
#include <optional>
#include <string_view>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "backends/tcp/auth.h"
#include "backends/tcp/rendezvous_wire.h"
#include "core/text.h"
#include "core/error.h"
#include "core/whole_number.h"

namespace collie::tcp {

namespace {

using namespace rendezvous_wire;

[[noreturn]] void usage(const std::string& m) { throw Error(ErrorKind::kUsage, OpContext{}, "init_process_group: " + m); }
[[noreturn]] void fail(const std::string& m) { throw Error(ErrorKind::kTransport, OpContext{}, "rendezvous: " + m); }

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

int env_int(std::initializer_list<const char*> names, const char** used) {
  for (const char* n : names) {
    if (const char* v = env(n)) {
      *used = n;
      if (const auto x = whole_number(v, 0, 1 << 30)) return static_cast<int>(*x);
      usage(std::string(n) + "='" + v + "' is not a whole number >= 0");
    }
  }
  return -1;
}

int port_number(const char* what, const std::string& text) {
  if (const auto p = whole_number(text, 1, 65535)) return static_cast<int>(*p);
  usage(std::string(what) + " is '" + text + "', not a TCP port (1..65535)");
}

template <std::size_t A, std::size_t B>
std::vector<std::uint8_t> concat(const std::array<std::uint8_t, A>& a, const std::array<std::uint8_t, B>& b) {
  std::vector<std::uint8_t> v(a.begin(), a.end());
  v.insert(v.end(), b.begin(), b.end());
  return v;
}

// Runs `io` until `done` or the deadline.
bool run_until(asio::io_context& io, const std::function<bool()>& done, std::chrono::steady_clock::time_point deadline) {
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string seconds(Nanos ns) { return std::to_string(ns / 1'000'000'000) + " s"; }

}  // namespace

std::string job_token(const RendezvousOptions& o) {
  if (!o.token.empty()) return o.token;
  const char* t = env("COLLIE_JOB_TOKEN");
  return t ? t : "";
}

void resolve_identity(const RendezvousOptions& o, int* rank, int* world) {
  const char* rank_var = "the rank argument";
  const char* world_var = "the world argument";
  *rank = o.rank >= 0 ? o.rank : env_int({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK"}, &rank_var);
  *world = o.world > 0 ? o.world : env_int({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE"}, &world_var);
  if (*rank < 0) usage("no rank: set RANK (or SLURM_PROCID, OMPI_COMM_WORLD_RANK), or pass one");
  if (*world < 1) usage("no world size: set WORLD_SIZE (or SLURM_NTASKS, OMPI_COMM_WORLD_SIZE), or pass one");
  if (*rank >= *world)
    usage(std::string("rank ") + std::to_string(*rank) + " (from " + rank_var + ") is not below the world size " +
          std::to_string(*world) + " (from " + world_var + ")");
}

namespace {

// A file entry's proof: the first 8 bytes of its HMAC, in hex; entries of
// other jobs (other tokens) do not verify and are skipped.
std::string file_entry_proof(const std::string& token, const std::string& entry) {
  const Mac mac = prove(token, kFileProof,
                        std::span(reinterpret_cast<const std::uint8_t*>(entry.data()), entry.size()));
  static const char* kHex = "0123456789abcdef";
  std::string s;
  for (int i = 0; i < 8; ++i) {
    s.push_back(kHex[mac[static_cast<std::size_t>(i)] >> 4]);
    s.push_back(kHex[mac[static_cast<std::size_t>(i)] & 15]);
  }
  return s;
}

Membership by_file(const std::string& path, int rank, int world, const std::string& token, std::uint16_t port,
                   Nanos timeout) {
  const char* adv = env("COLLIE_ADVERTISE_ADDR");
  const std::string host = adv ? adv : "127.0.0.1";
  {
    std::ofstream f(path, std::ios::app);
    if (!f) usage("file://" + path + " cannot be written");
    const std::string entry = std::to_string(rank) + " " + std::to_string(world) + " " + host + " " + std::to_string(port);
    f << file_entry_proof(token, entry) << " " << entry << "\n";
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout);
  while (true) {
    std::ifstream f(path);
    std::map<int, PeerAddress> seen;
    std::string line;
    while (std::getline(f, line)) {
      const auto sp = line.find(' ');
      if (sp == std::string::npos || line.substr(0, sp) != file_entry_proof(token, line.substr(sp + 1))) continue;
      std::istringstream is(line.substr(sp + 1));
      int r, w;
      PeerAddress a;
      if (!(is >> r >> w >> a.host >> a.port)) continue;
      if (w != world) fail("rank " + std::to_string(r) + " says the world has " + std::to_string(w) + " ranks, this rank says " + std::to_string(world));
      if (r < 0 || r >= world) fail("rank " + std::to_string(r) + " in " + path + " is not a rank of this job");
      if (seen.count(r) && !(seen[r].host == a.host && seen[r].port == a.port))
        fail("rank " + std::to_string(r) + " joined twice (" + path + ")");
      seen[r] = a;
    }
    if (static_cast<int>(seen.size()) == world) {
      Membership m;
      m.rank = rank;
      m.world = world;
      for (auto& [r, a] : seen) m.peers.push_back(a);
      return m;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string missing;
      for (int r = 0; r < world; ++r)
        if (!seen.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      fail(std::to_string(seen.size()) + "/" + std::to_string(world) + " ranks joined within " + seconds(timeout) +
           "; missing: " + missing);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a file system, not the simulator
  }
}

Membership as_master(asio::io_context& io, const std::string& addr, std::uint16_t master_port, int world,
                     const std::string& token, std::uint16_t port, Nanos timeout,
                     const std::function<void()>& on_listening) {
  asio::ip::tcp::acceptor acc(io);
  asio::ip::tcp::endpoint ep(asio::ip::make_address(addr), master_port);
  asio::error_code ec;
  acc.open(ep.protocol(), ec);
  acc.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  acc.bind(ep, ec);
  if (ec) fail("rank 0 cannot listen on " + addr + ":" + std::to_string(master_port) + ": " + ec.message() +
               " (another job on the same port?)");
  acc.listen();
  if (on_listening) on_listening();
  Membership m;
  m.rank = 0;
  m.world = world;
  m.peers.resize(static_cast<std::size_t>(world));
  m.peers[0] = PeerAddress{addr, port};
  struct Conn {
    std::shared_ptr<asio::ip::tcp::socket> s;
    Challenge challenge{};
    RegisterBytes reg{};
    Mac proof{};
  };
  std::map<int, std::shared_ptr<Conn>> joined;
  std::vector<std::shared_ptr<std::vector<std::uint8_t>>> keep;  // reply buffers in flight
  std::size_t replies_in_flight = 0;
  auto reply = [&](const std::shared_ptr<Conn>& c, bool ok, const std::string& body) {
    auto b = std::make_shared<std::vector<std::uint8_t>>(encode_reply(token, c->reg, ok, body));
    keep.push_back(b);
    ++replies_in_flight;
    asio::async_write(*c->s, asio::buffer(*b), [&](const asio::error_code&, std::size_t) { --replies_in_flight; });
  };
  // Why each rank that registered was refused (its last refusal): rank 0's
  // own error names it beside the missing ranks, so that a wrong job token
  // is not just "missing: 2".
  std::map<int, std::string> refused;
  auto refuse = [&](const std::shared_ptr<Conn>& c, int r, const std::string& why) {
    refused[r] = why;
    reply(c, false, why);
  };
  std::function<void()> accept_next = [&] {
    auto c = std::make_shared<Conn>();
    c->s = std::make_shared<asio::ip::tcp::socket>(io);
    acc.async_accept(*c->s, [&, c](const asio::error_code& e) {
      if (e) return;
      accept_next();
      c->challenge = encode_challenge(fresh_nonce());
      asio::async_write(*c->s, asio::buffer(c->challenge), [](const asio::error_code&, std::size_t) {});
      std::array<asio::mutable_buffer, 2> in = {asio::buffer(c->reg), asio::buffer(c->proof)};
      asio::async_read(*c->s, in, [&, c](const asio::error_code& e2, std::size_t) {
        const std::optional<Registration> got = e2 ? std::nullopt : decode_registration(c->reg);
        if (!got) return;  // a stranger: ignore it
        if (got->version != kVersion)
          return reply(c, false, "rendezvous version " + std::to_string(got->version) + ", rank 0 speaks " +
                                     std::to_string(kVersion));
        const int r = got->rank, w = got->world;
        if (!verify(token, kRegisterProof, concat(c->challenge, c->reg), c->proof))
          return refuse(c, r, "rank " + std::to_string(r) +
                                  " did not prove the job token: this port belongs to another job, or "
                                  "COLLIE_JOB_TOKEN differs");
        if (got->port == 0 || got->port > 65535)
          return refuse(c, r, "rank " + std::to_string(r) + " announced data port " + std::to_string(got->port) +
                                  ", not a TCP port");
        const auto p = static_cast<std::uint16_t>(got->port);
        if (w != world)
          return refuse(c, r, "rank " + std::to_string(r) + " says the world has " + std::to_string(w) +
                                  " ranks, rank 0 says " + std::to_string(world));
        if (r <= 0 || r >= world) return reply(c, false, "rank " + std::to_string(r) + " is not a rank of this job");
        if (joined.count(r)) return reply(c, false, "rank " + std::to_string(r) + " joined twice");
        asio::error_code e3;
        m.peers[static_cast<std::size_t>(r)] = PeerAddress{c->s->remote_endpoint(e3).address().to_string(), p};
        joined[r] = c;
      });
    });
  };
  accept_next();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout);
  bool all = run_until(io, [&] { return static_cast<int>(joined.size()) == world - 1; }, deadline);
  std::string body;
  if (!all) {
    std::string missing;
    for (int r = 1; r < world; ++r)
      if (!joined.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    body = std::to_string(joined.size() + 1) + "/" + std::to_string(world) + " ranks joined within " + seconds(timeout) +
           "; missing: " + missing;
    for (const auto& [r, why] : refused)
      if (!joined.count(r)) body += "; refused: " + why;
  } else {
    try {
      body = encode_address_table(m.peers);
    } catch (const std::invalid_argument& e) {
      all = false;
      body = std::string("rank 0 cannot send the address table: ") + e.what();
    }
  }
  for (auto& [r, c] : joined) reply(c, all, body);
  acc.close();
  // Let the replies go out (a rank that vanished meanwhile does not hold us up for long).
  run_until(io, [&] { return replies_in_flight == 0; }, std::chrono::steady_clock::now() + std::chrono::seconds(2));
  if (!all) fail(body);
  return m;
}

Membership as_worker(asio::io_context& io, const std::string& addr, std::uint16_t master_port, int rank, int world,
                     const std::string& token, std::uint16_t port, Nanos timeout) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout) + std::chrono::seconds(2);
  const std::string where = addr + ":" + std::to_string(master_port);
  asio::ip::tcp::endpoint ep(asio::ip::make_address(addr), master_port);
  asio::ip::tcp::socket s(io);
  while (true) {  // rank 0 may not be listening yet
    asio::error_code ec;
    s.connect(ep, ec);
    if (!ec) break;
    s.close();
    if (std::chrono::steady_clock::now() >= deadline)
      fail("rank " + std::to_string(rank) + " could not reach rank 0 at " + where + " within " + seconds(timeout) + ": " +
           ec.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // a real process we wait for, not the simulator
  }
  Challenge challenge{};
  std::array<std::uint8_t, kReplyHeadBytes> head{};
  std::vector<std::uint8_t> body;
  Mac mac{};
  const RegisterBytes reg = encode(Registration{kVersion, rank, world, port, fresh_nonce()});
  bool got = false;
  asio::error_code err;
  asio::async_read(s, asio::buffer(challenge), [&](const asio::error_code& e, std::size_t) {
    if (e || !is_challenge(challenge)) {
      err = e ? e : asio::error::invalid_argument;
      got = true;
      return;
    }
    const Mac proof = prove(token, kRegisterProof, concat(challenge, reg));
    std::array<asio::const_buffer, 2> out = {asio::buffer(reg), asio::buffer(proof)};
    asio::write(s, out, err);
    if (err) {
      got = true;
      return;
    }
    asio::async_read(s, asio::buffer(head), [&](const asio::error_code& e1, std::size_t) {
      if (e1) {
        err = e1;
        got = true;
        return;
      }
      // Longer claims than any reply can be are refused before anything is
      // allocated or read.
      const std::uint64_t claimed = reply_body_bytes(head);
      if (claimed > max_reply_body_bytes(world)) {
        err = asio::error::message_size;
        got = true;
        return;
      }
      body.resize(static_cast<std::size_t>(claimed));
      std::array<asio::mutable_buffer, 2> in = {asio::buffer(body), asio::buffer(mac)};
      asio::async_read(s, in, [&](const asio::error_code& e2, std::size_t) {
        err = e2;
        got = true;
      });
    });
  });
  if (!run_until(io, [&] { return got; }, deadline)) fail("rank 0 did not answer within " + seconds(timeout));
  if (err == asio::error::invalid_argument) fail("the process at " + where + " is not a collie rank 0");
  if (err == asio::error::message_size)
    fail("the process at " + where + " sent a reply longer than any address table of " + std::to_string(world) +
         " ranks (not a collie rank 0 of this job)");
  if (err) fail("rank 0 closed the connection: " + err.message());
  // An error reply is shown even unproven: a rank 0 of another job says why it refused us.
  if (head[0] != 0) fail(valid_utf8(std::string(body.begin(), body.end())));
  if (!verify_reply(token, reg, head, body, mac))
    fail("the process at " + where + " did not prove the job token (another job's rank 0, or COLLIE_JOB_TOKEN differs)");
  auto peers = parse_address_table(body, world);
  if (!peers) fail("rank 0 sent a malformed address table");
  Membership m;
  m.rank = rank;
  m.world = world;
  m.peers = std::move(*peers);
  return m;
}

}  // namespace

Membership rendezvous(asio::io_context& io, const RendezvousOptions& o, std::uint16_t data_port) {
  int rank = 0, world = 0;
  resolve_identity(o, &rank, &world);
  const std::string token = job_token(o);
  const std::string& m = o.init_method;
  if (m.rfind("file://", 0) == 0) return by_file(m.substr(7), rank, world, token, data_port, o.timeout_ns);
  std::string addr;
  int port = -1;
  if (m == "env://") {
    const char* a = env("MASTER_ADDR");
    const char* p = env("MASTER_PORT");
    if (!a || !p) usage("env:// needs MASTER_ADDR and MASTER_PORT");
    addr = a;
    port = port_number("MASTER_PORT", p);
  } else if (m.rfind("tcp://", 0) == 0) {
    const std::string hp = m.substr(6);
    const auto colon = hp.rfind(':');
    if (colon == std::string::npos) usage("tcp:// needs HOST:PORT, not '" + hp + "'");
    addr = hp.substr(0, colon);
    port = port_number("the port of tcp://", hp.substr(colon + 1));
  } else {
    usage("unknown init method '" + m + "' (env://, tcp://HOST:PORT, file://PATH)");
  }
  if (port <= 0 || port > 65535) usage("the master port " + std::to_string(port) + " is not a TCP port");
  asio::error_code ec;
  asio::ip::make_address(addr, ec);
  if (ec) {
    // A host name: resolve it.
    asio::ip::tcp::resolver res(io);
    auto r = res.resolve(addr, std::to_string(port), ec);
    if (ec || r.empty()) usage("cannot resolve the master address '" + addr + "'");
    addr = r.begin()->endpoint().address().to_string();
  }
  if (world == 1) {
    Membership one;
    one.rank = 0;
    one.world = 1;
    one.peers.push_back(PeerAddress{addr, data_port});
    return one;
  }
  return rank == 0 ? as_master(io, addr, static_cast<std::uint16_t>(port), world, token, data_port, o.timeout_ns,
                             o.on_listening)
                   : as_worker(io, addr, static_cast<std::uint16_t>(port), rank, world, token, data_port, o.timeout_ns);
}

}  // namespace collie::tcp
