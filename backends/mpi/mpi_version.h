// What an MPI library and an MPI launcher say they are, in a few words,
// from the banners they print -- so that reports name the implementation
// ("MPICH 4.0.2", not its 2 KB configure line) and a worker built against
// one MPI started by another MPI's mpirun is diagnosed in those words.
// Pure text functions: nothing here needs an MPI library.
#pragma once

#include <string>

namespace collie::mpi {

// From MPI_Get_library_version's text: "Open MPI v4.1.4", "MPICH 4.0.2",
// "MVAPICH2 2.3.7", "Intel(R) MPI Library 2021.9 for Linux* OS"; else the
// text's first line.
std::string library_banner(const std::string& text);

// From `mpirun --version`: "Open MPI 4.1.4", "MPICH 4.0.2 (Hydra)",
// "Intel(R) MPI Library 2021.9"; empty when the text is none of these.
std::string launcher_banner(const std::string& text);

// The implementation family a banner names -- "Open MPI", "MPICH",
// "MVAPICH", "Intel MPI" -- or empty. (Intel MPI and MVAPICH are MPICH
// derivatives but not ABI-compatible launchers of each other's workers in
// general, so they are families of their own.)
std::string mpi_family(const std::string& banner);

}  // namespace collie::mpi
