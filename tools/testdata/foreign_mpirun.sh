#!/bin/sh
# A launcher of another MPI, as collie-mpi-worker sees one: it starts the
# N copies of the program with none of the worker's own MPI's wiring, so
# each comes up alone (rank 0 of 1), as under a foreign mpirun. collie must
# say so instead of waiting for ranks that never join (tools/CMakeLists.txt).
#   foreign_mpirun.sh --version           an MPICH launcher's banner
#   foreign_mpirun.sh -n N [-x VAR]... PROGRAM
if [ "$1" = "--version" ]; then
  printf 'HYDRA build details:\n    Version:                                 9.9.9\n'
  exit 0
fi
n=1
while [ $# -gt 1 ]; do
  case "$1" in
    -n) n=$2; shift 2 ;;
    -x) shift 2 ;;
    *) shift ;;
  esac
done
i=0
while [ "$i" -lt "$n" ]; do
  "$1" &
  i=$((i + 1))
done
wait
