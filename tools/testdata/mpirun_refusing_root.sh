#!/bin/sh
# What Open MPI's mpirun prints, and how it exits, when run as root without
# --allow-run-as-root (for the test of collie's error).
echo "--------------------------------------------------------------------------"
echo "mpirun has detected an attempt to run as root."
echo ""
echo "Running as root is *strongly* discouraged as any mistake (e.g., in"
echo "defining TMPDIR) or bug can result in catastrophic damage to the OS"
echo "--------------------------------------------------------------------------"
exit 1
