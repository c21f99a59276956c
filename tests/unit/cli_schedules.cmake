# Runs `runledger schedules` with bad arguments: each exits 2 with its
# reason on stderr and stores nothing (DATABASE_URL names a port nothing
# listens on, so a command that got as far as the ledger would exit 1).
# Usage: cmake -DRUNLEDGER=<binary> -DREQUEST=<file> -P cli_schedules.cmake

set(ENV{DATABASE_URL} "postgresql://127.0.0.1:1/none?connect_timeout=2")
set(ENV{RL_TEST_CRON_SECONDS} "")

function(run want_rc want_err)
    execute_process(COMMAND ${RUNLEDGER} schedules ${ARGN}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    string(REPLACE ";" " " args "${ARGN}")
    if(NOT rc STREQUAL want_rc)
        message(FATAL_ERROR
            "runledger schedules ${args}: exit ${rc}, want ${want_rc}\n${out}${err}")
    endif()
    if(NOT err MATCHES "${want_err}")
        message(FATAL_ERROR
            "runledger schedules ${args}: stderr \"${err}\" does not match "
            "\"${want_err}\"")
    endif()
endfunction()

set(ERR "^runledger schedules: ")
set(REQ "{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]}")
set(OK --job j --tenant t --version v1 --window P1D --request ${REQ})
run(2 "${ERR}set needs --job" set daily --cron "@daily")
run(2 "${ERR}invalid cron minute field" set daily ${OK} --cron "61 * * * *")
run(2 "${ERR}a cron expression has five fields" set daily ${OK}
    --cron "0 0 * * * *")
run(2 "${ERR}cron expression .* never matches" set daily ${OK}
    --cron "0 0 30 2 *")
run(2 "${ERR}invalid time zone name" set daily ${OK} --cron "@daily"
    --timezone "../etc/passwd")
run(2 "${ERR}could not open /usr/share/zoneinfo/Mars/Base" set daily ${OK}
    --cron "@daily" --timezone Mars/Base)
run(2 "${ERR}--catchup must be skip, latest or all" set daily ${OK}
    --cron "@daily" --catchup some)
run(2 "${ERR}--catchup-window must be a duration" set daily ${OK}
    --cron "@daily" --catchup-window 5m)
run(2 "${ERR}a schedule name is" set "Bad Name" ${OK} --cron "@daily")
run(2 "${ERR}show needs a schedule name" show)
run(2 "${ERR}list takes no name" list daily)
run(2 "${ERR}backfill needs --from and --to" backfill daily)
run(2 "${ERR}--from and --to must be RFC 3339" backfill daily
    --from 2026-01-02T00:00:00Z --to 2026-01-01T00:00:00Z)
run(2 "${ERR}sync needs --from" sync)
run(2 "${ERR}--from must be a JSON array" sync --from "{}")
run(2 "unknown action" frobnicate)
run(0 "^$" --help)
# Good arguments get as far as the connection, which fails: exit 1.
run(1 "could not connect" set daily ${OK} --cron "30 6 * * mon-fri"
    --timezone Europe/Berlin --catchup all --catchup-window PT6H)
