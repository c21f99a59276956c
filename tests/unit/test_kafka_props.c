/* The librdkafka properties exactly-once rests on cannot be overridden by
 * RUNLEDGER_KAFKA_*: the configuration is refused naming the property
 * (never its value), and `runledger consume` exits 2 before it connects
 * to anything. Other properties still pass through. */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rl/config.h"
#include "rl/kafka.h"
#include "rltest.h"

extern char **environ;

static const struct {
    const char *env;
    const char *property;
} own[] = {
    {"RUNLEDGER_KAFKA_ENABLE_AUTO_OFFSET_STORE", "enable.auto.offset.store"},
    {"RUNLEDGER_KAFKA_ENABLE_AUTO_COMMIT", "enable.auto.commit"},
    {"RUNLEDGER_KAFKA_AUTO_COMMIT_ENABLE", "auto.commit.enable"},
    {"RUNLEDGER_KAFKA_PARTITION_ASSIGNMENT_STRATEGY",
     "partition.assignment.strategy"},
    {"RUNLEDGER_KAFKA_AUTO_OFFSET_RESET", "auto.offset.reset"},
    {"RUNLEDGER_KAFKA_ENABLE_IDEMPOTENCE", "enable.idempotence"},
    {"RUNLEDGER_KAFKA_ACKS", "acks"},
    {"RUNLEDGER_KAFKA_REQUEST_REQUIRED_ACKS", "request.required.acks"},
};

/* Runs `runledger consume`; returns its exit code, stderr into err. */
static int
run_consume(char *err, size_t size)
{
    const char *bin = getenv("RUNLEDGER_BIN");
    char *argv[] = {(char *)bin, "consume", NULL};
    char path[] = "/tmp/test_kafka_props.XXXXXX";
    posix_spawn_file_actions_t fa;
    int fd = mkstemp(path), status = -1;
    ssize_t n;
    pid_t pid;

    RL_REQUIRE(bin && fd >= 0);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd, 2);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", 1, 0);
    RL_REQUIRE(posix_spawn(&pid, bin, &fa, NULL, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    RL_REQUIRE(waitpid(pid, &status, 0) == pid);
    n = pread(fd, err, size - 1, 0);
    err[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int
main(void)
{
    char errstr[512], err[4096];
    struct rl_config *cfg;

    /* Nothing to reach: the refusal comes before any connection. */
    setenv("DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none", 1);
    setenv("KAFKA_BOOTSTRAP_SERVERS", "127.0.0.1:1", 1);
    setenv("MODEL_BASE_URL", "http://127.0.0.1:1/v1", 1);
    setenv("RUNLEDGER_HTTP_PORT", "0", 1);

    for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++) {
        setenv(own[i].env, "secretvalue", 1);
        cfg = rl_config_load(errstr, sizeof(errstr));
        RL_CHECK(cfg == NULL);
        RL_CHECK(strstr(errstr, own[i].property) != NULL);
        RL_CHECK(strstr(errstr, "secretvalue") == NULL);
        rl_config_destroy(cfg);
        RL_CHECK(rl_kafka_own_property(own[i].property) != NULL);
        unsetenv(own[i].env);
    }

    /* The case of the brief: offsets stored before the run is durable. */
    setenv("RUNLEDGER_KAFKA_ENABLE_AUTO_OFFSET_STORE", "true", 1);
    RL_CHECK_INTEQ(run_consume(err, sizeof(err)), 2);
    RL_CHECK(strstr(err, "enable.auto.offset.store") != NULL);
    unsetenv("RUNLEDGER_KAFKA_ENABLE_AUTO_OFFSET_STORE");
    setenv("RUNLEDGER_KAFKA_PARTITION_ASSIGNMENT_STRATEGY",
           "cooperative-sticky", 1);
    RL_CHECK_INTEQ(run_consume(err, sizeof(err)), 2);
    RL_CHECK(strstr(err, "partition.assignment.strategy") != NULL);
    unsetenv("RUNLEDGER_KAFKA_PARTITION_ASSIGNMENT_STRATEGY");

    /* Everything else passes through. */
    setenv("RUNLEDGER_KAFKA_SECURITY_PROTOCOL", "plaintext", 1);
    setenv("RUNLEDGER_KAFKA_STATISTICS_INTERVAL_MS", "1000", 1);
    cfg = rl_config_load(errstr, sizeof(errstr));
    RL_CHECK(cfg != NULL);
    if (cfg)
        RL_CHECK_INTEQ((long long)cfg->kafka_props_count, 4);
    rl_config_destroy(cfg);
    RL_CHECK(rl_kafka_own_property("security.protocol") == NULL);
    RL_TEST_END();
}
