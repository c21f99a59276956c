/* The ledger thread's connection to PostgreSQL: opened again after a
 * backoff when one is lost, the first one asked whether a failover can
 * lose commits, and /readyz told when statements fail on every
 * connection. Every ledger file that sees a statement fail drops the
 * connection here; the loop (loop.c) opens the next. @locality ledger
 * thread */
#include "http.h"
#include "ledger_int.h"
#include "rl/clock.h"
#include "rl/db_conn.h"
#include "rl/db_dispatch.h"
#include "rl/db_positions.h"
#include "rl/log.h"

/* A connection that lived this long resets the backoff of the next. */
#define CONNECTION_SETTLED_MS 10000
#define CONNECT_BACKOFF_MIN_MS 100
#define CONNECT_BACKOFF_MAX_MS 5000

static void
back_off(struct ledger *lg)
{
    lg->next_connect = rl_clock_ms() + lg->connect_backoff;
    lg->connect_backoff = lg->connect_backoff < CONNECT_BACKOFF_MAX_MS / 2
                              ? lg->connect_backoff * 2
                              : CONNECT_BACKOFF_MAX_MS;
}

void
ledger_connection_init(struct ledger *lg)
{
    lg->connect_backoff = CONNECT_BACKOFF_MIN_MS;
}

void
ledger_drop_db(struct ledger *lg)
{
    rl_db_destroy(lg->db);
    lg->db = NULL;
    if (rl_clock_ms() - lg->connected_at >= CONNECTION_SETTLED_MS) {
        lg->connect_backoff = CONNECT_BACKOFF_MIN_MS;
        lg->next_connect = 0;
    } else {
        back_off(lg);
        if (lg->connect_backoff >= CONNECT_BACKOFF_MAX_MS / 2 && !lg->failing) {
            lg->failing = 1;
            rl_http_ledger_failing(lg->pl->http,
                                   "postgresql: the ledger's statements fail "
                                   "on every connection (see the log: a "
                                   "schema this build does not know?)");
        }
    }
}

void
ledger_connection_settled(struct ledger *lg)
{
    if (lg->failing && lg->db &&
        rl_clock_ms() - lg->connected_at >= CONNECTION_SETTLED_MS) {
        lg->failing = 0;
        rl_http_ledger_failing(lg->pl->http, NULL);
    }
}

/* The first connection says whether a failover can lose committed
 * transactions: without a synchronous standby the new primary may lack
 * the last registrations, which the consumers then read again
 * (consumed_positions), and the last completions, which are generated
 * again. */
static void
check_standbys(struct ledger *lg)
{
    char names[256], errstr[512];

    if (rl_db_synchronous_standby_names(lg->db, names, sizeof(names), errstr,
                                        sizeof(errstr)) != 0) {
        rl_log_debug(NULL, "ledger: %s", errstr);
        return;
    }
    if (names[0] == '\0')
        rl_log_warn(NULL, "ledger: the PostgreSQL primary has no synchronous "
                          "standby (synchronous_standby_names is empty): a "
                          "failover may lose its last commits; the consumers "
                          "read the events of lost registrations again, but "
                          "runs completed in them are generated again "
                          "(docs/deploying.md, PostgreSQL failover)");
}

int
ledger_connect(struct ledger *lg)
{
    char errstr[512];
    int first = lg->connected_at == 0;

    if (lg->db)
        return 1;
    if (rl_clock_ms() < lg->next_connect)
        return 0;
    lg->db =
        rl_db_connect_role(lg->cfg, RL_DB_ROLE_LEDGER, errstr, sizeof(errstr));
    if (!lg->db) {
        rl_log_warn(NULL, "ledger: %s", errstr);
        back_off(lg);
        return 0;
    }
    /* Read before any call is sent: a stored call without it could not be
     * told from another installation's. */
    if (!lg->installation_id[0] &&
        rl_db_installation_id(lg->db, lg->installation_id,
                              sizeof(lg->installation_id), errstr,
                              sizeof(errstr)) != 0) {
        rl_log_warn(NULL, "ledger: %s", errstr);
        rl_db_destroy(lg->db);
        lg->db = NULL;
        back_off(lg);
        return 0;
    }
    lg->connected_at = rl_clock_ms();
    if (first)
        check_standbys(lg);
    /* Perhaps another server than before (a failover): what it lost of
     * this process's registrations is read again, and the time it keeps
     * positions since is its own. */
    lg->recheck_positions = 1;
    lg->positions_kept_since = 0;
    return 1;
}
