#include "backends/tcp/rendezvous.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "core/error.h"

namespace collie::tcp {

namespace {

constexpr std::uint32_t kRegisterMagic = 0x56524c43;  // "CLRV"
constexpr std::size_t kRegisterBytes = 28;

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
      try {
        return std::stoi(v);
      } catch (const std::exception&) {
        usage(std::string(n) + "='" + v + "' is not an integer");
      }
    }
  }
  return -1;
}

void put32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>(v >> (8 * i));
}
std::uint32_t get32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}

struct Registration {
  int rank = -1, world = 0;
  std::uint64_t job = 0;
  std::uint16_t port = 0;
};

std::array<std::uint8_t, kRegisterBytes> encode(const Registration& r) {
  std::array<std::uint8_t, kRegisterBytes> b{};
  put32(b.data(), kRegisterMagic);
  put32(b.data() + 4, 1);
  put32(b.data() + 8, static_cast<std::uint32_t>(r.rank));
  put32(b.data() + 12, static_cast<std::uint32_t>(r.world));
  put32(b.data() + 16, static_cast<std::uint32_t>(r.job));
  put32(b.data() + 20, static_cast<std::uint32_t>(r.job >> 32));
  put32(b.data() + 24, r.port);
  return b;
}

// Runs `io` until `done` or the deadline.
bool run_until(asio::io_context& io, const std::function<bool()>& done, std::chrono::steady_clock::time_point deadline) {
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    io.restart();
    io.run_for(std::chrono::milliseconds(20));
  }
  return true;
}

std::string seconds(Nanos ns) { return std::to_string(ns / 1'000'000'000) + " s"; }

}  // namespace

std::uint64_t job_id(const std::string& token) {
  if (token.empty()) return 0;
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : token) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h | 1;
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

Membership by_file(const std::string& path, int rank, int world, std::uint64_t job, std::uint16_t port, Nanos timeout) {
  const char* adv = env("COLLIE_ADVERTISE_ADDR");
  const std::string host = adv ? adv : "127.0.0.1";
  {
    std::ofstream f(path, std::ios::app);
    if (!f) usage("file://" + path + " cannot be written");
    f << job << " " << rank << " " << world << " " << host << " " << port << "\n";
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout);
  while (true) {
    std::ifstream f(path);
    std::map<int, PeerAddress> seen;
    std::string line;
    while (std::getline(f, line)) {
      std::istringstream is(line);
      std::uint64_t j;
      int r, w;
      PeerAddress a;
      if (!(is >> j >> r >> w >> a.host >> a.port) || j != job) continue;
      if (w != world) fail("rank " + std::to_string(r) + " says the world has " + std::to_string(w) + " ranks, this rank says " + std::to_string(world));
      if (seen.count(r) && !(seen[r].host == a.host && seen[r].port == a.port))
        fail("rank " + std::to_string(r) + " joined twice (" + path + ")");
      seen[r] = a;
    }
    if (static_cast<int>(seen.size()) == world) {
      Membership m;
      m.rank = rank;
      m.world = world;
      m.job = job;
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
                     std::uint64_t job, std::uint16_t port, Nanos timeout) {
  asio::ip::tcp::acceptor acc(io);
  asio::ip::tcp::endpoint ep(asio::ip::make_address(addr), master_port);
  asio::error_code ec;
  acc.open(ep.protocol(), ec);
  acc.set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  acc.bind(ep, ec);
  if (ec) fail("rank 0 cannot listen on " + addr + ":" + std::to_string(master_port) + ": " + ec.message() +
               " (another job on the same port?)");
  acc.listen();
  Membership m;
  m.rank = 0;
  m.world = world;
  m.job = job;
  m.peers.resize(static_cast<std::size_t>(world));
  m.peers[0] = PeerAddress{addr, port};
  struct Conn {
    std::shared_ptr<asio::ip::tcp::socket> s;
    std::array<std::uint8_t, kRegisterBytes> buf{};
  };
  std::map<int, std::shared_ptr<asio::ip::tcp::socket>> joined;
  std::vector<std::shared_ptr<std::vector<std::uint8_t>>> keep;  // reply buffers in flight
  auto reply = [&](const std::shared_ptr<asio::ip::tcp::socket>& s, bool ok, const std::string& body) {
    auto b = std::make_shared<std::vector<std::uint8_t>>(5 + body.size());
    (*b)[0] = ok ? 0 : 1;
    put32(b->data() + 1, static_cast<std::uint32_t>(body.size()));
    std::copy(body.begin(), body.end(), b->begin() + 5);
    keep.push_back(b);
    asio::async_write(*s, asio::buffer(*b), [](const asio::error_code&, std::size_t) {});
  };
  std::function<void()> accept_next = [&] {
    auto c = std::make_shared<Conn>();
    c->s = std::make_shared<asio::ip::tcp::socket>(io);
    acc.async_accept(*c->s, [&, c](const asio::error_code& e) {
      if (e) return;
      accept_next();
      asio::async_read(*c->s, asio::buffer(c->buf), [&, c](const asio::error_code& e2, std::size_t) {
        if (e2 || get32(c->buf.data()) != kRegisterMagic) return;  // a stranger: ignore it
        const int r = static_cast<int>(get32(c->buf.data() + 8));
        const int w = static_cast<int>(get32(c->buf.data() + 12));
        const std::uint64_t j = get32(c->buf.data() + 16) | (static_cast<std::uint64_t>(get32(c->buf.data() + 20)) << 32);
        const auto p = static_cast<std::uint16_t>(get32(c->buf.data() + 24));
        if (j != job) return reply(c->s, false, "this port belongs to another job (different COLLIE_JOB_TOKEN)");
        if (w != world)
          return reply(c->s, false, "rank " + std::to_string(r) + " says the world has " + std::to_string(w) +
                                        " ranks, rank 0 says " + std::to_string(world));
        if (r <= 0 || r >= world) return reply(c->s, false, "rank " + std::to_string(r) + " is not a rank of this job");
        if (joined.count(r)) return reply(c->s, false, "rank " + std::to_string(r) + " joined twice");
        asio::error_code e3;
        m.peers[static_cast<std::size_t>(r)] = PeerAddress{c->s->remote_endpoint(e3).address().to_string(), p};
        joined[r] = c->s;
      });
    });
  };
  accept_next();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout);
  const bool all = run_until(io, [&] { return static_cast<int>(joined.size()) == world - 1; }, deadline);
  std::string body;
  if (!all) {
    std::string missing;
    for (int r = 1; r < world; ++r)
      if (!joined.count(r)) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    body = std::to_string(joined.size() + 1) + "/" + std::to_string(world) + " ranks joined within " + seconds(timeout) +
           "; missing: " + missing;
  } else {
    for (const auto& pa : m.peers) {
      body.push_back(static_cast<char>(pa.port & 0xff));
      body.push_back(static_cast<char>(pa.port >> 8));
      body.push_back(static_cast<char>(pa.host.size()));
      body += pa.host;
    }
  }
  for (auto& [r, s] : joined) reply(s, all, body);
  io.restart();
  io.run_for(std::chrono::milliseconds(200));  // let the replies go out
  if (!all) fail(body);
  return m;
}

Membership as_worker(asio::io_context& io, const std::string& addr, std::uint16_t master_port, int rank, int world,
                     std::uint64_t job, std::uint16_t port, Nanos timeout) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(timeout) + std::chrono::seconds(2);
  asio::ip::tcp::endpoint ep(asio::ip::make_address(addr), master_port);
  asio::ip::tcp::socket s(io);
  while (true) {  // rank 0 may not be listening yet
    asio::error_code ec;
    s.connect(ep, ec);
    if (!ec) break;
    s.close();
    if (std::chrono::steady_clock::now() >= deadline)
      fail("rank " + std::to_string(rank) + " could not reach rank 0 at " + addr + ":" + std::to_string(master_port) +
           " within " + seconds(timeout) + ": " + ec.message());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto reg = encode(Registration{rank, world, job, port});
  asio::write(s, asio::buffer(reg));
  std::array<std::uint8_t, 5> head{};
  std::vector<std::uint8_t> body;
  bool got = false;
  asio::error_code err;
  asio::async_read(s, asio::buffer(head), [&](const asio::error_code& e, std::size_t) {
    if (e) {
      err = e;
      got = true;
      return;
    }
    body.resize(get32(head.data() + 1));
    asio::async_read(s, asio::buffer(body), [&](const asio::error_code& e2, std::size_t) {
      err = e2;
      got = true;
    });
  });
  if (!run_until(io, [&] { return got; }, deadline)) fail("rank 0 did not answer within " + seconds(timeout));
  if (err) fail("rank 0 closed the connection: " + err.message());
  if (head[0] != 0) fail(std::string(body.begin(), body.end()));
  Membership m;
  m.rank = rank;
  m.world = world;
  m.job = job;
  std::size_t i = 0;
  while (i + 3 <= body.size() && static_cast<int>(m.peers.size()) < world) {
    PeerAddress pa;
    pa.port = static_cast<std::uint16_t>(body[i] | (body[i + 1] << 8));
    const std::size_t n = body[i + 2];
    pa.host.assign(body.begin() + static_cast<long>(i + 3), body.begin() + static_cast<long>(i + 3 + n));
    i += 3 + n;
    m.peers.push_back(pa);
  }
  if (static_cast<int>(m.peers.size()) != world) fail("rank 0 sent a malformed address table");
  return m;
}

}  // namespace

Membership rendezvous(asio::io_context& io, const RendezvousOptions& o, std::uint16_t data_port) {
  int rank = 0, world = 0;
  resolve_identity(o, &rank, &world);
  const std::string token = !o.token.empty() ? o.token : (env("COLLIE_JOB_TOKEN") ? env("COLLIE_JOB_TOKEN") : "");
  const std::uint64_t job = job_id(token);
  const std::string& m = o.init_method;
  if (m.rfind("file://", 0) == 0) return by_file(m.substr(7), rank, world, job, data_port, o.timeout_ns);
  std::string addr;
  int port = -1;
  if (m == "env://") {
    const char* a = env("MASTER_ADDR");
    const char* p = env("MASTER_PORT");
    if (!a || !p) usage("env:// needs MASTER_ADDR and MASTER_PORT");
    addr = a;
    port = std::atoi(p);
  } else if (m.rfind("tcp://", 0) == 0) {
    const std::string hp = m.substr(6);
    const auto colon = hp.rfind(':');
    if (colon == std::string::npos) usage("tcp:// needs HOST:PORT, not '" + hp + "'");
    addr = hp.substr(0, colon);
    port = std::atoi(hp.substr(colon + 1).c_str());
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
    one.job = job;
    one.peers.push_back(PeerAddress{addr, data_port});
    return one;
  }
  return rank == 0 ? as_master(io, addr, static_cast<std::uint16_t>(port), world, job, data_port, o.timeout_ns)
                   : as_worker(io, addr, static_cast<std::uint16_t>(port), rank, world, job, data_port, o.timeout_ns);
}

}  // namespace collie::tcp
