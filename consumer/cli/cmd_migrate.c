/* runledger migrate: applies the schema migrations compiled into this
 * binary to the ledger database. As the chart's pre-install hook it runs
 * first, so it also checks what the install needs and fails fast, saying
 * what is wrong, when waiting cannot help: a Secret the values name is
 * missing, or PostgreSQL refuses the connection for good. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "commands.h"
#include "rl/clock.h"
#include "rl/config.h"
#include "rl/db_conn.h"
#include "rl/db_migrate.h"
#include "rl/err.h"

/* An applied migration differs from this build's text: an operator has to
 * look, so it gets its own exit code. */
#define MIGRATE_EXIT_CHECKSUM 3
/* Retrying cannot help: a required secret is missing, or PostgreSQL
 * refused the connection for good. The chart's Job fails at once on it. */
#define MIGRATE_EXIT_FINAL 4

#define MIGRATE_SECRETS_MAX 32 /* as the usage says */
#define MIGRATE_WAIT_MAX 3600
/* Longest pause between two connection attempts. */
#define MIGRATE_BACKOFF_MAX_MS 5000

/* As printed, one literal per line: clang-format would rewrap it. */
/* clang-format off */
static const char usage_text[] =
"usage: runledger migrate [--database-url URL] [--schema NAME] [--wait SECONDS]\n"
"                         [--require-secret NAME/KEY=env:VAR|file:PATH ...]\n"
"\n"
"Applies the pending ledger migrations (schema/NNN_*.sql, compiled in),\n"
"each in its own transaction, under an advisory lock. Running it again\n"
"is a no-op. It first creates the database roles runledger_owner,\n"
"runledger_worker, runledger_console, runledger_relay and\n"
"runledger_readonly where missing (a login that may not create roles\n"
"needs them made beforehand: docs/deploying.md, Database roles), makes\n"
"its login a member of runledger_owner and works as that role, so it\n"
"owns every table and function.\n"
"\n"
"  --database-url URL  PostgreSQL connection string (default: DATABASE_URL,\n"
"                      else libpq's PG* variables)\n"
"  --schema NAME       create and use this schema instead of the\n"
"                      search_path default\n"
"  --wait SECONDS      keep retrying a connection that may yet succeed\n"
"                      (refused, timed out, host not found, the server\n"
"                      starting up) for up to SECONDS (0 to 3600, default\n"
"                      0: one attempt). A refusal that cannot heal\n"
"                      (authentication, TLS required but not offered, no\n"
"                      such database or role) ends it at once, exit 4\n"
"  --require-secret NAME/KEY=env:VAR|file:PATH\n"
"                      before connecting, check that key KEY of the\n"
"                      Kubernetes Secret NAME arrived as the environment\n"
"                      variable VAR or the file PATH (mounted optional, so\n"
"                      a missing Secret cannot hold the pod in\n"
"                      ContainerCreating); exit 4 naming each one missing\n"
"                      or empty. Up to 32 of them\n"
"\n"
"exit status: 0 applied or up to date, 1 failure (PostgreSQL unreachable\n"
"until --wait ran out, a migration failed), 2 bad usage, 3 an applied\n"
"migration was changed (checksum mismatch), 4 retrying cannot help (a\n"
"required secret is missing; PostgreSQL refused the connection for good)\n";
/* clang-format on */

/* One --require-secret: key `key` of Secret `name` is expected as the
 * environment variable or the file `where`. Points into argv. */
struct required_secret {
    char name[254];
    char key[254];
    int is_env;
    const char *where;
};

/* Parses NAME/KEY=env:VAR or NAME/KEY=file:PATH into rs. Returns 0 or -1.
 * Neither a Secret's name nor its keys can hold '/' or '='. */
static int
parse_required(const char *spec, struct required_secret *rs)
{
    const char *slash = strchr(spec, '/');
    const char *eq = slash ? strchr(slash, '=') : NULL;
    size_t name_len, key_len;

    if (!slash || !eq)
        return -1;
    name_len = (size_t)(slash - spec);
    key_len = (size_t)(eq - slash - 1);
    if (name_len == 0 || name_len >= sizeof(rs->name) || key_len == 0 ||
        key_len >= sizeof(rs->key))
        return -1;
    memcpy(rs->name, spec, name_len);
    rs->name[name_len] = '\0';
    memcpy(rs->key, slash + 1, key_len);
    rs->key[key_len] = '\0';
    if (strncmp(eq + 1, "env:", 4) == 0)
        rs->is_env = 1;
    else if (strncmp(eq + 1, "file:", 5) == 0)
        rs->is_env = 0;
    else
        return -1;
    rs->where = eq + 1 + (rs->is_env ? 4 : 5);
    return *rs->where ? 0 : -1;
}

/* Prints a line for each required secret that is missing or empty and
 * returns how many are. Never prints a value. */
static int
check_required(const struct required_secret *list, int n)
{
    int missing = 0;

    for (int i = 0; i < n; i++) {
        const struct required_secret *rs = &list[i];
        const char *problem = NULL;
        char reason[128];
        struct stat st;

        if (rs->is_env) {
            const char *value = getenv(rs->where);

            if (!value)
                problem = "not found";
            else if (!*value)
                problem = "is empty";
        } else if (stat(rs->where, &st) != 0) {
            if (errno == ENOENT || errno == ENOTDIR) {
                problem = "not found";
            } else {
                snprintf(reason, sizeof(reason), "cannot be read: %s",
                         strerror(errno));
                problem = reason;
            }
        } else if (st.st_size == 0) {
            problem = "is empty";
        }
        if (problem) {
            fprintf(stderr,
                    "runledger migrate: secret \"%s\" (key %s) %s (expected "
                    "as %s %s)\n",
                    rs->name, rs->key, problem,
                    rs->is_env ? "environment variable" : "file", rs->where);
            missing++;
        }
    }
    if (missing)
        fprintf(stderr,
                "runledger migrate: create %s in this namespace (kubectl "
                "create secret generic NAME --from-literal=KEY=...), or fix "
                "the values that name %s; not retried\n",
                missing == 1 ? "the secret" : "the secrets",
                missing == 1 ? "it" : "them");
    return missing;
}

static void
sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Connects, retrying what may heal for up to wait_s seconds. Returns the
 * connection, or NULL with *rc the exit code (the reason printed). */
static struct rl_db *
connect_waiting(const char *url, const char *schema, long wait_s, int *rc)
{
    int64_t start = rl_clock_ms();
    int64_t deadline = start + (int64_t)wait_s * 1000;
    int64_t backoff = 500;
    char errstr[1024];
    struct rl_db *db = NULL;

    for (int attempt = 1;; attempt++) {
        int64_t left;
        int err = rl_db_connect_try(&db, url, schema, errstr, sizeof(errstr));

        if (err == 0) {
            if (attempt > 1)
                fprintf(stderr,
                        "runledger migrate: connected at attempt %d, after "
                        "%lld ms\n",
                        attempt, (long long)(rl_clock_ms() - start));
            return db;
        }
        if (err == RL_ERR_INVALID) {
            fprintf(stderr,
                    "runledger migrate: %s\n"
                    "runledger migrate: not retried: another attempt with "
                    "this connection string fails the same way (fix the "
                    "database URL, or the server's users, databases or "
                    "TLS)\n",
                    errstr);
            *rc = MIGRATE_EXIT_FINAL;
            return NULL;
        }
        left = deadline - rl_clock_ms();
        if (err == RL_ERR_NOMEM || left <= 0) {
            if (wait_s > 0)
                fprintf(stderr,
                        "runledger migrate: %s (gave up after %d attempts "
                        "in %ld s)\n",
                        errstr, attempt, wait_s);
            else
                fprintf(stderr, "runledger migrate: %s\n", errstr);
            *rc = RL_EXIT_FAILURE;
            return NULL;
        }
        if (backoff > left)
            backoff = left;
        fprintf(stderr,
                "runledger migrate: %s (attempt %d; may heal: retrying in "
                "%lld ms, %lld s left)\n",
                errstr, attempt, (long long)backoff,
                (long long)((left + 999) / 1000));
        sleep_ms(backoff);
        backoff *= 2;
        if (backoff > MIGRATE_BACKOFF_MAX_MS)
            backoff = MIGRATE_BACKOFF_MAX_MS;
    }
}

int
rl_cmd_migrate(int argc, char **argv)
{
    static struct required_secret required[MIGRATE_SECRETS_MAX];
    const char *url = NULL;
    const char *schema = NULL;
    const char *wait_text = NULL;
    char errstr[1024];
    struct rl_db *db;
    enum rl_pg_pool_mode mode;
    long wait_s = 0;
    int nrequired = 0;
    int applied = 0;
    int err, rc = RL_EXIT_FAILURE;

    for (int i = 1; i < argc; i++) {
        const char *spec = NULL;

        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(usage_text, stdout);
            return RL_EXIT_OK;
        } else if (strcmp(argv[i], "--database-url") == 0 && i + 1 < argc) {
            url = argv[++i];
        } else if (strncmp(argv[i], "--database-url=", 15) == 0) {
            url = argv[i] + 15;
        } else if (strcmp(argv[i], "--schema") == 0 && i + 1 < argc) {
            schema = argv[++i];
        } else if (strncmp(argv[i], "--schema=", 9) == 0) {
            schema = argv[i] + 9;
        } else if (strcmp(argv[i], "--wait") == 0 && i + 1 < argc) {
            wait_text = argv[++i];
        } else if (strncmp(argv[i], "--wait=", 7) == 0) {
            wait_text = argv[i] + 7;
        } else if (strcmp(argv[i], "--require-secret") == 0 && i + 1 < argc) {
            spec = argv[++i];
        } else if (strncmp(argv[i], "--require-secret=", 17) == 0) {
            spec = argv[i] + 17;
        } else {
            /* Never echo the argument: it may be a URL with a password. */
            fprintf(stderr,
                    "runledger migrate: unknown or incomplete option "
                    "(argument %d)\n",
                    i);
            fputs(usage_text, stderr);
            return RL_EXIT_USAGE;
        }
        if (spec) {
            if (nrequired == MIGRATE_SECRETS_MAX ||
                parse_required(spec, &required[nrequired]) != 0) {
                fprintf(stderr,
                        "runledger migrate: --require-secret \"%s\" is not "
                        "NAME/KEY=env:VAR or NAME/KEY=file:PATH (at most %d "
                        "of them)\n",
                        spec, MIGRATE_SECRETS_MAX);
                return RL_EXIT_USAGE;
            }
            nrequired++;
        }
    }
    if (wait_text) {
        char *end;

        errno = 0;
        wait_s = strtol(wait_text, &end, 10);
        if (errno != 0 || end == wait_text || *end != '\0' || wait_s < 0 ||
            wait_s > MIGRATE_WAIT_MAX) {
            fprintf(stderr,
                    "runledger migrate: --wait must be 0 to %d seconds\n",
                    MIGRATE_WAIT_MAX);
            return RL_EXIT_USAGE;
        }
    }

    /* The migration lock is a session's: a transaction pool would let it
     * go with the first statement's transaction. */
    if (rl_config_pool_mode_parse(getenv("RUNLEDGER_PG_POOL_MODE"), &mode,
                                  errstr, sizeof(errstr)) != 0) {
        fprintf(stderr, "runledger migrate: %s\n", errstr);
        return RL_EXIT_USAGE;
    }
    if (check_required(required, nrequired) > 0)
        return MIGRATE_EXIT_FINAL;
    db = connect_waiting(url, schema, wait_s, &rc);
    if (!db)
        return rc;
    err = rl_db_migrate(db, &applied, errstr, sizeof(errstr));
    rl_db_destroy(db);
    if (err == RL_ERR_CHECKSUM) {
        fprintf(stderr, "runledger migrate: %s\n", errstr);
        return MIGRATE_EXIT_CHECKSUM;
    }
    if (err != 0) {
        fprintf(stderr, "runledger migrate: %s\n", errstr);
        return RL_EXIT_FAILURE;
    }
    if (applied == 0)
        printf("schema is up to date\n");
    else
        printf("applied %d migrations\n", applied);
    return RL_EXIT_OK;
}
