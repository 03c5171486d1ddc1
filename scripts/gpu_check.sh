#!/usr/bin/env bash
# The GPU half of collie's checks, for a machine with a GPU and nothing else
# installed (issue #16).
#
#   scripts/gpu_check.sh bundle DIR   (on the development machine, after a
#                                      build with nvcc) makes DIR: the GPU test
#                                      binaries, the shared libraries they need
#                                      that a bare machine may lack, and run.sh
#   DIR/run.sh                        (on the GPU machine) runs every part,
#                                      writes DIR/summary.txt with a verdict
#                                      per part, exits non-zero on any failure
#
# What it covers today: the reduction kernels against the host reference on
# the device (every dtype x op, aligned and not); CudaRuntime against the
# device runtime contract (cuda_runtime_test: the tests HostRuntime passes
# too); the CUDA transport on CudaRuntime (cuda_transport_gpu_test: every
# collective with every algorithm and p2p traffic on device tensors, a
# crash, a timeout, a deadlock; its HostRuntime-only tests are filtered
# out); each under compute-sanitizer memcheck and racecheck when the
# toolkit's sanitizer is there. Then the backends as users name them, with
# the collie command itself: `collie conformance --backend cuda` (the whole
# suite on CudaRuntime; also a subset under compute-sanitizer memcheck),
# `--backend nccl` (NCCL through collie-nccl-worker; on one GPU the worlds of
# two ranks and more skip in NCCL's words), `--backend torch:nccl` (where the
# machine's python3 has torch with CUDA; else a visible skip), and `collie
# bench` on cuda (with the device-to-device copy rate) and nccl.
set -euo pipefail
cmd=${1:-}
if [[ "$cmd" == "bundle" ]]; then
  out=${2:?usage: gpu_check.sh bundle DIR}
  root=$(cd "$(dirname "$0")/.." && pwd)
  build=${BUILD_DIR:-$root/build}
  mkdir -p "$out/bin" "$out/lib"
  for t in backends/cuda_kernels_test backends/cuda_elementwise_test backends/cuda_runtime_test \
           backends/cuda_transport_gpu_test; do
    [[ -x "$build/$t" ]] || { echo "gpu_check: $build/$t is missing (build with nvcc on PATH first)" >&2; exit 2; }
    cp "$build/$t" "$out/bin/"
    # Libraries outside glibc and the CUDA driver: a bare machine may lack them.
    ldd "$build/$t" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux|libcuda)\.so' |
      while read -r lib; do cp -L "$lib" "$out/lib/"; done
  done
  # The collie command, its NCCL worker, the scenarios and the torch driver
  # (COLLIE_DATA_DIR points collie at them).
  for t in tools/collie tools/collie-nccl-worker; do
    [[ -x "$build/$t" ]] || { echo "gpu_check: $build/$t is missing (build with nvcc on PATH first)" >&2; exit 2; }
    cp "$build/$t" "$out/bin/"
    ldd "$build/$t" | awk '/=> \// {print $3}' | grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux|libcuda)\.so' |
      while read -r lib; do cp -L "$lib" "$out/lib/"; done
  done
  mkdir -p "$out/share/backends/torch"
  cp -r "$root/scenarios" "$out/share/"
  cp "$root/backends/torch/collie_torch_worker.py" "$out/share/backends/torch/"
  # libnccl is loaded at run time: take the toolkit's along.
  for lib in /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2; do
    [[ -e "$lib" ]] && { cp -L "$lib" "$out/lib/"; break; }
  done
  cp "$0" "$out/gpu_check.sh"
  cat > "$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the bundle's GPU checks; see gpu_check.sh.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
summary=$here/summary.txt
: > "$summary"
failed=0
part() {  # part NAME COMMAND...
  local name=$1; shift
  if "$@" > "$here/$name.log" 2>&1; then
    if grep -q "SKIPPED" "$here/$name.log"; then echo "SKIP $name: $(grep -m1 -A1 'Skipped' "$here/$name.log" | tail -1)" >> "$summary"; failed=1
    else echo "PASS $name" >> "$summary"; fi
  else
    echo "FAIL $name (see $name.log)" >> "$summary"; failed=1
  fi
}
nvidia-smi -L > "$here/gpus.txt" 2>&1 || echo "no nvidia-smi" > "$here/gpus.txt"
# The transport's tests that need HostRuntime (its seeds, its broken variants) are not GPU tests.
transport_filter='--gtest_filter=-CudaTransportBugs.*:EachBug/*:CudaTransport.ASeedReplaysTheSameInterleaving'
part elementwise "$here/bin/cuda_elementwise_test"
part kernels "$here/bin/cuda_kernels_test"
part runtime "$here/bin/cuda_runtime_test"
part transport "$here/bin/cuda_transport_gpu_test" "$transport_filter"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [[ -n "$sanitizer" ]]; then
  part kernels_memcheck "$sanitizer" --tool memcheck --error-exitcode 1 "$here/bin/cuda_kernels_test"
  part kernels_racecheck "$sanitizer" --tool racecheck --error-exitcode 1 "$here/bin/cuda_kernels_test"
  part runtime_memcheck "$sanitizer" --tool memcheck --error-exitcode 1 "$here/bin/cuda_runtime_test"
  part transport_memcheck "$sanitizer" --tool memcheck --error-exitcode 1 "$here/bin/cuda_transport_gpu_test" "$transport_filter"
  part transport_racecheck "$sanitizer" --tool racecheck --error-exitcode 1 "$here/bin/cuda_transport_gpu_test" "$transport_filter"
  part transport_synccheck "$sanitizer" --tool synccheck --error-exitcode 1 "$here/bin/cuda_transport_gpu_test" "$transport_filter"
  # A read of device memory nothing wrote yet: what a missing wait looks like on a GPU.
  part transport_initcheck "$sanitizer" --tool initcheck --error-exitcode 1 "$here/bin/cuda_transport_gpu_test" "$transport_filter"
else
  echo "FAIL sanitizer: compute-sanitizer not found" >> "$summary"; failed=1
fi
# The backends through the collie command.
export COLLIE_DATA_DIR=$here/share COLLIE_NCCL_LIBRARY=$here/lib/libnccl.so.2
collie=$here/bin/collie
part conformance_cuda "$collie" conformance --backend cuda --junit "$here/conformance_cuda.xml"
if [[ -n "$sanitizer" ]]; then
  part conformance_cuda_memcheck "$sanitizer" --tool memcheck --error-exitcode 1 \
    "$collie" conformance --backend cuda --filter '^(all_reduce|p2p|reduce_scatter|all_to_all)/'
fi
part conformance_nccl "$collie" conformance --backend nccl --junit "$here/conformance_nccl.xml"
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2> /dev/null; then
  part conformance_torch_nccl "$collie" conformance --backend torch:nccl --python "$(command -v python3)"
else
  echo "SKIP conformance_torch_nccl: this machine's python3 has no torch with CUDA" >> "$summary"
fi
part bench_cuda "$collie" bench --backend cuda -n 2 -b 8 -e 256M
part bench_cuda_one_rank "$collie" bench --backend cuda -n 1 -b 8 -e 256M
part bench_nccl "$collie" bench --backend nccl -n 1 -b 8 -e 256M
cat "$here/gpus.txt" "$summary"
exit $failed
RUN
  chmod +x "$out/run.sh"
  echo "gpu_check: bundle in $out; on the GPU machine run $out/run.sh"
  exit 0
fi
echo "usage: scripts/gpu_check.sh bundle DIR, then DIR/run.sh on a GPU machine" >&2
exit 2
