# h5dcp_add_mpi_test(NAME name TARGET tgt RANKS 1 2 3 4 [CHECK_RANKS] [ARGS ...] [LABELS ...] [TIMEOUT s]
#                    [FIXTURES_SETUP f] [FIXTURES_REQUIRED f])
#
# One CTest test per rank count, named mpi.<name>.np<N>, run through
# mpiexec with every MPIEXEC_* variable, PROCESSORS set so ctest -j does not
# oversubscribe more than asked, and the OpenMPI environment the project
# needs: ROMIO as the MPI-IO component (see docs/FORMAT.md, "MPI-IO"),
# oversubscription with yielding (2-core machines run 4 ranks), and running
# as root in containers. Other MPIs ignore the OMPI_* variables.
# Exit code 77 is a skip (SKIP_RETURN_CODE): the shared MPI test main returns
# it when every selected test skipped; LABELS name why a test may skip
# (skips_without_gpu, skips_without_root: scripts/check-skips.sh).
# CHECK_RANKS passes --h5dcp-expected-ranks=N to binaries built with the
# shared MPI test main, which fail when mpiexec started another count.

set(H5DCP_MPI_TEST_ENVIRONMENT
  OMPI_MCA_io=romio321
  OMPI_MCA_rmaps_base_oversubscribe=1
  OMPI_MCA_mpi_yield_when_idle=1
  OMPI_ALLOW_RUN_AS_ROOT=1
  OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  CACHE STRING "Environment of every MPI test")
# Tests with short deadlines (1 s stalls: mpi.failure, mpi.async_save,
# reliability.quick) scale them, and the stalls past them, by
# H5DCP_TEST_TIME_SCALE: other tests run beside them on 2 cores (2), and
# ASan+UBSan slow every rank further (4), so a rank can fall seconds behind
# the others without any stall.
if(H5DCP_SANITIZE)
  list(APPEND H5DCP_MPI_TEST_ENVIRONMENT H5DCP_TEST_TIME_SCALE=4)
else()
  list(APPEND H5DCP_MPI_TEST_ENVIRONMENT H5DCP_TEST_TIME_SCALE=2)
endif()

function(h5dcp_add_mpi_test)
  cmake_parse_arguments(A "CHECK_RANKS" "NAME;TARGET;TIMEOUT" "RANKS;ARGS;LABELS;FIXTURES_SETUP;FIXTURES_REQUIRED" ${ARGN})
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 300)
  endif()
  foreach(np IN LISTS A_RANKS)
    set(test mpi.${A_NAME}.np${np})
    set(extra_args ${A_ARGS})
    if(A_CHECK_RANKS)
      list(APPEND extra_args --h5dcp-expected-ranks=${np})
    endif()
    add_test(NAME ${test}
      COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${MPIEXEC_PREFLAGS}
              $<TARGET_FILE:${A_TARGET}> ${MPIEXEC_POSTFLAGS} ${extra_args})
    set_tests_properties(${test} PROPERTIES
      PROCESSORS ${np}
      TIMEOUT ${A_TIMEOUT}
      SKIP_RETURN_CODE 77
      LABELS "mpi;np${np};${A_LABELS}"
      ENVIRONMENT "${H5DCP_MPI_TEST_ENVIRONMENT}")
    if(A_FIXTURES_SETUP)
      set_tests_properties(${test} PROPERTIES FIXTURES_SETUP "${A_FIXTURES_SETUP}")
    endif()
    if(A_FIXTURES_REQUIRED)
      set_tests_properties(${test} PROPERTIES FIXTURES_REQUIRED "${A_FIXTURES_REQUIRED}")
    endif()
  endforeach()
endfunction()
