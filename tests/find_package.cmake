# Installs the build tree into WORK_DIR/prefix, then configures, builds and runs
# the consumer project against it with find_package(zkasio); then configures
# the consumer with zkasio's sources as a dependency (add_subdirectory), which
# must make the library alone (checked by the consumer's CMakeLists.txt), over
# the same Asio (OVER_BOOST: the build's ZKASIO_BOOST_ASIO); not built: the
# library's build is the one above.
file(REMOVE_RECURSE "${WORK_DIR}")
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "failed (${status}): ${ARGN}\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

run(${CMAKE_COMMAND} --install "${BINARY_DIR}" --prefix "${WORK_DIR}/prefix")
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/build"
    -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
run(${CMAKE_COMMAND} --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
if(NOT output MATCHES "zookeeper: node does not exist")
  message(FATAL_ERROR "unexpected consumer output: ${output}")
endif()
message(STATUS "consumer: ${output}")
run(${CMAKE_COMMAND} -S "${CONSUMER_DIR}" -B "${WORK_DIR}/dependency" -DZKASIO_SOURCE_DIR=${SOURCE_DIR}
    -DZKASIO_BOOST_ASIO=${OVER_BOOST})
message(STATUS "as a dependency: the library alone")
