// Rendezvous: how the processes of a job find each other, as torch's
// init_process_group does.
//
// init methods:
//   env://            MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE (LOCAL_RANK
//                     optional); RANK/WORLD_SIZE fall back to Slurm's
//                     SLURM_PROCID/SLURM_NTASKS and Open MPI's
//                     OMPI_COMM_WORLD_RANK/SIZE, so srun and mpirun work.
//   tcp://HOST:PORT   the master's address; rank and world given explicitly.
//   file://PATH       a file on a shared file system; no master.
// With env:// and tcp://, rank 0 hosts the store: every rank connects to it
// and registers (rank, world, its data port), proving the job token by
// HMAC challenge-response (auth.h); when all have arrived, rank 0 sends
// everyone the table of addresses, itself proven the same way. If some never arrive, every
// waiting rank fails after the timeout with the list of missing ranks
// ("3/4 ranks joined; missing: 2"). A wrong world size, a rank that joins
// twice, or a process of another job (different COLLIE_JOB_TOKEN) is
// refused with a message naming it.
#pragma once

#include <asio.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "backends/tcp/rendezvous_wire.h"
#include "core/transport.h"

namespace collie::tcp {

struct RendezvousOptions {
  std::string init_method = "env://";
  int rank = -1;                   // -1: from the environment
  int world = -1;                  // -1: from the environment
  std::string token;               // empty: COLLIE_JOB_TOKEN from the environment, if set
  Nanos timeout_ns = 30'000'000'000;  // how long to wait for every rank
  // Rank 0: called once, on the rendezvous's thread, as soon as its
  // listener accepts connections (a readiness signal to wait on instead of
  // polling). Others never call it.
  std::function<void()> on_listening;
};

struct Membership {
  int rank = -1;
  int world = 0;
  std::vector<PeerAddress> peers;   // by rank
};

// Who am I and where is everyone: resolves the init method and environment
// (throws Error(kUsage) naming what is missing), then exchanges addresses.
// `data_port` is this rank's listening port for peer connections.
Membership rendezvous(asio::io_context& io, const RendezvousOptions& options, std::uint16_t data_port);

// The rank/world the init method and environment give, without connecting.
void resolve_identity(const RendezvousOptions& options, int* rank, int* world);

// The job token: options.token, else COLLIE_JOB_TOKEN, else empty.
std::string job_token(const RendezvousOptions& options);

}  // namespace collie::tcp
