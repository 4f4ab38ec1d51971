# Runs TEST_BINARY with ZKASIO_TEST_HOSTS=HOSTS (where nothing listens) and
# checks that it fails at once with a message naming the address.
set(ENV{ZKASIO_TEST_HOSTS} "${HOSTS}")
execute_process(COMMAND "${TEST_BINARY}" RESULT_VARIABLE status OUTPUT_VARIABLE out
                ERROR_VARIABLE out TIMEOUT 10)
if(status EQUAL 0)
  message(FATAL_ERROR "expected a failure with ZKASIO_TEST_HOSTS=${HOSTS}, got success:\n${out}")
endif()
if(NOT out MATCHES "${HOSTS}")
  message(FATAL_ERROR "the failure does not name ${HOSTS} (status ${status}):\n${out}")
endif()
message(STATUS "failed as expected (${status}): ${out}")
