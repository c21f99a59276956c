# Runs `runledger id` for one CASE and checks its stdout, stderr and exit
# status byte for byte. Usage:
#   cmake -DRUNLEDGER=<binary> -DCASE=<name> -P cli_id.cmake

set(SEED_ID "70130901deca1ba5c508cd0730a67be6cb7bf82aa4ad3d766d68a219acb42719")
set(SEED_ARGS --job competitor-summary --tenant workspace-acme
              --at 2026-08-07T09:00:00+00:00 --version v1)

# run(<expected exit> <expected stdout> <expected stderr regex> args...)
function(run want_rc want_out want_err)
    execute_process(COMMAND ${RUNLEDGER} id ${ARGN}
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    string(REPLACE ";" " " args "${ARGN}")
    if(NOT rc STREQUAL want_rc)
        message(FATAL_ERROR
            "runledger id ${args}: exit ${rc}, want ${want_rc}\n${out}${err}")
    endif()
    if(NOT want_out STREQUAL "*" AND NOT out STREQUAL want_out)
        message(FATAL_ERROR
            "runledger id ${args}: stdout \"${out}\", want \"${want_out}\"")
    endif()
    if(NOT err MATCHES "${want_err}")
        message(FATAL_ERROR
            "runledger id ${args}: stderr \"${err}\" does not match "
            "\"${want_err}\"")
    endif()
endfunction()

if(CASE STREQUAL "prints_seed_vector")
    run(0 "${SEED_ID}\n" "^$" ${SEED_ARGS})
    # The same instant at another offset, options in another order.
    run(0 "${SEED_ID}\n" "^$" --version " v1 " --at 2026-08-07T14:30:00+05:30
        --tenant workspace-acme --job competitor-summary)
    run(0 "${SEED_ID}\n" "^$" ${SEED_ARGS} --window " PT1H ")
elseif(CASE STREQUAL "json_has_run_id_and_utc")
    run(0 "{\"run_id\":\"${SEED_ID}\",\"scheduled_at\":\"2026-08-07T09:00:00+00:00\"}\n"
        "^$" ${SEED_ARGS} --json)
    run(0 "{\"run_id\":\"711b500a0d9843fed6c21e86d0226cab06d823aa7958c1e19c37d92fbb733232\",\"scheduled_at\":\"2026-08-03T00:00:00+00:00\"}\n"
        "^$" --job competitor-summary --tenant workspace-acme
        --at 2026-08-07T09:37:12+02:00 --version v1 --window P1W --json)
elseif(CASE STREQUAL "naive_timestamp_exits_2")
    run(2 "" "^runledger id: naive_timestamp: scheduled_at has no utc offset\n$"
        --job competitor-summary --tenant workspace-acme
        --at 2026-08-07T09:00:00 --version v1)
    run(2 "" "^runledger id: invalid_timestamp: [^\n]*\n$"
        --job j --tenant t --at 2026-02-30T09:00:00Z --version v1)
    run(2 "" "^runledger id: invalid_window: [^\n]*\n$"
        ${SEED_ARGS} --window P1M1D)
elseif(CASE STREQUAL "bad_arguments_exit_2")
    run(2 "" "^runledger id: missing --job[^\n]*\n$"
        --tenant t --at 2026-08-07T09:00:00Z --version v1)
    run(2 "" "^runledger id: missing --version[^\n]*\n$"
        --job j --tenant t --at 2026-08-07T09:00:00Z)
    run(2 "" "^runledger id: unknown option --bogus[^\n]*\n$"
        ${SEED_ARGS} --bogus)
    run(2 "" "^runledger id: --job needs a value[^\n]*\n$" --job)
    run(2 "" "^runledger id: --job given more than once[^\n]*\n$"
        ${SEED_ARGS} --job other)
    run(2 "" "^runledger id: unexpected argument[^\n]*\n$" ${SEED_ARGS} extra)
    run(2 "" "^runledger id: empty_field:tenant: [^\n]*\n$"
        --job j --tenant " " --at 2026-08-07T09:00:00Z --version v1)
    run(2 "" "^runledger id: invalid_field:job: [^\n]*\n$"
        --job "a|b" --tenant t --at 2026-08-07T09:00:00Z --version v1)
elseif(CASE STREQUAL "help_exits_0")
    run(0 "*" "^$" --help)
    execute_process(COMMAND ${RUNLEDGER} id -h OUTPUT_VARIABLE out)
    if(NOT out MATCHES "^usage: runledger id --job JOB")
        message(FATAL_ERROR "runledger id -h: no usage on stdout: ${out}")
    endif()
else()
    message(FATAL_ERROR "unknown CASE ${CASE}")
endif()
