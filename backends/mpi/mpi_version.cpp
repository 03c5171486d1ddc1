#include "backends/mpi/mpi_version.h"

#include <regex>

namespace collie::mpi {

namespace {

std::string first_line(const std::string& text) {
  std::string t = text.substr(0, text.find('\n'));
  while (!t.empty() && (t.back() == '\r' || t.back() == ' ' || t.back() == '\t')) t.pop_back();
  return t;
}

// The first match of `pattern`'s group 1 in `text`, or empty.
std::string capture(const std::string& text, const char* pattern) {
  std::smatch m;
  const std::regex re(pattern);
  return std::regex_search(text, m, re) ? m[1].str() : std::string();
}

}  // namespace

std::string library_banner(const std::string& text) {
  if (const std::string v = capture(text, R"(Open MPI (v[0-9][^,\s]*))"); !v.empty()) return "Open MPI " + v;
  if (const std::string v = capture(text, R"(MVAPICH2? Version\s*:\s*([^\s]+))"); !v.empty()) return "MVAPICH2 " + v;
  if (const std::string v = capture(text, R"(MPICH Version\s*:\s*([^\s]+))"); !v.empty()) return "MPICH " + v;
  if (const std::string v = capture(text, R"((Intel\(R\) MPI Library [0-9][^\s,]*))"); !v.empty()) return v;
  return first_line(text);
}

std::string launcher_banner(const std::string& text) {
  if (const std::string v = capture(text, R"(\(Open MPI\) ([0-9][^\s]*))"); !v.empty()) return "Open MPI " + v;
  if (const std::string v = capture(text, R"(\(OpenRTE\) ([0-9][^\s]*))"); !v.empty()) return "Open MPI " + v;
  if (const std::string v = capture(text, R"(Intel\(R\) MPI Library[^,\n]*, Version ([0-9][^\s]*))"); !v.empty())
    return "Intel(R) MPI Library " + v;
  if (text.find("HYDRA build details") != std::string::npos) {
    const std::string v = capture(text, R"(Version:\s*([0-9][^\s]*))");
    const bool mvapich = text.find("mvapich") != std::string::npos || text.find("MVAPICH") != std::string::npos;
    return std::string(mvapich ? "MVAPICH2 " : "MPICH ") + (v.empty() ? "?" : v) + " (Hydra)";
  }
  return {};
}

std::string mpi_family(const std::string& banner) {
  if (banner.find("Open MPI") != std::string::npos) return "Open MPI";
  if (banner.find("MVAPICH") != std::string::npos) return "MVAPICH";
  if (banner.find("Intel") != std::string::npos) return "Intel MPI";
  if (banner.find("MPICH") != std::string::npos) return "MPICH";
  return {};
}

}  // namespace collie::mpi
