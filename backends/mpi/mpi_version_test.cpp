// The banners of the MPI libraries and launchers collie meets, read in a
// few words: Open MPI's and MPICH's as Debian 12 ships them, and the forms
// of MVAPICH and Intel MPI.
#include "backends/mpi/mpi_version.h"

#include <gtest/gtest.h>

namespace collie::mpi {
namespace {

TEST(MpiVersion, LibraryBannersOfOpenMpiMpichMvapichAndIntel) {
  EXPECT_EQ(library_banner("Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022"),
            "Open MPI v4.1.4");
  // MPICH's is a page: its version, release date, device and configure line.
  EXPECT_EQ(library_banner("MPICH Version:\t4.0.2\nMPICH Release date:\tThu Apr  7 12:34:45 CDT 2022\nMPICH ABI:\t14:2:2\n"
                           "MPICH Device:\tch4:ucx\nMPICH configure:\t--build=x86_64-linux-gnu --prefix=/usr"),
            "MPICH 4.0.2");
  EXPECT_EQ(library_banner("MVAPICH2 Version      :\t2.3.7\nMVAPICH2 Release date :\tWed March 02 22:00:00 EST 2022"),
            "MVAPICH2 2.3.7");
  EXPECT_EQ(library_banner("Intel(R) MPI Library 2021.9 for Linux* OS\n"), "Intel(R) MPI Library 2021.9");
  EXPECT_EQ(library_banner("Some MPI 1.0\nmore"), "Some MPI 1.0");
}

TEST(MpiVersion, LauncherBannersAndFamilies) {
  EXPECT_EQ(launcher_banner("mpirun (Open MPI) 4.1.4\n\nReport bugs to http://www.open-mpi.org/community/help/\n"),
            "Open MPI 4.1.4");
  EXPECT_EQ(launcher_banner("HYDRA build details:\n    Version:                                 4.0.2\n"
                            "    Release Date:                            Thu Apr  7 12:34:45 CDT 2022\n"),
            "MPICH 4.0.2 (Hydra)");
  EXPECT_EQ(launcher_banner("Intel(R) MPI Library for Linux* OS, Version 2021.9 Build 20230307 (id: d82b3071db)\n"),
            "Intel(R) MPI Library 2021.9");
  EXPECT_EQ(launcher_banner("usage: something else"), "");
  EXPECT_EQ(mpi_family("Open MPI v4.1.4"), "Open MPI");
  EXPECT_EQ(mpi_family("MPICH 4.0.2 (Hydra)"), "MPICH");
  EXPECT_EQ(mpi_family("MVAPICH2 2.3.7"), "MVAPICH");
  EXPECT_EQ(mpi_family("Intel(R) MPI Library 2021.9"), "Intel MPI");
  EXPECT_EQ(mpi_family(""), "");
}

}  // namespace
}  // namespace collie::mpi
