// Deadlock diagnosis: who waits for whom, and why.
//
// Input: every rank's state when nothing could move -- finished, failed,
// crashed, or blocked with the receives and rendezvous sends it waits on --
// plus what the backend broke on purpose (lost messages, crashed ranks).
// Output: a report that names, per blocked rank, the op, group, sequence
// number, algorithm step, awaited peer/tag/size and since when; the wait-for
// graph with its cycles; the root cause of each wait where one can be
// named (a crashed rank, a dropped message, a partition, a rank that never
// called the collective or finished without sending); the unmatched sends;
// and the command that replays the run. Also the graph in Graphviz form.
// A pure function of its input: the same run gives the same bytes.
#pragma once

#include <string>
#include <vector>

#include "core/message_engine.h"

namespace collie {

// Something a backend did on purpose that explains a wait.
struct InjectedFault {
  enum class Kind { kLostFrame, kCrash } kind = Kind::kLostFrame;
  Nanos time = 0;
  int src = -1;  // kCrash: the crashed rank
  int dst = -1;
  FrameHeader header;  // kLostFrame
  std::string text;    // how to say it ("t=..: message 0->1 (tag 3) dropped by fault '...'")
};

struct RankSnapshot {
  bool finished = false;   // the program returned
  std::string error;       // it failed with this (finished too)
  bool crashed = false;
  std::vector<MessageEngine::Wait> waits;
  std::vector<MessageEngine::RunningCollective> collectives;
  std::vector<MessageEngine::Unmatched> unmatched;  // arrived here, never received
  std::vector<MessageEngine::HeldForOrder> held;    // arrived, held for a frame that never came
  // Sends whose completion the transport still owes (MessageEngine::
  // owed_completions()): when nothing can move, each is the transport's
  // fault, and a rank waiting on one is blocked by it.
  std::vector<std::string> owed;
};

struct DiagnosisInput {
  Nanos now = 0;
  std::string label;                  // "seed 7"
  std::string replay;                 // the command that replays the run
  std::vector<RankSnapshot> ranks;
  std::vector<InjectedFault> faults;
};

struct Diagnosis {
  std::string report;                    // human-readable, ends with the replay command
  std::string dot;                       // the wait-for graph (Graphviz)
  std::vector<int> blocked;              // ranks that never finished
  std::vector<std::vector<int>> cycles;  // each as ranks in order, smallest first
  std::vector<std::string> causes;       // root causes, one line each
};

Diagnosis diagnose(const DiagnosisInput& in);

}  // namespace collie
