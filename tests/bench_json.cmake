# Runs `zkasio-bench SUBCOMMAND --json --rounds 3` against a server started
# for the purpose, and checks that stdout is exactly one JSON object with every
# expected key, each a latency object.
set(work "${WORK_DIR}/bench-${SUBCOMMAND}")
file(REMOVE_RECURSE "${work}")
# The shell owns the server: it is stopped when the bench ends, and by the
# watchdog if the shell is killed.
execute_process(
  COMMAND bash -c [[
    zk=$1 dir=$2; shift 2
    trap '"$zk" stop "$dir" >/dev/null' EXIT
    hosts=$("$zk" start "$dir" --owner-pid $$) || exit 1
    "$@" --hosts "$hosts"
  ]] bench-json "${SOURCE_DIR}/scripts/zk" "${work}" "${BENCH}" ${SUBCOMMAND} --rounds 3 --json
  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status TIMEOUT 120)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "zkasio-bench ${SUBCOMMAND} failed (${status}): ${err}")
endif()
string(STRIP "${out}" out)
string(JSON type ERROR_VARIABLE json_error TYPE "${out}")
if(json_error OR NOT type STREQUAL "OBJECT")
  message(FATAL_ERROR "not one JSON object on stdout: ${out}")
endif()
foreach(key IN LISTS KEYS)
  foreach(field p50 p90 p99 max n)
    string(JSON value ERROR_VARIABLE json_error GET "${out}" ${key} ${field})
    if(json_error)
      message(FATAL_ERROR "key ${key}.${field} missing in: ${out}")
    endif()
  endforeach()
  string(JSON n GET "${out}" ${key} n)
  if(NOT n EQUAL 3)
    message(FATAL_ERROR "${key}.n is ${n}, not 3: ${out}")
  endif()
endforeach()
message(STATUS "${SUBCOMMAND}: ${out}")
