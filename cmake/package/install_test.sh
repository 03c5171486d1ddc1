#!/usr/bin/env bash
# The installed collie, as a user gets it: install into a fresh prefix, build
# the example transport plugin and the TCP example out of tree against
# find_package(collie), then run the installed collie away from the source
# tree -- its conformance suite (scenarios from the prefix) on the plugin,
# and `collie launch` on the example.
# usage: install_test.sh BUILD_DIR SOURCE_DIR CMAKE_GENERATOR
set -euo pipefail
build=$1 src=$2 generator=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" > /dev/null

mkdir -p "$work/consumer"
cp "$src/backends/plugins/loopback.cpp" "$src/examples/tcp_tutorial.cpp" "$work/consumer/"
cat > "$work/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.25)
project(consumer CXX)
find_package(collie 0.1 REQUIRED)
foreach(variant my_loopback my_lossy_loopback)
  add_library(${variant} MODULE loopback.cpp)
  target_link_libraries(${variant} PRIVATE collie::plugin)
  set_target_properties(${variant} PROPERTIES PREFIX "")
  target_compile_definitions(${variant} PRIVATE LOOPBACK_NAME="${variant}")
endforeach()
target_compile_definitions(my_lossy_loopback PRIVATE LOOPBACK_BUG=LOOPBACK_DROP)
add_executable(my_tcp_tutorial tcp_tutorial.cpp)
target_link_libraries(my_tcp_tutorial PRIVATE collie::tcp)
CMAKE
cmake -S "$work/consumer" -B "$work/consumer/build" -G "$generator" -DCMAKE_PREFIX_PATH="$prefix" > /dev/null
cmake --build "$work/consumer/build" -j2 > /dev/null

cd "$work"  # nowhere near the source tree
collie=$prefix/bin/collie
plugins=$work/consumer/build
unset COLLIE_DATA_DIR
out=$("$collie" conformance --backend-plugin "$plugins/my_loopback.so" --backend my_loopback -q) || {
  echo "$out"; echo "FAIL: the correct plugin failed the installed suite"; exit 1; }
echo "$out" | tail -3
grep -q ", 0 failed" <<<"$out" || { echo "FAIL: no '0 failed' in the summary"; exit 1; }
# Scenarios ran, from the prefix: a broken plugin's scenario replays name them there.
out=$("$collie" conformance --backend-plugin "$plugins/my_lossy_loopback.so" --backend my_lossy_loopback -q) && {
  echo "FAIL: the lossy plugin passed"; exit 1; }
grep -q "replay: collie run $prefix/share/collie/scenarios/" <<<"$out" || {
  echo "$out"; echo "FAIL: no scenario was run from $prefix/share/collie/scenarios"; exit 1; }
echo "the lossy plugin fails, with scenarios from $prefix/share/collie"
"$collie" launch -n 2 -- "$plugins/my_tcp_tutorial" > launch.txt 2>&1 || { cat launch.txt; echo "FAIL: launch"; exit 1; }
tail -2 launch.txt
echo "PASS"
