# Runs `runledger purge` with bad arguments: each exits 2 with its reason
# on stderr before any connection is tried (DATABASE_URL names a port
# nothing listens on).
# Usage: cmake -DRUNLEDGER=<binary> -P cli_purge.cmake

set(ENV{DATABASE_URL} "postgresql://127.0.0.1:1/none?connect_timeout=2")

function(run want_rc want_err)
    execute_process(COMMAND ${RUNLEDGER} purge ${ARGN}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    string(REPLACE ";" " " args "${ARGN}")
    if(NOT rc STREQUAL want_rc)
        message(FATAL_ERROR
            "runledger purge ${args}: exit ${rc}, want ${want_rc}\n${out}${err}")
    endif()
    if(NOT err MATCHES "${want_err}")
        message(FATAL_ERROR
            "runledger purge ${args}: stderr \"${err}\" does not match "
            "\"${want_err}\"")
    endif()
endfunction()

set(ERR "^runledger purge: ")
run(2 "${ERR}--older-than or --tombstones-older-than is required")
run(2 "${ERR}--older-than needs a value" --older-than)
foreach(bad 30 d 30x 0d -5d 1.5d 30dd " 30d" 99999999999999999999d)
    run(2 "${ERR}--older-than ${bad}: not a duration" --older-than "${bad}")
endforeach()
foreach(bad running pending unknown awaiting_approval "completed,running"
            "completed,completed" ",")
    run(2 "${ERR}--status: " --older-than 30d --status "${bad}")
endforeach()
foreach(bad 0 -1 x 100001 10k)
    run(2 "${ERR}--batch ${bad}: not a number" --older-than 30d --batch ${bad})
endforeach()
run(2 "${ERR}unknown option --bogus" --older-than 30d --bogus)
run(2 "${ERR}unexpected argument" --older-than 30d extra)
run(0 "^$" --help)
# Good arguments get as far as the connection, which fails: exit 1.
run(1 "${ERR}could not connect" --older-than 12h --status failed,completed
    --batch 10)
