# Sourced by the tests of this folder: they use the harness's PostgreSQL
# (DATABASE_URL, from build/services.env) and never a private one. Without
# it a test skips (77) on a partial local run, and fails when
# RL_REQUIRE_SERVICES is set, as under `make test`: a missing service must
# not pass as a skipped check.
if [ -z "${DATABASE_URL:-}" ]; then
    if [ -n "${RL_REQUIRE_SERVICES:-}" ] && [ "${RL_REQUIRE_SERVICES}" != 0 ]; then
        echo "DATABASE_URL is not set but RL_REQUIRE_SERVICES is: the service" \
            "this test needs is missing (run \`make services-up\`)" >&2
        exit 1
    fi
    echo "DATABASE_URL is not set: skipping (partial local run)" >&2
    exit 77
fi
