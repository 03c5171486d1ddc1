// A rank process's report of a multi-process scenario run (collie run
// --backend tcp): how its program ended, what it printed, and its records
// for the checks. The parent merges every rank's report and judges the run
// exactly as it judges an in-process one.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/transport.h"
#include "scenario/record.h"
#include "scenario/runner.h"

namespace collie::scenario {

struct RankReport {
  int rank = -1;
  bool finished = false;     // the program returned or threw
  bool failed = false;       // it threw: then the three below say what
  std::string error_text;
  ErrorKind error_kind = ErrorKind::kUsage;
  bool error_is_collie = false;  // a collie::Error (else another exception)
  Nanos end_time = 0;
  std::vector<OutputLine> output;
  std::vector<std::string> failures;
  Recorder rec;
};

// CBOR (nlohmann::json), tensors as binary.
std::vector<std::uint8_t> encode_report(const RankReport& r);
// Throws std::runtime_error when the bytes are not a report.
RankReport decode_report(const std::vector<std::uint8_t>& bytes);

// Adds `from`'s records to `into` (each rank recorded only its own part).
void merge_records(Recorder& into, const Recorder& from);

}  // namespace collie::scenario
