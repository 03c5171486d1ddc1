// collie run ... -- COMMAND: an unmodified torch.distributed program on
// collie (script/script_run.h). tools/collie.cpp hands `collie run` here
// when its arguments contain `--`.
#pragma once

namespace collie::tools {

// Parses `collie run [FLAGS] -- COMMAND...` (argv as main() got it) and runs
// the program. Returns the exit code: 0 the run passed, 1 it failed, 2
// usage (a bad flag, no command, a missing script, a program that never
// calls init_process_group).
int run_script_command(int argc, char** argv);

// Whether argv is `collie run ... -- ...`.
bool is_script_run(int argc, char** argv);

}  // namespace collie::tools
