#!/bin/bash
echo "NODEFILE:"; cat $PBS_NODEFILE
echo "NCPUS=$NCPUS OMP_NUM_THREADS=$OMP_NUM_THREADS"
/work/main/.venv/bin/mpirun -np 2 --map-by ppr:2:node --host $(sort -u $PBS_NODEFILE | head -1):2 hostname
echo "mpirun exit $?"
/work/main/.venv/bin/mpirun -np 2 --map-by ppr:2:node hostname
echo "mpirun2 exit $?"
